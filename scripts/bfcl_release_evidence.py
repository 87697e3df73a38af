#!/usr/bin/env python3
"""Which ``bfcl-eval`` release carries the BFCL multi_turn_base data behind the ReMe pools?

The ReMe authors released their BFCL experience pools
(``bfcl_qwen3_{8b,14b,32b}.jsonl``).  Every experience stores, in
``metadata.task_query``, the user message of the BFCL training task it was
distilled from.  BFCL's ``multi_turn_base`` questions were edited several times
across ``bfcl-eval`` releases, so the exact wording of those queries fingerprints
the data release the authors ran on.  A second fingerprint is the ``travel_cost``
argument of ``TravelAPI.book_flight``: it was a *required* argument (function doc
and backend) up to 2025.6.15 and was removed from both in 2025.6.16.

This script is stdlib-only.  It never installs anything; it reads the wheels as
zip files, and unpacked releases (a folder holding ``bfcl_eval/`` beside its
``bfcl_eval-VERSION.dist-info``: the pinned one in site-packages, those reme unpacks under
``<venv>/share/reme/bfcl-eval-VERSION``) by the file list of their RECORD, so it also
runs offline on the releases a machine has.

Usage::

    mkdir -p /tmp/bfcl_rel/wheels
    pip download --no-deps --only-binary=:all: bfcl-eval==2025.6.15 -d /tmp/bfcl_rel/wheels
    ...                                    # one call per release of interest
    curl -s https://pypi.org/pypi/bfcl-eval/json > /tmp/bfcl_rel/pypi.json   # optional (dates)
    python scripts/bfcl_release_evidence.py /tmp/bfcl_rel/wheels \\
        --pypi-json /tmp/bfcl_rel/pypi.json > report.md

    python scripts/bfcl_release_evidence.py "$(python -c 'import sys; print(sys.prefix)')"/share/reme/bfcl-eval-2025.7.17 \\
        "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"   # offline: paper + pinned

Each argument is a wheel, an unpacked release, or a folder of wheels and unpacked releases.
Output: Markdown on stdout.

Definitions
-----------
* *data hash*: first 10 hex digits of the sha256 of the canonical JSON
  (``sort_keys``, compact separators) of ``{id: [question, initial_config,
  ground_truth]}`` over all 200 ``multi_turn_base`` tasks.  Releases with the same
  data hash carry byte-identical multi_turn_base data (modulo JSON formatting).
  ``q-hash`` covers question + initial_config only, ``gt-hash`` ground truth only.
* *backend hash*: sha256 over the eight multi-turn backend modules
  (``func_source_code/*.py`` of the eight classes used by multi_turn_base) and
  their function docs (``multi_turn_func_doc/*.json``).
* Queries are compared after whitespace normalisation (runs of whitespace -> one
  space, stripped).  Pools contain some duplicate task queries; counts below are
  over *distinct* normalised queries.
* ``t0``: the query equals the first user message (turn 0) of a task;
  ``any``: it equals the user message of any turn of a task (ReMe's extraction
  often records a later turn's message as ``task_query``);
  ``fuzzy``: best difflib ratio against any user message of a train task
  >= ``--fuzzy`` (default 0.9; includes exact matches).
  All three are restricted to the 50 official *train* tasks unless stated.
* ``--gorilla DIR`` (a clone of ShishirPatil/gorilla): also compare each wheel's
  ``bfcl_eval`` package, file by file (git blob ids), and its multi_turn_base data
  hash with the package at ``--commit`` (default ea13468, the commit the ReMe authors'
  FAQ names).
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_POOLS = REPO / "reme_cli" / "methods" / "reme" / "official_pools"  # the authors' released pools, bundled
DEFAULT_SPLIT = REPO / "reme_cli" / "bench" / "bfcl" / "split.json"  # the official 50/150 split
POOL_MODELS = ("8b", "14b", "32b")
# Backend modules / function docs used by multi_turn_base.
BACKENDS = (
    "gorilla_file_system", "math_api", "message_api", "posting_api",
    "ticket_api", "trading_bot", "travel_booking", "vehicle_control",
)
DATA_RE = re.compile(r"(^|/)data/BFCL_v\d+_multi_turn_base\.json$")  # 3.0.0 has no bfcl_eval/ prefix
ANSWER_RE = re.compile(r"(^|/)data/possible_answer/BFCL_v\d+_multi_turn_base\.json$")
# An experience that reports travel_cost being rejected / invalid / removed.
TRAVEL_COST_ERR_RE = re.compile(
    r"(invalid|removing|omitting|omit|remove|error|not part)[^.]{0,60}travel_cost"
    r"|travel_cost[^.]{0,60}(invalid|error|not part|auto-calculated)",
    re.IGNORECASE,
)


def norm(text: str) -> str:
    """Whitespace-normalise a message."""
    return " ".join(text.split())


def short_hash(obj) -> str:
    """Short sha256 of the canonical JSON of ``obj``."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:10]


