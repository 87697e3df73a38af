"""The README's fidelity table is the ledger of what the harness runs by default.

Every row whose key is a config key must hold: each paper-table suite (configs/ablation/)
resolves its ReMe runs to the row's authors' value, and the same suite with
``experiment=paper_text`` to the row's paper-text value, unless the variant itself sets that
key (Table 3 switches reflection, the top-k suite sweeps top_k, ...). So neither the
configs nor the README can drift from the other without this failing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reme_cli.commands.ablate import plan

ROOT = Path(__file__).resolve().parents[1]
SUITES = sorted(p.stem for p in (ROOT / "configs" / "ablation").glob("*.yaml"))
BASE = ["model=qwen3-8b", "embedding=minilm"]
TICKED = re.compile(r"`([^`]*)`")


def ledger() -> list[tuple[str, object, object]]:
    """(key, authors' value, paper-text value) for each config key of the table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Fidelity: what the authors ran vs the paper's text", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`") or cells[0].endswith("=`"):
            continue
        keys = TICKED.findall(cells[0])
        authors = [yaml.safe_load(v.split(":")[0]) for v in TICKED.findall(cells[1])][:len(keys)]
        paper = authors if cells[2].startswith("same") else \
            [yaml.safe_load(v) for v in TICKED.findall(cells[2])][:len(keys)]
        assert len(authors) == len(paper) == len(keys), f"README fidelity row unreadable: {line}"
        rows += list(zip(keys, authors, paper))
    return rows


def value(cfg, dotted: str):
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def test_the_ledger_reads_every_config_row():
    keys = [k for k, _, _ in ledger()]
    # Rows the table must hold; a README edit that made them unreadable fails here.
    for must in ("memory.reflection.max_retries", "memory.u_credit", "memory.deletion.every", "eval.dynamic_workers",
                 "memory.rerank", "memory.dedup_threshold", "summarizer.temperature", "benchmark.release"):
        assert must in keys
    for must in ("benchmark.tool_note", "benchmark.tool_response", "benchmark.max_steps_per_turn",
                 "benchmark.empty_turns", "benchmark.history_reasoning", "eval.task_order", "model.sampling.max_tokens"):
        assert must in keys  # BFCL as the authors' agent ran it, and what its requests sent
    assert len(keys) == len(set(keys))


@pytest.fixture
def any_release(monkeypatch):
    """Planning counts the split's tasks; the suites' release would re-execute the process
    with another bfcl-eval first. Both releases have the same split, so plan here."""
    import reme_cli.bench.bfcl as bfcl

    monkeypatch.setattr(bfcl, "ensure_release", lambda release: None)


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("which", ["authors", "paper_text"])
def test_every_paper_table_suite_resolves_to_the_ledger(suite, which, any_release):
    extra = ["experiment=paper_text"] if which == "paper_text" else []
    checked = 0
    for job in plan(suite, [*BASE, *extra]).runs:
        if job.cfg.memory.name != "reme":
            continue
        own = " ".join(o for o in job.overrides if not o.startswith(("memory.pool=", "out_dir=")))
        for key, authors, paper in ledger():
            if key in own.split("=")[0] or f"{key}=" in own:
                continue  # the variant sets it: that is what the table varies
            want = authors if which == "authors" else paper
            assert value(job.cfg, key) == want, f"{suite}/{job.label}: {key}={value(job.cfg, key)!r}, ledger {want!r}"
            checked += 1
    assert checked > 0, f"{suite} has no ReMe run to check"
