"""A run directory read as one typed, versioned record: the one way every layer reads a run
(compare inspect_ai's ``read_eval_log`` and ``EvalLog``).

``read_run_log(path)`` reads the small parts at once and checks them: ``config.yaml`` (the
resolved config, ``RunConfig``) and ``manifest.json`` (``Manifest``); a damaged one is refused
in one line naming the file and the way out. The large parts are read when first asked for
(inspect_ai's ``header_only``, the other way round): ``trials`` (``trials.jsonl``, typed by
``core/trials.py``), ``metrics`` (an eval run's ``metrics.json``), ``build_report`` (a build's
``report.json``) and each dynamic stream's commit log (``commits``).

Runs written by earlier versions read the same: a manifest without ``schema_version`` is
version 1 (every reme before the field; its fields are the same), a unit line without one is
upgraded by ``UnitRecord.from_dict``, and keys a later version adds are kept (``extra``, the
files' own dicts) rather than refused. Only ``run/`` writes these files (``run/records.py``);
here nothing is written.

Beside runs: ``find_runs`` (the run directories under some folders) and ``read_pool_header``
(what every pool's manifest says, whoever wrote it: its method and ``built_by``, the record of
the run or file that made it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Self

import yaml

from reme_cli.core.errors import UserError
from reme_cli.core.reading import Damaged, JsonFile, shape_of, wrong_key
from reme_cli.core.trials import TRIALS_FILE, UnitRecord, read_trials

__all__ = ["COMMIT_LOG", "CONFIG_FILE", "MANIFEST_FILE", "MANIFEST_VERSION", "METRICS_FILE", "REPORT_FILE",
           "RESULT_FILES", "STREAMS_DIR", "TRIALS_FILE", "Commit", "Manifest", "Metrics", "PoolHeader", "RunConfig",
           "RunLog", "Score", "UnitRecord", "find_runs", "flatten", "read_commits", "read_config", "read_pool_header",
           "read_run_log", "read_trials"]

CONFIG_FILE = "config.yaml"
MANIFEST_FILE = "manifest.json"
METRICS_FILE = "metrics.json"  # a `reme eval` run's result
REPORT_FILE = "report.json"  # a `reme build-pool` run's result (its build/ directory)
RESULT_FILES = {"eval": METRICS_FILE, "build-pool": REPORT_FILE}
STREAMS_DIR = "streams"  # a dynamic run's streams, one folder each (streams/sS_rR)
COMMIT_LOG = "commits.jsonl"  # a dynamic stream's commit log (written by methods/streams.py)

# 1: every manifest before the field (read as written); 2: the field is written.
MANIFEST_VERSION = 2
TEST_DOUBLE_PREFIX = "scripted-"  # what reme's scripted server calls the models it serves


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``: a config's keys as overrides name them."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _restart(path: Path) -> str:
    return f"or delete {path} (or choose another out_dir) to start the run over"


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# ---------------------------------------------------------------- config.yaml

def _whole(low: int):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _name(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


_SECTIONS = ("benchmark", "eval", "model", "memory")  # what resume and reports read
# The keys of a run's config.yaml that resume and reports read, and what each must be.
_READ_KEYS = (("eval.runs", _whole(1), "a whole number >= 1"), ("eval.seeds", _whole(1), "a whole number >= 1"),
              ("eval.mode", lambda v: v in ("none", "fixed", "dynamic"), "none, fixed or dynamic"),
              ("benchmark.name", _name, "a benchmark name"), ("model.name", _name, "a model name"),
              ("memory.name", _name, "a memory name"))


@dataclass(frozen=True, eq=False)
class RunConfig(Mapping[str, Any]):
    """A run's resolved config as it wrote it (``config.yaml``): the nested mapping (``data``),
    and the keys every reader asks for, typed. ``read_config`` checks them first."""

    data: dict[str, Any]
    benchmark: str = ""  # benchmark.name
    model: str = ""  # model.name
    mode: str = "none"  # eval.mode
    k: int = 0  # eval.runs: the k of Avg@k and Pass@k
    seeds: int = 0  # eval.seeds
    method: str = "none"  # memory.name; none in mode none, whatever memory says
    pool: str | None = None  # memory.pool: where the run started from (None in mode none, or none given)

    @classmethod
    def parse(cls, data: Any, where: Path, restart: str) -> RunConfig:
        """``data`` (a loaded config.yaml) checked: a reme config whose read keys hold what
        they must; else one line naming ``where`` and the way out."""
        if not isinstance(data, dict) or not all(isinstance(data.get(k), dict) for k in _SECTIONS):
            raise UserError(f"{where} is damaged (not a reme config); restore it from a copy, {restart}")
        for key, ok, want in _READ_KEYS:
            value = _at(data, key)
            if not ok(value):
                raise UserError(f"{where}: {key}={value!r} is not {want}; restore it from a copy, {restart}")
        return cls.of(data)

    @classmethod
    def of(cls, data: dict[str, Any]) -> RunConfig:
        """``data`` as it is, unchecked: a typed key it lacks keeps its default."""
        mode = str(_at(data, "eval.mode") or "none")
        pool = _at(data, "memory.pool") if mode != "none" else None
        return cls(data, str(_at(data, "benchmark.name") or ""), str(_at(data, "model.name") or ""), mode,
                   _at(data, "eval.runs") or 0, _at(data, "eval.seeds") or 0,
                   "none" if mode == "none" else str(_at(data, "memory.name") or ""), str(pool) if pool else None)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def section(self, name: str) -> dict[str, Any]:
        value = self.data.get(name)
        return value if isinstance(value, dict) else {}

    def flat(self) -> dict[str, Any]:
        """Every key as an override names it (``memory.top_k``)."""
        return flatten(self.data)


def _at(data: dict[str, Any], dotted: str) -> Any:
    section, _, leaf = dotted.partition(".")
    part = data.get(section)
    return part.get(leaf) if isinstance(part, dict) else None


def _missing(path: Path, name: str) -> None:
    if not (path / name).is_file():
        raise UserError(f"{path} is a damaged reme run directory: {name} is missing; "
                        f"restore it from a copy, {_restart(path)}")


def _load(path: Path, name: str, parse: Callable[[str], Any], errors: tuple[type[Exception], ...]) -> Any:
    """The run file ``name`` of ``path``, parsed; one line if it is missing or unreadable."""
    _missing(path, name)
    where = path / name
    try:
        return parse(where.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, *errors) as exc:  # RecursionError: nested 100,000 deep
        raise UserError(f"{where} is damaged ({_first_line(exc)}); restore it from a copy, {_restart(path)}") from None


def read_config(path: Path, check: bool = True) -> RunConfig:
    """The config of the run directory ``path`` (one line if it is missing or unreadable);
    ``check``: refused, too, unless its read keys hold what they must (without: any
    mapping, e.g. to flatten a build's config whatever it holds)."""
    data = _load(path, CONFIG_FILE, yaml.safe_load, (yaml.YAMLError,))
    if check:
        return RunConfig.parse(data, path / CONFIG_FILE, _restart(path))
    if not isinstance(data, dict):
        raise UserError(f"{path / CONFIG_FILE} is damaged (not a reme config); restore it from a copy, "
                        f"{_restart(path)}")
    return RunConfig.of(data)


# ---------------------------------------------------------------- manifest.json

@dataclass
class Manifest:
    """What a run says about itself (``manifest.json``), written by ``run/`` as the run goes."""

    kind: str = "eval"  # eval | build-pool
    status: str = "running"  # created | running | interrupted | incomplete | complete
    config_hash: str = ""
    created_at: str = ""
    updated_at: str = ""
    git: dict[str, Any] = field(default_factory=dict)  # commit, dirty
    packages: dict[str, str] = field(default_factory=dict)
    python: str = ""
    platform: str = ""
    server: dict[str, Any] = field(default_factory=dict)  # the endpoint's identity (served_models, ...)
    summarizer_server: dict[str, Any] = field(default_factory=dict)
    embedding: dict[str, Any] = field(default_factory=dict)
    requests: dict[str, Any] = field(default_factory=dict)  # what every request sent
    task_ids: list[str] = field(default_factory=list)
    streams: list[list[str]] | None = None  # dynamic mode: each stream's units in order
    units_total: int | None = None
    served: dict[str, Any] = field(default_factory=dict)  # the models and fingerprints that answered
    spend: dict[str, Any] = field(default_factory=dict)  # at model.price, by currency (usd, cny, ...)
    throughput: dict[str, Any] = field(default_factory=dict)  # in flight, requests and tokens a minute, 429s
    summary_failures: dict[str, Any] = field(default_factory=dict)
    sandbox: str | None = None
    sandbox_detail: dict[str, Any] = field(default_factory=dict)
    trackers: dict[str, Any] = field(default_factory=dict)  # where a tracker logs -> its run (track/run.py)
    schema_version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know (a later one's)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """The manifest ``data`` as written by any version (ValueError: a field of the wrong
        kind, e.g. a hand edit). Version 1 (no schema_version) holds the same fields, so
        nothing is upgraded yet; a None where a value is typed (a run stopped before it was
        filled) reads as the default."""
        wrong = wrong_key(data, _MANIFEST_SHAPE)
        if wrong:
            raise ValueError(wrong)
        values = {f.name: data[f.name] for f in fields(cls) if f.name != "extra" and data.get(f.name) is not None}
        known = {f.name for f in fields(cls)}
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        return {**{k: v for k, v in out.items() if k != "extra"}, **self.extra}

    @property
    def test_double(self) -> bool:
        """Whether reme's scripted server scored the run (its numbers are no model's)."""
        return any(str(m).startswith(TEST_DOUBLE_PREFIX) for m in self.server.get("served_models") or [])


_MANIFEST_SHAPE = {k: v for k, v in shape_of(Manifest, nullable=True).items() if k != "extra"}
RUN_MANIFEST = JsonFile("a run's manifest.json", shape=_MANIFEST_SHAPE, max_bytes=64 * 1024 * 1024,
                        fix="restore it from a copy, or delete the run directory (or choose another out_dir) "
                            "to start the run over")


def read_manifest(path: Path) -> Manifest:
    """The checked manifest of the run directory ``path`` (one line if missing or damaged)."""
    where = path / MANIFEST_FILE
    _missing(path, MANIFEST_FILE)
    try:
        data = RUN_MANIFEST.read(where)
    except Damaged as exc:  # named with this run's own way out
        raise UserError(f"{where} is damaged ({exc.why}); restore it from a copy, {_restart(path)}") from None
    if not isinstance(data, dict) or not data.get("config_hash"):
        raise UserError(f"{where} is damaged (no config_hash); restore it from a copy, {_restart(path)}")
    return Manifest.from_dict(data)


# ---------------------------------------------------------------- metrics.json

@dataclass(frozen=True)
class Score:
    """A metric over seeds: mean and sample std of its per-seed values."""

    mean: float
    std: float
    n_seeds: int = 0

    @classmethod
    def from_dict(cls, data: Any) -> Score | None:
        if not isinstance(data, Mapping) or not isinstance(data.get("mean"), (int, float)):
            return None
        return cls(float(data["mean"]), float(data.get("std") or 0.0), int(data.get("n_seeds") or 0))


@dataclass
class Metrics:
    """An eval run's ``metrics.json`` (``run/metrics.py`` writes it): Avg@k and Pass@k over
    seeds and per seed, the counts, and ``data``, the file as written (the benchmark's own
    metrics, ``llm_usage``, ...: what a tracker logs, every number of it)."""

    k: int
    tasks: int = 0
    units: int = 0
    errors: int = 0
    complete: bool | None = None  # None: written before it was recorded
    avg: Score | None = None  # Avg@k
    pass_: Score | None = None  # Pass@k
    per_seed: dict[str, dict[str, Any]] = field(default_factory=dict)
    stop_reasons: dict[str, int] = field(default_factory=dict)
    first_attempt: Metrics | None = None  # dynamic mode: the same over the units' first trials
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Metrics:
        k = data.get("k")
        if not isinstance(k, int) or isinstance(k, bool):
            raise ValueError("no k")
        first = data.get("first_attempt")
        return cls(k, int(data.get("tasks") or 0), int(data.get("units") or 0), int(data.get("errors") or 0),
                   data.get("complete"), Score.from_dict(data.get(f"avg@{k}")), Score.from_dict(data.get(f"pass@{k}")),
                   dict(data.get("per_seed") or {}), dict(data.get("stop_reasons") or {}),
                   cls.from_dict(first) if isinstance(first, Mapping) and "k" in first else None, dict(data))


# ---------------------------------------------------------------- commits.jsonl

@dataclass(frozen=True)
class Commit:
    """One committed unit of a dynamic stream: what it proposed, as the method's events."""

    unit: str
    seq: int
    events: list[dict[str, Any]]