def version_key(version: str):
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def read_jsonl(blob: bytes) -> list[dict]:
    return [json.loads(line) for line in blob.decode("utf-8").splitlines() if line.strip()]


class Files:
    """A release's files by their path in the wheel (``bfcl_eval/...``): a wheel read as a zip
    file, or an unpacked release read by its RECORD's file list."""

    def __init__(self, path: Path):
        self.path = path
        if path.is_file():
            self.version = path.name.split("-")[1]
            self._zip: zipfile.ZipFile | None = zipfile.ZipFile(path)
            self.names = [n for n in self._zip.namelist() if not n.endswith("/")]
        else:
            info = unpacked_info(path)
            self.version = info.name[len("bfcl_eval-"):-len(".dist-info")]
            self._zip = None
            record = (info / "RECORD").read_text().splitlines()
            # An installed copy's RECORD also lists the bytecode pip compiled: not the wheel's.
            self.names = [name for name in (line.rsplit(",", 2)[0] for line in record)
                          if name.startswith("bfcl_eval/") and "/__pycache__/" not in name]

    def read(self, name: str) -> bytes:
        return self._zip.read(name) if self._zip else (self.path / name).read_bytes()

    def __enter__(self) -> Files:
        return self

    def __exit__(self, *exc) -> None:
        if self._zip:
            self._zip.close()


def unpacked_info(folder: Path) -> Path | None:
    """The ``bfcl_eval-VERSION.dist-info`` of an unpacked release in ``folder``, if it is one."""
    infos = [p for p in folder.glob("bfcl_eval-*.dist-info") if (p / "RECORD").is_file()]
    return infos[0] if len(infos) == 1 and (folder / "bfcl_eval").is_dir() else None


def find_releases(paths: list[Path]) -> list[Path]:
    """Wheels and unpacked releases among ``paths`` (each a wheel, an unpacked release, or a
    folder holding either)."""
    found = []
    for path in paths:
        if path.is_file() or unpacked_info(path):
            found.append(path)
        elif path.is_dir():
            found += sorted(path.glob("bfcl_eval-*.whl"))
            found += sorted(p for p in path.iterdir() if p.is_dir() and unpacked_info(p))
    return found


class Release:
    """The multi_turn_base data and backend fingerprints of one wheel or unpacked release."""

    def __init__(self, path: Path):
        self.path = path
        with Files(path) as zf:
            self.version = zf.version
            names = zf.names
            data_name = next(n for n in names if DATA_RE.search(n))
            answer_name = next(n for n in names if ANSWER_RE.search(n))
            self.data_file = data_name.rsplit("/", 1)[1]
            self.tasks = {t["id"]: t for t in read_jsonl(zf.read(data_name))}
            self.answers = {a["id"]: a["ground_truth"] for a in read_jsonl(zf.read(answer_name))}
            backend_parts = {}
            for cls in BACKENDS:
                src = [n for n in names if n.endswith(f"func_source_code/{cls}.py")]
                doc = [n for n in names if n.endswith(f"multi_turn_func_doc/{cls}.json")]
                backend_parts[cls] = [
                    hashlib.sha256(zf.read(src[0])).hexdigest() if src else None,
                    hashlib.sha256(zf.read(doc[0])).hexdigest() if doc else None,
                ]
            self.backend_hash = short_hash(backend_parts)
            travel_src = zf.read(next(n for n in names if n.endswith("func_source_code/travel_booking.py"))).decode()
            travel_doc = read_jsonl(zf.read(next(n for n in names if n.endswith("multi_turn_func_doc/travel_booking.json"))))
        sig = re.search(r"def book_flight\((.*?)\)\s*->", travel_src, re.S)
        self.backend_travel_cost = bool(sig and "travel_cost" in sig.group(1))
        book = next(d for d in travel_doc if d["name"] == "book_flight")
        self.doc_travel_cost = "travel_cost" in book["parameters"].get("required", [])
        self.q_hash = short_hash({k: [t["question"], t["initial_config"]] for k, t in self.tasks.items()})
        self.gt_hash = short_hash(self.answers)
        self.data_hash = short_hash(
            {k: [t["question"], t["initial_config"], self.answers.get(k)] for k, t in self.tasks.items()}
        )
        # normalised user message -> list of (task id, turn index)
        self.messages: dict[str, list[tuple[str, int]]] = {}
        for tid, task in self.tasks.items():
            for turn_idx, turn in enumerate(task["question"]):
                for msg in turn:
                    if msg.get("role") == "user":
                        self.messages.setdefault(norm(msg["content"]), []).append((tid, turn_idx))


