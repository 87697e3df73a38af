"""Import the experience pools the ReMe authors released (agentscope-ai/ReMe,
docs/library/paper_data/task/*.jsonl) as native pools.

The six released files ship with reme (``official_pools/``, Apache-2.0; its NOTICE names the
source commit and each file's sha256) and are named ``official:<benchmark>/<model>``, e.g.
``official:bfcl/qwen3-8b``; any other file is imported from its path.

A released line of the first upload (f85ab472, what reme ships) looks like
    {"workspace_id", "memory_id", "memory_type", "when_to_use", "content", "score",
     "time_created", "time_modified", "author",
     "metadata": {"author", "task_query", "when_to_use", "category", "created_time",
                  "modified_time", "extra_info": {"tags", "generalized_query"}, "utility", "freq"}}
and the later format (65971baf) has ``metadata.generalized_query`` and no tags; both import.
So all four retrieval keys of the paper's Table 5 come from the items themselves: ω
when_to_use, task_query, generalized_query and κ = the tags. tools_used / confidence appear
in no released file (they get defaults, counted in the report). Whatever is not mapped is
kept in Experience.extra, so nothing is lost.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reme_cli.core.errors import UserError
from reme_cli.core.reading import JsonFile
from reme_cli.llm.embed import Embedder
from reme_cli.methods.reme.experience import Experience, new_id
from reme_cli.methods.reme.pool import Pool

# Released categories are already our source names; the map documents that it is a choice.
CATEGORY_TO_SOURCE = {"success": "success", "failure": "failure", "comparative": "comparative"}

_TOP_MAPPED = {"memory_id", "when_to_use", "content", "author", "time_created", "time_modified", "metadata"}
_META_MAPPED = {
    "task_query",
    "generalized_query",
    "category",
    "utility",
    "freq",
    "tags",
    "keywords",
    "tools_used",
    "confidence",
}
# Copies of top-level fields inside metadata: dropped when equal, kept in extra if not.
_META_MIRRORS = {
    "when_to_use": "when_to_use",
    "author": "author",
    "created_time": "time_created",
    "modified_time": "time_modified",
}
_MAX_REPORTED_ERRORS = 20
# The authors' released file: a line that is not a record is skipped and counted in the import's report.
RELEASED = JsonFile("a released ReMe pool (.jsonl)", lines=True, fix="give the file as the authors released it",
                    shape={"metadata": dict})

OFFICIAL_PREFIX = "official:"
RELEASED_DIR = Path(__file__).with_name("official_pools")
# reme's benchmark names -> the file prefix the authors used.
_BENCH_FILE_NAMES = {"bfcl_v3": "bfcl", "bfcl": "bfcl", "appworld": "appworld"}


def released_pools() -> dict[str, Path]:
    """Bundled released pools by name: ``bfcl/qwen3-8b`` -> its JSONL file."""
    out = {}
    for path in sorted(RELEASED_DIR.glob("*.jsonl")):
        bench, _, model = path.stem.partition("_")
        out[f"{bench}/{model.replace('_', '-')}"] = path
    return out


def released_name(benchmark: str, model: str) -> str:
    """The bundled pool of a benchmark and model (``official:bfcl/qwen3-8b``); a UserError
    if the authors released none for them."""
    name = f"{_BENCH_FILE_NAMES.get(benchmark, benchmark)}/{model}"
    if name not in released_pools():
        raise UserError(f"the ReMe authors released no pool for benchmark {benchmark} and model {model}; "
                        f"released: {', '.join(released_pools())}")
    return OFFICIAL_PREFIX + name


def pool_source(spec: str | Path) -> Path:
    """The file behind ``official:NAME`` or a path; one line naming what to fix if there is none."""
    text = str(spec)
    if text.startswith(OFFICIAL_PREFIX):
        name = text[len(OFFICIAL_PREFIX):]
        bench, _, model = name.partition("/")
        name = f"{_BENCH_FILE_NAMES.get(bench, bench)}/{model}"
        pools = released_pools()
        if name not in pools:
            raise UserError(f"no bundled pool named {text!r}; choose one of "
                            f"{', '.join(OFFICIAL_PREFIX + n for n in pools)} (reme pool import --list)")
        return pools[name]
    path = Path(spec)
    if path.is_dir():
        raise UserError(f"{path} is a directory; give a released pool's .jsonl file "
                        "or a bundled name such as official:bfcl/qwen3-8b (reme pool import --list)")
    if not path.is_file():
        what = "is not a regular file (a device, FIFO or socket)" if path.exists() else "does not exist"
        raise UserError(f"{path} {what}; give a released pool's .jsonl file "
                        "or a bundled name such as official:bfcl/qwen3-8b (reme pool import --list)")
    return path


def released_counts(path: Path) -> dict[str, int]:
    """Lines of a released file by category, and in all (what ``pool import --list`` shows)."""
    experiences, _ = parse_official(RELEASED.read_bytes(path) or b"")
    counts = Counter(e.source for e in experiences)
    return {"total": len(experiences), **{s: counts.get(s, 0) for s in CATEGORY_TO_SOURCE}}


def import_official(
    source: str | Path,
    out_dir: str | Path,
    embedder: Embedder,
    retrieval_key: str = "usage_scenario",
    dedup_threshold: float | None = None,
) -> Pool:
    """Convert one released pool (``official:NAME`` or a file) into a native pool at `out_dir`.

    The counts (lines, imported, skipped with reasons, by source, defaulted fields,
    seconds) are returned as `pool.built_by["import"]` and saved in the manifest.
    No dedup by default: the released pool is what the authors evaluated with.
    """
    started = time.perf_counter()
    src = pool_source(source)
    raw = RELEASED.read_bytes(src) or b""
    experiences, report = parse_official(raw)
    if not experiences:
        why = "; ".join(report["errors"][:3]) or "the file is empty"
        raise UserError(f"{src} has no valid official pool line ({why})")
    pool = Pool.create(
        out_dir,
        embedder,
        retrieval_key=retrieval_key,
        built_by={"kind": "import_official", "source": str(source), "source_sha256": hashlib.sha256(raw).hexdigest()},
    )
    added = pool.add(experiences, dedup_threshold=dedup_threshold)
    report["imported"] = len(added)
    report["dropped_as_duplicates"] = len(experiences) - len(added)
    report["by_source"] = dict(Counter(e.source for e in added))
    report["seconds"] = round(time.perf_counter() - started, 3)
    pool.built_by["import"] = report
    pool.save()
    return pool


def parse_official(text: str | bytes) -> tuple[list[Experience], dict[str, Any]]:
    """Experiences from the file's text, and a report of skipped lines (not UTF-8, not JSON,
    too deep, not a record) and defaulted fields."""
    experiences: list[Experience] = []
    errors: list[str] = []
    skipped = 0
    lines = 0
    defaulted: Counter[str] = Counter()
    authors: Counter[str] = Counter()
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        lines += 1
        try:
            exp, missing = official_record_to_experience(RELEASED.parse(line))
            if exp.id in seen:
                raise ValueError(f"duplicate memory_id {exp.id}")
        except ValueError as exc:  # what the reader found wrong with the line is a ValueError
            skipped += 1
            if len(errors) < _MAX_REPORTED_ERRORS:
                errors.append(f"line {n}: {exc}")
            continue
        seen.add(exp.id)
        defaulted.update(missing)
        authors[exp.author] += 1
        experiences.append(exp)
    report = {
        "lines": lines,
        "parsed": len(experiences),
        "skipped": skipped,
        "errors": errors,
        "defaulted": dict(defaulted),
        "authors": dict(authors),
    }
    return experiences, report


def official_record_to_experience(rec: Any) -> tuple[Experience, list[str]]:
    """One released record -> (Experience, names of fields that were absent and defaulted)."""
    if not isinstance(rec, dict):
        raise ValueError(f"not a JSON object but {type(rec).__name__}")
    meta = rec.get("metadata", {})
    if not isinstance(meta, dict):
        raise ValueError("'metadata' is not an object")
    missing: list[str] = []

    def pick(*names: str, default: Any = None, report_as: str | None = None) -> Any:
        for where, name in _places(rec, meta, names):
            if name in where and where[name] is not None:
                return where[name]
        missing.append(report_as or names[0])
        return default

    when_to_use = pick("when_to_use")
    content = pick("content")
    category = meta.get("category")
    if not isinstance(when_to_use, str) or not when_to_use.strip():
        raise ValueError("'when_to_use' is missing or empty")
    if not isinstance(content, str) or not content.strip():
        raise ValueError("'content' is missing or empty")
    if category not in CATEGORY_TO_SOURCE:
        raise ValueError(f"metadata.category {category!r} is not one of {', '.join(CATEGORY_TO_SOURCE)}")

    created = _iso(pick("time_created", "created_time", default="", report_as="created_at"))
    fields: dict[str, Any] = {
        "id": pick("memory_id", default=None, report_as="id") or new_id(),
        "when_to_use": when_to_use,
        "content": content,
        "source": CATEGORY_TO_SOURCE[category],
        "task_query": pick("task_query", default=""),
        "generalized_query": pick("generalized_query", default=""),
        "keywords": _str_list(pick("tags", "keywords", default=[], report_as="keywords")),
        "tools_used": _str_list(pick("tools_used", default=[])),
        "confidence": _number(pick("confidence", default=1.0), "confidence"),
        "u": _count(pick("utility", default=0, report_as="u"), "utility"),
        "f": _count(pick("freq", default=0, report_as="f"), "freq"),
        "author": pick("author", default=""),
        "origin_task": None,  # released records name the task only by its text (task_query)
        "extra": _extra(rec, meta),
    }
    if created:
        fields["created_at"] = created
        modified = _iso(pick("time_modified", "modified_time", default="", report_as="updated_at"))
        fields["updated_at"] = modified or created
    # from_dict type-checks every field and names the bad one in its ValueError.
    return Experience.from_dict(fields), missing


def _places(rec: dict[str, Any], meta: dict[str, Any], names: tuple[str, ...]) -> Iterator[tuple[dict[str, Any], str]]:
    # Top level first (the memory record), then metadata (the extractor's output), then the
    # first upload's metadata.extra_info (tags, generalized_query).
    info = meta.get("extra_info")
    for name in names:
        yield rec, name
        yield meta, name
        if isinstance(info, dict):
            yield info, name


def _extra(rec: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    extra = {k: v for k, v in rec.items() if k not in _TOP_MAPPED}
    meta_rest = {
        k: v
        for k, v in meta.items()
        if k not in _META_MAPPED and not (k in _META_MIRRORS and rec.get(_META_MIRRORS[k]) == v)
    }
    info = meta_rest.get("extra_info")
    if isinstance(info, dict):  # what it holds beyond the mapped keys, if anything
        info = {k: v for k, v in info.items() if k not in _META_MAPPED}
        if info:
            meta_rest["extra_info"] = info
        else:
            del meta_rest["extra_info"]
    if meta_rest:
        extra["metadata"] = meta_rest
    return extra


def _iso(value: Any) -> str:
    # Released times are "YYYY-MM-DD HH:MM:SS" with no zone; keep them naive, ISO-shaped.
    if not isinstance(value, str):
        raise ValueError(f"time {value!r} is not a string")
    return value.strip().replace(" ", "T", 1)


def _str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return list(value)
    raise ValueError(f"expected a list of strings, got {value!r}")


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} {value!r} is not a number")
    return float(value)


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} {value!r} is not a non-negative integer")
    return value