# A seq that is not a number keeps its line's place, an event that is not an object is left
# out: the viewer reads hand-edited logs (what ``events`` holds is each method's own).
COMMITS = JsonFile("a dynamic stream's commits.jsonl", lines=True, shape={"unit": str, "events": list},
                   required=("unit", "events"), fix="move that line out of the file")


def read_commits(stream: Path) -> list[Commit] | None:
    """The commit log of the stream folder ``stream``, in commit order; None if it has none
    (it is a pool, not a stream). A torn last line (a kill mid-append) is left out."""
    log = stream / COMMIT_LOG
    if not log.is_file():
        return None
    lines = COMMITS.records(log)
    commits = [Commit(str(line["unit"]), seq if isinstance(seq := line.get("seq"), int) else i,
                      [e for e in line.get("events") or [] if isinstance(e, dict)]) for i, line in enumerate(lines)]
    return sorted(commits, key=lambda c: c.seq)


# ---------------------------------------------------------------- the run

@dataclass
class RunLog:
    """One run directory: its config and manifest, read and checked; the rest on first use."""

    path: Path
    config: RunConfig
    manifest: Manifest

    @classmethod
    def read(cls, path: str | Path, **more: Any) -> Self:
        """``read_run_log`` (``more``: a subclass's own fields, e.g. the viewer's)."""
        path = Path(path)
        for name in (CONFIG_FILE, MANIFEST_FILE):  # a missing one is named before a damaged one
            _missing(path, name)
        return cls(path, read_config(path), read_manifest(path), **more)

    @property
    def result_file(self) -> Path:
        """The file the run's command writes when it ends (metrics.json, a build's report.json)."""
        return self.path / RESULT_FILES.get(self.manifest.kind, METRICS_FILE)

    @cached_property
    def trials(self) -> list[UnitRecord]:
        """Every finished unit (errored ones included: check ``ok``), the last record of each."""
        return read_trials(self.path)

    @cached_property
    def result(self) -> dict[str, Any] | None:
        """The result file as written, None until the run's command has written it (one line
        if it is damaged)."""
        return RESULT.read(self.result_file)

    @cached_property
    def metrics(self) -> Metrics | None:
        """An eval run's metrics, None until written (or for a build)."""
        if self.manifest.kind != "eval" or self.result is None:
            return None
        try:
            return Metrics.from_dict(self.result)
        except (TypeError, ValueError):
            raise UserError(f"{self.result_file} is not a reme metrics file; rerun the same command to "
                            "write it again (finished units are kept)") from None

    @property
    def build_report(self) -> dict[str, Any] | None:
        """A build's report.json, None until written (or for an eval run)."""
        return self.result if self.manifest.kind == "build-pool" else None

    def streams(self) -> list[Path]:
        """The run's dynamic streams' folders, in name order."""
        root = self.path / STREAMS_DIR
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def commits(self, stream: Path) -> list[Commit]:
        return read_commits(stream) or []