GORILLA_PKG = "berkeley-function-call-leaderboard/"  # where bfcl_eval/ sits in the gorilla repository
AUTHORS_COMMIT = "ea13468e4423454d0c213704fb87cf7cb3990433"  # ReMe FAQ:52


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commit_package(gorilla: Path, commit: str) -> tuple[dict[str, str], str]:
    """The commit's ``bfcl_eval`` files (path -> blob id) and its multi_turn_base data hash."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(gorilla), *args], check=True, capture_output=True,
                              text=True).stdout
    files = {}
    for line in git("ls-tree", "-r", commit, GORILLA_PKG + "bfcl_eval/").splitlines():
        meta, path = line.split("\t", 1)
        files[path[len(GORILLA_PKG):]] = meta.split()[2]
    data = next(p for p in files if DATA_RE.search(p))
    answer = next(p for p in files if ANSWER_RE.search(p))
    tasks = {t["id"]: t for t in read_jsonl(git("show", f"{commit}:{GORILLA_PKG}{data}").encode())}
    answers = {a["id"]: a["ground_truth"] for a in read_jsonl(git("show", f"{commit}:{GORILLA_PKG}{answer}").encode())}
    data_hash = short_hash({k: [t["question"], t["initial_config"], answers.get(k)] for k, t in tasks.items()})
    return files, data_hash


def compare_with_commit(releases: list["Release"], gorilla: Path, commit: str) -> list[str]:
    files, data_hash = commit_package(gorilla, commit)
    out = [f"## gorilla `{commit[:7]}` vs each wheel\n",
           f"The commit's `bfcl_eval` package: {len(files)} files, multi_turn_base data hash `{data_hash}`. "
           "Files compared by git blob id.\n",
           "| release | same files | differing | only in wheel | only in commit | data hash equal | differing files (first 4) |",
           "|---|---|---|---|---|---|---|"]
    for r in releases:
        with Files(r.path) as zf:
            wheel = {n: git_blob_id(zf.read(n)) for n in zf.names if n.startswith("bfcl_eval/")}
        differ = sorted(n for n in wheel.keys() & files.keys() if wheel[n] != files[n])
        same = len(wheel.keys() & files.keys()) - len(differ)
        out.append(f"| {r.version} | {same} | {len(differ)} | {len(wheel.keys() - files.keys())} | "
                   f"{len(files.keys() - wheel.keys())} | {'yes' if r.data_hash == data_hash else 'no'} | "
                   f"{', '.join(differ[:4])} |")
    out.append("")
    return out


def load_pools(pool_dir: Path) -> dict[str, list[dict]]:
    pools = {}
    for model in POOL_MODELS:
        path = pool_dir / f"bfcl_qwen3_{model}.jsonl"
        pools[model] = read_jsonl(path.read_bytes())
    return pools


class Matcher:
    """Exact / fuzzy matching of pool queries against a release's user messages."""

    def __init__(self, train_ids: set[str], threshold: float):
        self.train_ids = train_ids
        self.threshold = threshold
        self._ratio_cache: dict[tuple[str, str], float] = {}

    def ratio(self, a: str, b: str) -> float:
        key = (a, b)
        if key not in self._ratio_cache:
            sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
            if sm.real_quick_ratio() < self.threshold or sm.quick_ratio() < self.threshold:
                self._ratio_cache[key] = 0.0  # cannot reach the threshold
            else:
                self._ratio_cache[key] = sm.ratio()
        return self._ratio_cache[key]

    def match(self, rel: Release, queries: list[str]) -> dict:
        exact_t0, exact_any, exact_all_tasks, fuzzy = set(), set(), set(), set()
        ids_t0, ids_any, ids_fuzzy = set(), set(), set()
        train_msgs = [(m, locs) for m, locs in rel.messages.items()
                      if any(tid in self.train_ids for tid, _ in locs)]
        for q in queries:
            locs = rel.messages.get(q, [])
            if locs:
                exact_all_tasks.add(q)
            for tid, turn in locs:
                if tid in self.train_ids:
                    exact_any.add(q)
                    ids_any.add(tid)
                    if turn == 0:
                        exact_t0.add(q)
                        ids_t0.add(tid)
            for msg, mlocs in train_msgs:
                if msg == q or self.ratio(q, msg) >= self.threshold:
                    fuzzy.add(q)
                    ids_fuzzy.update(tid for tid, _ in mlocs if tid in self.train_ids)
        return {
            "n": len(queries), "t0": exact_t0, "any": exact_any, "all_tasks": exact_all_tasks,
            "fuzzy": fuzzy, "ids_t0": ids_t0, "ids_any": ids_any, "ids_fuzzy": ids_fuzzy,
        }


