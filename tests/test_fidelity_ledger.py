"""The manual's fidelity table (docs/fidelity.md, "The ledger") is the ledger of what the harness runs by default.

Every row whose key is a config key must hold: each paper-table suite (configs/ablation/)
resolves its ReMe runs to the row's authors' value, and the same suite with
``experiment=paper_text`` to the row's paper-text value, unless the variant itself sets that
key (Table 3 switches reflection, the top-k suite sweeps top_k, ...). So neither the
configs nor the manual can drift from the other without this failing."""

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
LEDGER = ROOT / "docs" / "fidelity.md"


def ledger_table() -> str:
    """The ledger section of the fidelity page: its heading to the next one."""
    return LEDGER.read_text().split("\n## The ledger\n", 1)[1].split("\n#", 1)[0]


def ledger() -> list[tuple[str, object, object]]:
    """(key, authors' value, paper-text value) for each config key of the table."""
    section = ledger_table()
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`") or cells[0].endswith("=`"):
            continue
        keys = TICKED.findall(cells[0])
        authors = [yaml.safe_load(v.split(":")[0]) for v in TICKED.findall(cells[1])][:len(keys)]
        paper = authors if cells[2].startswith("same") else \
            [yaml.safe_load(v) for v in TICKED.findall(cells[2])][:len(keys)]
        assert len(authors) == len(paper) == len(keys), f"fidelity ledger row unreadable: {line}"
        rows += list(zip(keys, authors, paper))
    return rows


def on_appworld() -> dict[str, object]:
    """Rows whose authors' value names AppWorld's own: "`5` on BFCL (`1` on AppWorld ...)"."""
    out = {}
    for line in ledger_table().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        found = re.search(r"`([^`]+)` on AppWorld", cells[1]) if len(cells) == 4 else None
        if found and cells[0].startswith("`"):
            out[TICKED.findall(cells[0])[0]] = yaml.safe_load(found.group(1))
    return out


ON_APPWORLD = on_appworld()


def has(cfg, dotted: str) -> bool:
    try:
        value(cfg, dotted)
    except AttributeError:
        return False
    return True


def value(cfg, dotted: str):
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def test_the_ledger_reads_every_config_row():
    keys = [k for k, _, _ in ledger()]
    # Rows the table must hold; an edit of the page that made them unreadable fails here.
    for must in ("memory.reflection.max_retries", "memory.u_credit", "memory.deletion.every", "eval.dynamic_workers",
                 "memory.rerank", "memory.dedup_threshold", "summarizer.temperature", "benchmark.release"):
        assert must in keys
    for must in ("benchmark.tool_note", "benchmark.tool_response", "benchmark.max_steps_per_turn",
                 "benchmark.empty_turns", "benchmark.history_reasoning", "eval.task_order", "model.sampling.max_tokens"):
        assert must in keys  # BFCL as the authors' agent ran it, and what its requests sent
    assert len(keys) == len(set(keys))


BENCHMARKS = {"bfcl_v3": [], "appworld": ["benchmark=appworld"]}


@pytest.fixture(scope="module")
def planned():
    """Each suite's plan, once per benchmark and reading. Planning counts the split's tasks
    (the suites' BFCL release would re-execute the process with another bfcl-eval first;
    AppWorld's needs its data): the ledger is about the configs, so the count is stubbed."""
    import reme_cli.commands.ablate as ablate

    cache: dict[tuple[str, str, str], object] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ablate, "_units", lambda cfg, samples=None, notes=None: (1, cfg.benchmark.max_interactions))

        def get(suite: str, bench: str, which: str):
            if (suite, bench, which) not in cache:
                extra = ["experiment=paper_text"] if which == "paper_text" else []
                cache[suite, bench, which] = plan(suite, [*BASE, *BENCHMARKS[bench], *extra])
            return cache[suite, bench, which]

        yield get


# AppWorld in the authors' reading: experiment=paper_text sets the same keys on both benchmarks.
READINGS = [("bfcl_v3", "authors"), ("bfcl_v3", "paper_text"), ("appworld", "authors")]


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("bench, which", READINGS)
def test_every_paper_table_suite_resolves_to_the_ledger(suite, which, bench, planned):
    checked = 0
    for job in planned(suite, bench, which).runs:
        if job.cfg.memory.name != "reme":
            continue
        own = " ".join(o for o in job.overrides if not o.startswith(("memory.pool=", "out_dir=")))
        for key, authors, paper in ledger():
            if key in own.split("=")[0] or f"{key}=" in own:
                continue  # the variant sets it: that is what the table varies
            if not has(job.cfg, key):
                continue  # another benchmark's key (benchmark.release is BFCL's)
            want = authors if which == "authors" else paper
            if which == "authors" and bench == "appworld" and key in ON_APPWORLD:
                want = ON_APPWORLD[key]  # the row's "(`V` on AppWorld)"
            assert value(job.cfg, key) == want, f"{suite}/{job.label}: {key}={value(job.cfg, key)!r}, ledger {want!r}"
            checked += 1
    assert checked > 0, f"{suite} has no ReMe run to check"


# Pools of the paper's tables that the authors never released: built here, with their summarizer.
NEVER_RELEASED = {("table2", "trajectory"), ("table4", "s14b"), ("table4", "s32b")}
PAPER_SUITES = [s for s in SUITES if s != "methods"]


@pytest.mark.parametrize("suite", PAPER_SUITES)
@pytest.mark.parametrize("bench", BENCHMARKS)
def test_every_table_starts_from_the_released_pool(suite, bench, planned):
    """The ledger's "pools the tables start from" row: every ReMe run of a paper table runs
    on the authors' released pool, but for the pools they never released."""
    p = planned(suite, bench, "authors")
    pools = {j.name: j for j in p.pools}
    for job in p.runs:
        if job.cfg.memory.name != "reme" or job.pool is None:
            continue
        pool = pools[job.pool]
        if (suite, job.pool) in NEVER_RELEASED:
            assert pool.source is None and pool.cfg.memory.prompts == "authors", job.label
        else:
            assert pool.source == f"official:{'bfcl' if bench == 'bfcl_v3' else bench}/qwen3-8b", job.label
    assert "pools the tables start from | the authors' released pool of the model and benchmark, in every suite" \
        in ledger_table()
