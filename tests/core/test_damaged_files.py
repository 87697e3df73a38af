"""A damaged file reme reads back costs one line, never a traceback (issue 55, items 5-6).

Every kind of JSON or JSON-lines file reme reads is declared once as a ``JsonFile``
(``reme_cli/core/reading.py``), which registers it; the registry is filled by importing every
module of reme, and a planted reader outside it is caught (a ``json.loads`` in a module that is
not on the list of parsers of text that never was a file). Each registered kind is fed a
nested, a wrong-typed, a truncated and a binary-garbage variant at the reader level; the
commands that read such files are run through the CLI (in this process: ``run_reme``) on run
directories and pools written here, and every method's saved pool is damaged file by file and
shown through ``reme pool stats``'s own function. Nothing here starts a process.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import random
import shlex
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from rich.console import Console

import reme_cli
from reme_cli.core.errors import UserError
from reme_cli.core.reading import FILES, MAX_DEPTH, Damaged, JsonFile
from tests.conftest import run_reme, run_reme_together

ROOT = Path(reme_cli.__file__).parent
# Programs AppWorld's own interpreter runs (they import their neighbours as top-level modules).
NOT_REME_PROCESS = "reme_cli.bench.appworld.venv_programs"
GARBAGE = random.Random(55).randbytes(2048) + b"\n"  # the same "random" bytes every run
NESTED = "[" * 200_000  # json's parser recursed once per level: a RecursionError
DEEP = '{"a": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}"  # parses; deeper than any reader allows

# Parsers of text that never was a file reme wrote, each left to its own rules, and why.
# A json.load/json.loads anywhere else is a file read outside core/reading.py.
NOT_FILES = {
    "reme_cli/agent/protocols.py": (2, "a model's answer: its tool calls, as the protocol parses them"),
    "reme_cli/llm/json_reply.py": (1, "JSON out of an LLM's answer, with its own repairs"),
    "reme_cli/llm/shared.py": (1, "an environment variable reme sets for its own child processes"),
    "reme_cli/methods/reme/authors_flow.py": (4, "the summarizer's answers, as the authors' code parsed them"),
    "reme_cli/methods/langmem/chat_model.py": (1, "a tool call's arguments in the model's answer"),
    "reme_cli/methods/langmem/conversation.py": (1, "a tool call's arguments in the model's answer"),
    "reme_cli/testing/scripted_server.py": (2, "an HTTP request's body (the test double's server)"),
    "reme_cli/core/config.py": (1, "a config round-tripped through JSON in memory"),
    "reme_cli/bench/worker.py": (1, "a message on a worker process's pipe (the supervisor checks them)"),
    "reme_cli/bench/appworld/venv_programs/protocol.py": (2, "pipe messages, in AppWorld's own interpreter"),
    "reme_cli/bench/bfcl/benchmark.py": (2, "tool docs round-tripped in memory; a model's call arguments"),
    "reme_cli/bench/bfcl/calls.py": (1, "a model's call arguments, bounded by the call parser"),
    "reme_cli/run/probes.py": (1, "a probe's tool-call arguments in the model's answer (`reme check`)"),
}


def _json_calls(path: Path) -> int:
    """json.load / json.loads (or another JSON library's) calls in a module's source."""
    count = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "loads") \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("json", "orjson", "ujson",
                                                                                       "simplejson"):
            count += 1
    return count


def test_no_module_parses_a_file_outside_the_reader():
    found = {str(p.relative_to(ROOT.parent)): n for p in sorted(ROOT.rglob("*.py")) if (n := _json_calls(p))}
    found.pop("reme_cli/core/reading.py")
    assert found == {k: n for k, (n, _) in NOT_FILES.items()}, (
        "a file read outside reme_cli/core/reading.py: declare its kind as a JsonFile and read it through it "
        "(or, for text that never was a file, add it to NOT_FILES with the reason)")


def test_the_check_sees_a_planted_reader(tmp_path):
    planted = tmp_path / "oops.py"
    planted.write_text("import json\nfrom pathlib import Path\n\ndef read(p):\n    return json.loads(Path(p).read_text())\n")
    assert _json_calls(planted) == 1


def _import_everything() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages([str(ROOT)], "reme_cli.") if not m.name.startswith(NOT_REME_PROCESS)]
    for name in names:
        importlib.import_module(name)
    return names


def _declared() -> set[str]:
    """The kinds the source declares: every JsonFile("name", ...), and a manifest and a records
    kind per PoolFiles(format, method, records, label, ...) (named for the label)."""
    names = set()
    for path in ROOT.rglob("*.py"):
        if NOT_REME_PROCESS.replace(".", "/") in str(path):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
            if node.func.id == "JsonFile" and args and args[0] is not None:
                names.add(args[0])
            elif node.func.id == "PoolFiles" and len(args) > 3 and None not in args[2:4]:
                names |= {f"{args[3]}'s pool manifest.json", f"{args[3]}'s pool {args[2]}"}
    return names


def test_every_declared_kind_is_registered():
    _import_everything()
    declared = _declared()
    assert declared and declared <= set(FILES), declared - set(FILES)
    assert len(declared) >= 30  # run files, every method's pool and work logs, caches, locks, marks, data files


# ------------------------------------------------------------------ every registered kind, four ways


def _value(kinds: Any) -> Any:
    first = kinds[0] if isinstance(kinds, tuple) else kinds
    return {str: "x", int: 1, float: 0.5, bool: True, dict: {}, list: [], type(None): None}[first]


def _wrong(kinds: Any) -> Any:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    fits = {str: lambda v: isinstance(v, str), int: lambda v: type(v) is int, bool: lambda v: type(v) is bool,
            float: lambda v: type(v) in (int, float), dict: lambda v: isinstance(v, dict),
            list: lambda v: isinstance(v, list), type(None): lambda v: v is None}
    return next(v for v in ("x", 7, 0.5, True, {"k": 1}, [1], None) if not any(fits[k](v) for k in kinds))


def _good(kind: JsonFile) -> Any:
    if kind.top is list:
        return []
    return {key: _value(want) for key, want in kind.shape.items()} | {k: "x" for k in kind.required
                                                                       if k not in kind.shape}


def _variants(kind: JsonFile) -> dict[str, bytes]:
    good = json.dumps(_good(kind)).encode()
    out = {"nested": NESTED.encode(), "deep": DEEP.encode(), "truncated": good[: max(1, len(good) // 2)],
           "binary garbage": GARBAGE}
    if kind.shape:
        for key, want in kind.shape.items():
            out[f"wrong-typed {key}"] = json.dumps({**_good(kind), key: _wrong(want)}).encode()
    else:  # no keys to get wrong: the wrong top level
        out["wrong-typed top"] = json.dumps({"a": 1} if kind.top is list else [1]).encode()
    if kind.required:
        out[f"without {kind.required[0]}"] = json.dumps({k: v for k, v in _good(kind).items()
                                                          if k != kind.required[0]}).encode()
    return out


def _kinds() -> list[JsonFile]:
    _import_everything()
    return sorted(FILES.values(), key=lambda k: k.name)


KINDS = _kinds()


def _one_line(text: str, path: Path) -> None:
    assert "\n" not in text and str(path) in text, text


@pytest.mark.parametrize("kind", [k for k in KINDS if not k.lines], ids=lambda k: k.name)
def test_a_damaged_document_is_one_line_naming_the_file(kind: JsonFile, tmp_path):
    path = tmp_path / "file.json"
    path.write_text(json.dumps(_good(kind)))
    assert kind.read(path) == _good(kind) and kind.probe(path) == _good(kind)
    for name, raw in _variants(kind).items():
        path.write_bytes(raw)
        with pytest.raises(Damaged) as err:
            kind.read(path)
        _one_line(str(err.value), path)
        if name.startswith(("wrong-typed ", "without ")) and kind.shape:
            assert name.split(" ", 1)[1] in err.value.why, (name, err.value.why)  # names the key
        if not name.startswith(("wrong-typed", "without")):
            assert kind.probe(path) is None, name  # "is this one of ours?": no
    assert kind.read(tmp_path / "missing.json") is None and kind.probe(tmp_path / "missing.json") is None


@pytest.mark.parametrize("kind", [k for k in KINDS if k.lines], ids=lambda k: k.name)
def test_a_damaged_line_is_left_out_with_a_warning_naming_it(kind: JsonFile, tmp_path, capsys):
    good = json.dumps(_good(kind)).encode() + b"\n"
    for name, raw in _variants(kind).items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(good + raw + (b"" if raw.endswith(b"\n") else b"\n") + good)
        assert kind.records(path) == [_good(kind)] * 2, name  # the good lines still serve
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"warning: {path} line 2: ") and "left out" in err[0], (name, err)
        with pytest.raises(Damaged) as refused:  # a strict reader (a pool's own records) refuses it
            kind.records(path, strict=True)
        _one_line(str(refused.value), path)
        assert f"{path} line 2 is damaged" in str(refused.value)
    # A last line cut short while being written (or by a kill) is left out without a word.
    path = tmp_path / "torn.jsonl"
    path.write_bytes(good + good[:-5])
    assert kind.records(path) == [_good(kind)] and capsys.readouterr().err == ""


def test_a_fifo_and_a_device_are_not_read(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    kind = FILES["a run's manifest.json"]
    for path in (fifo, Path("/dev/zero"), tmp_path):  # a read of either would never end; a folder
        with pytest.raises(Damaged, match="not a regular file|a folder, not a file"):
            kind.read(path)
        assert kind.probe(path) is None


def test_a_file_over_its_bound_is_refused_before_it_is_parsed(tmp_path):
    kind = FILES["a reme lock file"]
    path = tmp_path / "big.json"
    path.write_bytes(b'{"host": "' + b"x" * kind.max_bytes + b'"}')
    with pytest.raises(Damaged, match=f"larger than {kind.max_bytes:,} bytes"):
        kind.read(path)
    lines = JsonFile("a test's long lines", fix="", lines=True, max_bytes=100)
    path.write_bytes(b'{"a": "' + b"y" * 500 + b'"}\n{"b": 1}\n')
    assert lines.records(path) == [{"b": 1}]


# ------------------------------------------------------------------ the commands that read them


def make_run(path: Path, extra: bytes = b"") -> Path:
    """A finished run of two BFCL units (one solved), written as reme writes one, no process."""
    from reme_cli.core.config import compose, config_hash, to_dict
    from reme_cli.core.trials import UnitRecord

    tasks = ["multi_turn_base_0", "multi_turn_base_1"]
    cfg = compose(["model=qwen3-8b", "eval.runs=1", "eval.seeds=1", f"benchmark.task_ids=[{','.join(tasks)}]"])
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    (path / "manifest.json").write_text(json.dumps({"schema_version": 2, "kind": "eval", "status": "complete",
                                                    "config_hash": config_hash(cfg), "task_ids": tasks}))
    units = [UnitRecord(unit=f"s0/r0/{t}", task_id=t, seed=0, run=0, success=i == 0, stop_reason="answered")
             for i, t in enumerate(tasks)]
    (path / "trials.jsonl").write_bytes(b"".join(json.dumps(u.to_dict()).encode() + b"\n" for u in units) + extra)
    return path


def assert_error(proc, *says: str) -> str:
    """Exit 2, one error line naming what it must (a warning line before it is allowed), no traceback."""
    assert "Traceback" not in proc.stderr and proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and all(line.startswith("warning: ") for line in lines[:-1]), lines
    assert all(s in lines[-1] for s in says), lines[-1]
    return lines[-1]


def _warned_of_line_3(proc, run: Path) -> None:
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"warning: {run / 'trials.jsonl'} line 3: not UTF-8 text" in proc.stderr, proc.stderr[-3000:]


def test_report_and_view_read_a_trials_file_with_random_bytes_appended(tmp_path):
    run = make_run(tmp_path / "run", extra=GARBAGE)
    report, view = run_reme_together((["report", "run"], tmp_path),
                                     (["view", "--export", "page.html", "run"], tmp_path))
    _warned_of_line_3(report, run)
    _warned_of_line_3(view, run)
    metrics = (run / "report" / "metrics.csv").read_text().splitlines()
    row = dict(zip(metrics[0].split(","), metrics[1].split(","), strict=False))
    assert (row["n_units"], row["avg_mean"]) == ("2", "0.500000")  # the two good records serve
    assert "multi_turn_base_1" in (tmp_path / "page.html").read_text()


def test_what_track_sync_logs_is_read_from_the_good_records(tmp_path, capsys):
    from reme_cli.track.content import RunContent

    run = make_run(tmp_path / "run", extra=GARBAGE)
    content = RunContent.read(run)  # what `reme track sync` logs of a run (its tracker aside: below)
    assert [t.task_id for t in content.trials] == ["multi_turn_base_0", "multi_turn_base_1"]
    assert content.params()["run.hash"] and content.tracked_metrics() is not None
    assert f"warning: {run / 'trials.jsonl'} line 3: not UTF-8 text" in capsys.readouterr().err


@pytest.mark.slow  # MLflow runs `uname -p`
def test_track_sync_logs_a_run_whose_trials_file_has_random_bytes_appended(tmp_path):
    pytest.importorskip("mlflow", reason="the tracking extra: bash scripts/install.sh --tracking")
    run = make_run(tmp_path / "run", extra=GARBAGE)
    proc = run_reme(["track", "sync", "run", "tracker=mlflow", f"tracker.uri=sqlite:///{tmp_path / 'mlflow.db'}"],
                    tmp_path)
    _warned_of_line_3(proc, run)
    assert f"logged {run}" in proc.stderr


def test_a_unit_record_of_the_wrong_types_is_refused_naming_its_line_and_key(tmp_path):
    line = {"unit": "s0/r0/multi_turn_base_2", "task_id": "multi_turn_base_2", "seed": "zero", "run": 0}
    make_run(tmp_path / "run", extra=json.dumps(line).encode() + b"\n")
    assert_error(run_reme(["report", "run"], tmp_path), "trials.jsonl line 3 is not a unit record",
                 "seed='zero' is not a whole number")


@pytest.fixture
def reme_pool(tmp_path) -> Path:
    from tests.core.test_safe_state import reme_pool as make

    return make(tmp_path / "built" / "pool").parent


def test_pool_stats_and_show_on_a_damaged_manifest_or_line(reme_pool, tmp_path):
    def damaged(name: str, file: str, text: str, append: bool = False) -> Path:
        copy = Path(shutil.copytree(reme_pool, tmp_path / name))
        with open(copy / "pool" / file, "a" if append else "w") as f:
            f.write(text)
        return copy

    manifest = json.loads((reme_pool / "pool" / "manifest.json").read_text())
    nested = damaged("nested", "manifest.json", NESTED)
    typed = damaged("typed", "manifest.json", json.dumps({**manifest, "embedding": 5}))
    line = damaged("line", "experiences.jsonl", NESTED + "\n", append=True)
    stats, wrong, shown = run_reme_together((["pool", "stats", str(nested)], tmp_path),
                                            (["pool", "stats", str(typed)], tmp_path),
                                            (["pool", "show", str(line)], tmp_path))
    assert_error(stats, f"{nested / 'pool' / 'manifest.json'} is damaged (nested deeper than {MAX_DEPTH} levels)")
    assert_error(wrong, f"{typed / 'pool' / 'manifest.json'} is damaged (embedding=5 is not an object")
    assert_error(shown, "experiences.jsonl has 7 lines, its manifest records 6")
    assert f"warning: {line / 'pool' / 'experiences.jsonl'} line 7: nested deeper than" in shown.stderr


# ------------------------------------------------------------------ every method's saved pool, file by file


class MiniLMShaped:
    """Deterministic unit vectors under the bundled model's name and width (a pool of it
    passes every method's embedding check), without loading it."""

    name, dim = "all-MiniLM-L6-v2", 384

    def embed(self, texts):
        rows = [np.random.default_rng(len(t) * 7919 + sum(map(ord, t))).random(self.dim) for t in texts]
        vecs = np.array(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True).clip(1e-9)


def _pools(root: Path) -> dict[str, Path]:
    """One saved pool of every built-in method, each written by the method's own code."""
    from reme_cli.core import integrity
    from reme_cli.core.io import write_json_atomic
    from reme_cli.methods.ace.playbook import Playbook
    from reme_cli.methods.amem.notes import Note, NoteStore
    from reme_cli.methods.dc.cheatsheet import Cheatsheet
    from reme_cli.methods.dc.pairs import Pair, PairStore
    from reme_cli.methods.dc.pool import DCPool
    from reme_cli.methods.langmem.prompt import method as prompt_method
    from reme_cli.methods.reasoningbank.items import ItemStore, Record
    from reme_cli.methods.reme.experience import Experience
    from reme_cli.methods.reme.pool import Pool

    emb = MiniLMShaped()
    pools = {name: root / name / "pool" for name in ("reme", "amem", "reasoningbank", "dc", "ace", "langmem_prompt")}
    pool = Pool.create(pools["reme"], emb)
    pool.add([Experience(when_to_use=f"When doing task {i}", content=f"Do step {i} first.", source="success")
              for i in range(3)])
    pool.save()
    NoteStore(emb, [Note("n1", "ls then cd", links=["n2"]), Note("n2", "mv needs the folder")],
              emb.embed(["a", "b"])).save(pools["amem"])
    bank = ItemStore(emb)
    bank.apply([{"unit": "t1", "op": "add", "record": asdict(Record.new("move a file", "t1", "failure", [
        {"title": "Check the path", "description": "d", "content": "ls before mv"}]))}])
    bank.save(pools["reasoningbank"])
    DCPool(Cheatsheet("Version: 2\n- log in first", 2), PairStore(emb, [Pair("t0", "move a file", "mv a b")]),
           {}).save(pools["dc"], "cumulative")
    Playbook.parse("## OTHERS\n[misc-00001] keep it short\n").save(pools["ace"])
    where = pools["langmem_prompt"]
    where.mkdir(parents=True)
    meta = {"format": prompt_method.POOL_FORMAT, "format_version": 1, "method": prompt_method.METHOD,
            "kind": "prompt_memory", "version": "abc", "steps": 0, "trajectories": 0, "built_by": {}}
    write_json_atomic(where / prompt_method.POOL_FILE, {**meta, "prompt": "Be careful."})
    (where / prompt_method.PROMPT_FILE).write_text("Be careful.\n")
    write_json_atomic(where / prompt_method.MANIFEST_FILE,
                      {**meta, "files": integrity.record(where, (prompt_method.POOL_FILE,))})
    if importlib.util.find_spec("langgraph") is not None:
        from reme_cli.methods.langmem.store import EpisodeStore

        episode = {"observation": "moving files", "thoughts": "I check", "action": "I cd", "result": "done"}
        pools["langmem"] = root / "langmem" / "pool"
        EpisodeStore(emb, [{"key": "e1", "value": {"kind": "Episode", "content": episode}}]).save(pools["langmem"])
    return pools


def test_every_methods_pool_damaged_file_by_file_is_one_line_or_a_warning(tmp_path):
    from reme_cli.commands.pool import show_stats

    pools = _pools(tmp_path / "good")
    tried = 0
    for method, pool in pools.items():
        show_stats(pool.parent, [f"memory={method}"], Console(record=True, width=200))  # the good one reads
        for file in sorted(p for p in pool.iterdir() if p.suffix in (".json", ".jsonl")):
            whole = file.read_bytes()
            last = ("appended", whole + GARBAGE) if file.suffix == ".jsonl" else ("truncated", whole[: len(whole) // 2])
            for name, raw in {"nested": NESTED.encode(), "garbage": GARBAGE, last[0]: last[1],
                              "wrong-typed": json.dumps({"method": 5, "format": [], "files": 1, "id": {}}).encode(),
                              }.items():
                copy = tmp_path / "bad" / f"{method}-{file.name}-{name}".replace(" ", "_")
                shutil.copytree(pool.parent, copy)
                (copy / "pool" / file.name).write_bytes(raw)
                try:
                    show_stats(copy, [f"memory={method}"], Console(record=True, width=200))
                except UserError as exc:  # one line (a Damaged one names the file)
                    assert "\n" not in str(exc), (method, file.name, name, str(exc))
                except Exception as exc:  # noqa: BLE001: what a user would see as a traceback
                    pytest.fail(f"{method} {file.name} {name}: {type(exc).__name__}: {exc}")
                tried += 1
    assert tried >= 6 * 2 * 4  # four variants of at least two files of every method's pool


# ------------------------------------------------------------------ the smaller items (issue 55, item 6)


def test_a_value_hydras_lexer_cannot_read_is_answered_with_how_to_quote_it(tmp_path):
    from reme_cli.core.config import compose

    pool, sweep = run_reme_together((["eval", "memory=reme", "memory.pool=/data/Müller pools"], tmp_path),
                                    (["eval", "-m", "out_dir=a#b,c"], tmp_path))
    line = assert_error(pool, "memory.pool=/data/Müller pools: Hydra cannot read a value with non-ASCII letters "
                              """unquoted; quote it, as the shell passes it: 'memory.pool="/data/Müller pools"'""")
    assert_error(sweep, "the character '#'", """'out_dir="a#b",c'""")  # a sweep's values stay a sweep
    quoted = shlex.split(line.rsplit(": ", 1)[1])[0]  # as the shell hands it over
    assert compose(["memory=reme", quoted]).memory.pool == "/data/Müller pools"


@pytest.mark.parametrize("out, says", [
    ("/", "is the file system's root"),
    ("/tmp", "is a folder right under /"),
    ("/usr/local/share/reme-report", "is inside /usr, the system's"),
    ("HOME", "is your home folder"),
    (".", "is the current folder"),
])
def test_report_out_refuses_a_system_folder_before_reading_or_walking_anything(out, says, tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    make_run(work / "run")
    out = str(home) if out == "HOME" else out
    proc = run_reme(["report", "run", "--out", out], work, env={"HOME": str(home)})
    assert_error(proc, f"--out {out} {says}", "give a new folder (e.g. --out ./report)")
    assert not (work / "run" / "report").exists() and (home / "notes.txt").read_text() == "mine"
    assert not list((work / out).resolve().parent.glob("*.lock"))  # not even a lock was made beside it


def test_pool_import_refuses_a_system_folder_and_a_device_or_fifo_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "pool.jsonl"
    os.mkfifo(fifo)
    usr, zero, named = run_reme_together(
        (["pool", "import", "official:bfcl/qwen3-8b", "--out", "/usr/local/share/reme-pool"], tmp_path),
        (["pool", "import", "/dev/zero", "--out", "pool"], tmp_path),
        (["pool", "import", str(fifo), "--out", "pool"], tmp_path))
    assert_error(usr, "--out /usr/local/share/reme-pool is inside /usr, the system's")
    assert_error(zero, "/dev/zero is not a regular file (a device, FIFO or socket)")
    assert_error(named, f"{fifo} is not a regular file (a device, FIFO or socket)")
    assert not (tmp_path / "pool").exists()


def test_a_suite_file_nested_deep_or_of_random_bytes_is_one_line(tmp_path):
    (tmp_path / "deep.yaml").write_text(NESTED)
    (tmp_path / "bytes.yaml").write_bytes(GARBAGE)
    deep, garbage = run_reme_together(*((["ablate", str(tmp_path / name), "--dry-run", "model=qwen3-8b"], tmp_path)
                                        for name in ("deep.yaml", "bytes.yaml")))
    assert_error(deep, f"suite {tmp_path / 'deep.yaml'} is not valid YAML: nested too deep")
    assert_error(garbage, f"suite {tmp_path / 'bytes.yaml'} is not valid YAML")