def release_dates(pypi_json: Path | None) -> dict[str, str]:
    if not pypi_json:
        return {}
    meta = json.loads(pypi_json.read_text())
    out = {}
    for version, files in meta.get("releases", {}).items():
        times = [f["upload_time"] for f in files if f["filename"].endswith(".whl")]
        if times:
            out[version] = min(times)[:10]
    return out


def id_list(ids: set[str]) -> str:
    return ",".join(str(n) for n in sorted(int(i.rsplit("_", 1)[1]) for i in ids))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("releases", type=Path, nargs="+", metavar="PATH",
                    help="a bfcl_eval-*.whl, an unpacked release (bfcl_eval/ beside its dist-info), or a folder "
                         "of either")
    ap.add_argument("--pools", type=Path, default=DEFAULT_POOLS, help="dir with bfcl_qwen3_*.jsonl")
    ap.add_argument("--split", type=Path, default=DEFAULT_SPLIT, help="official train/test split json")
    ap.add_argument("--pypi-json", type=Path, default=None,
                    help="saved https://pypi.org/pypi/bfcl-eval/json (for upload dates)")
    ap.add_argument("--fuzzy", type=float, default=0.9, help="difflib ratio threshold (default 0.9)")
    ap.add_argument("--gorilla", type=Path, default=None, help="a git clone of ShishirPatil/gorilla (optional)")
    ap.add_argument("--commit", default=AUTHORS_COMMIT, help="the gorilla commit to compare with (default ea13468)")
    args = ap.parse_args(argv)

    missing = [str(p) for p in args.releases if not p.exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    releases = sorted((Release(p) for p in find_releases(args.releases)), key=lambda r: version_key(r.version))
    if not releases:
        print(f"error: no bfcl_eval-*.whl or unpacked bfcl_eval release in {', '.join(map(str, args.releases))}",
              file=sys.stderr)
        return 2
    dates = release_dates(args.pypi_json)
    split = json.loads(args.split.read_text())
    train_ids = set(split["train"])
    pools = load_pools(args.pools)
    queries = {m: sorted({norm(p["metadata"]["task_query"]) for p in P}) for m, P in pools.items()}
    matcher = Matcher(train_ids, args.fuzzy)
    results = {r.version: {m: matcher.match(r, queries[m]) for m in POOL_MODELS} for r in releases}

    # ---- data groups -------------------------------------------------------------------
    groups: dict[str, list[str]] = {}
    for r in releases:
        groups.setdefault(r.data_hash, []).append(r.version)
    group_name = {h: chr(ord("A") + i) for i, h in enumerate(groups)}

    out = []
    w = out.append
    w("## Per-release evidence\n")
    w(f"Pools: {', '.join(f'{m}: {len(queries[m])} distinct task_query' for m in POOL_MODELS)}. "
      f"Cells: exact turn-0 / exact any-turn / fuzzy>={args.fuzzy} matches on the 50 train tasks "
      f"(distinct queries).\n")
    w("| release | uploaded | file | group | data hash | q-hash | gt-hash | backend hash | "
      "book_flight travel_cost (doc/backend) | 8B t0/any/fuzzy | 14B t0/any/fuzzy | 32B t0/any/fuzzy |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in releases:
        cells = []
        for m in POOL_MODELS:
            res = results[r.version][m]
            cells.append(f"{len(res['t0'])}/{len(res['any'])}/{len(res['fuzzy'])}")
        tc = f"{'req' if r.doc_travel_cost else '-'}/{'yes' if r.backend_travel_cost else 'no'}"
        w(f"| {r.version} | {dates.get(r.version, '?')} | {r.data_file.replace('_multi_turn_base.json', '')} | "
          f"{group_name[r.data_hash]} | `{r.data_hash}` | `{r.q_hash}` | `{r.gt_hash}` | `{r.backend_hash}` | "
          f"{tc} | {' | '.join(cells)} |")
    w("")

    w("## Data groups (identical multi_turn_base questions + initial_config + ground truth)\n")
    w("| group | data hash | releases (downloaded ones only) |")
    w("|---|---|---|")
    for h, vs in groups.items():
        w(f"| {group_name[h]} | `{h}` | {', '.join(vs)} |")
    w("")

    # ---- train ids matched per group ---------------------------------------------------
    w("## Train task ids matched (exact any-turn), per pool and group\n")
    w("| group | pool | # train ids | ids (multi_turn_base_N) |")
    w("|---|---|---|---|")
    for h, vs in groups.items():
        for m in POOL_MODELS:
            ids = results[vs[0]][m]["ids_any"]
            w(f"| {group_name[h]} | {m} | {len(ids)} | {id_list(ids)} |")
    w("")
    w("Queries that match no train task in any release are mostly paraphrases or fragments "
      "produced by the extraction LLM; test-task matches (a leakage check) are counted below.\n")
    w("| group | pool | exact any-turn matches on any of the 200 tasks | of which not train |")
    w("|---|---|---|---|")
    for h, vs in groups.items():
        for m in POOL_MODELS:
            res = results[vs[0]][m]
            w(f"| {group_name[h]} | {m} | {len(res['all_tasks'])} | {len(res['all_tasks'] - res['any'])} |")
    w("")

    # ---- discriminating queries --------------------------------------------------------
    w("## Discriminating queries (exact match in some groups only)\n")
    w("| pool | task (turn) | query (first 110 chars) | exact in groups |")
    w("|---|---|---|---|")
    reps = {h: vs[0] for h, vs in groups.items()}
    for m in POOL_MODELS:
        for q in queries[m]:
            hits = [h for h, v in reps.items() if q in results[v][m]["all_tasks"]]
            if hits and len(hits) != len(reps):
                rel = next(r for r in releases if r.version == reps[hits[0]])
                where = ", ".join(f"{tid.rsplit('_', 1)[1]} ({t})" for tid, t in rel.messages[q])
                w(f"| {m} | {where} | {q[:110].replace('|', '/')} | "
                  f"{''.join(sorted(group_name[h] for h in hits))} |")
    w("")

    # ---- travel_cost fingerprint -------------------------------------------------------
    w("## `travel_cost` fingerprint\n")
    w("Experiences whose text reports `travel_cost` as an invalid / rejected `book_flight` argument:\n")
    w("| pool | category | task_query (first 90 chars) | evidence (first 160 chars) |")
    w("|---|---|---|---|")
    n_hits = 0
    for m in POOL_MODELS:
        for p in pools[m]:
            text = p.get("when_to_use", "") + " " + p.get("content", "")
            mt = TRAVEL_COST_ERR_RE.search(text)
            if mt:
                n_hits += 1
                s = max(0, mt.start() - 60)
                w(f"| {m} | {p['metadata'].get('category')} | "
                  f"{norm(p['metadata']['task_query'])[:90].replace('|', '/')} | "
                  f"…{norm(text[s:s + 160]).replace('|', '/')}… |")
    w("")
    w(f"{n_hits} experiences. `book_flight(travel_cost=...)` can only be rejected by a backend without "
      "that parameter, while a model is only prompted to pass it by a function doc that requires it. "
      "Per release (doc requires / backend accepts): " +
      "; ".join(f"{r.version}: {'req' if r.doc_travel_cost else '-'}/{'yes' if r.backend_travel_cost else 'no'}"
                for r in releases) + ".\n")
    if args.gorilla:
        out += compare_with_commit(releases, args.gorilla, args.commit)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