RESULT = JsonFile("a run's metrics.json or report.json", fix="rerun the same command to write it again "
                  "(finished units are kept)", max_bytes=64 * 1024 * 1024)


def read_run_log(path: str | Path) -> RunLog:
    """The run directory ``path``: its config and manifest now (a missing or damaged one is
    refused in one line naming it and the way out), its trials, result and commits when
    first asked for."""
    return RunLog.read(path)


def find_runs(dirs: list[Path], kinds: tuple[str, ...] = ("eval",)) -> list[Path]:
    """The run directories under ``dirs`` whose manifest says one of ``kinds`` (`reme eval`
    runs by default), and eval runs that lost their manifest (``read_run_log`` then names
    what is missing); one line if there is none. The one finder of runs: the report, the
    viewer and `reme track sync` list the same ones.

    A run directory holds the files ``RunDir.open`` writes together: ``config.yaml``,
    ``manifest.json`` and ``trials.jsonl`` (its unit records, empty until a unit ends). An
    experiment tracker's copy of a run (MLflow's artifacts, W&B's ``files/``) holds the
    config and the manifest, never the records: it is no run; records beside either of the
    other two are one (a damaged run is named by ``read_run_log``, not skipped). The walk enters no hidden
    folder (locks, caches, the trackers' stores by default) and nothing inside a run (its
    streams and pool copies are the run's)."""
    found: set[Path] = set()
    for d in dirs:
        if not d.exists():
            raise UserError(f"{d} does not exist")
        for folder, subdirs, files in os.walk(d):
            here = Path(folder)
            if _is_run(here, set(files), kinds):
                found.add(here.resolve())
                subdirs.clear()
            else:
                subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
    if not found:
        what = " or ".join(f"`reme {k}`" for k in kinds)
        raise UserError(f"no {what} run directories under {', '.join(map(str, dirs))}")
    return sorted(found)


def _is_run(folder: Path, files: set[str], kinds: tuple[str, ...]) -> bool:
    if TRIALS_FILE not in files:  # a tracker's copy has no records
        return False
    if MANIFEST_FILE not in files:  # a run whose manifest.json is gone still has its config and records
        return CONFIG_FILE in files and "eval" in kinds
    kind = (RUN_MANIFEST.probe(folder / MANIFEST_FILE) or {}).get("kind")  # not a reme manifest: no kind
    return kind in kinds  # config.yaml is read later: a damaged run is named, not skipped


# ---------------------------------------------------------------- pools

@dataclass(frozen=True)
class PoolHeader:
    """What every pool's manifest says, whichever method wrote the rest of it."""

    path: Path  # the folder holding the pool's manifest.json
    method: str | None  # the method it names (ReMe's older pools name none)
    built_by: dict[str, Any]  # kind (build-pool, import_official, ...), run, source, ...


POOL_HEADER = JsonFile("a pool's manifest.json (any method's)", shape={"method": str, "built_by": dict},
                      fix="rebuild the pool, or restore the file from a copy")


def read_pool_header(where: str | Path, *subdirs: str, method: str | None = None) -> PoolHeader | None:
    """The pool at ``where``, at its ``pool/`` (a `reme build-pool` directory) or at one of
    ``subdirs``, the first of them whose manifest reads (and names ``method``, if given);
    None where there is none."""
    where = Path(where)
    for folder in (where, where / "pool", *(where / s for s in subdirs)):
        data = POOL_HEADER.probe(folder / MANIFEST_FILE)
        if data is None:
            continue
        named, built_by = data.get("method"), data.get("built_by")
        header = PoolHeader(folder, named if isinstance(named, str) and named else None,
                            built_by if isinstance(built_by, dict) else {})
        if method is None or header.method == method:
            return header
    return None
