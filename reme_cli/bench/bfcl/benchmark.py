"""BFCL-v3 multi-turn base: tasks, isolated episodes, and the official checker.

Task data, the stateful backends and ``multi_turn_checker`` all come from the pinned
``bfcl-eval`` package. Two things in it need care (tests/bench/bfcl/test_call_safety.py and
tests/bench/bfcl/test_bfcl_bench.py hold both to it; docs/trust.md says the first to users):

* bfcl executes model output with ``eval()``. We never do: the environment dispatches
  only to bound methods of its own backend instances, and the checker only ever sees
  strings built by ``calls.canonical_call`` (identifier + ``repr`` of JSON values).
* bfcl keeps backend instances in a module-global dict keyed by model name + task id.
  Episodes run their own instances, and every evaluation uses a fresh unique model
  name whose global entries are deleted afterwards.

Every call is recorded, as the authors' agent recorded it for the checker (65971baf
bfcl_utils.py:303-327, bfcl_agent.py:381-413): arguments that do not decode into an object
make the call ``name()``, which runs; a call of a function the task does not have gets bfcl's
own answer (``execute_multi_turn_func_call``: "Error during execution: name 'x' is not
defined", or its refusal of ``kill``, ``exit``, ...), and the checker sees it and fails on it
as bfcl's eval did, so a turn of such calls is a turn with calls. Where that text is not safe
for the checker's eval (a builtin's name, a name that is no identifier, arguments past reme's
bounds), a stand-in of the same effect goes instead (``NOT_RUN``). bfcl-eval's own runner
differs on one point: arguments it cannot decode end the turn there.
"""

from __future__ import annotations

import builtins
import copy
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import tempfile
import threading
import traceback
import uuid
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from reme_cli.core.environ import set_default

# Some bfcl_eval modules create folders under BFCL_PROJECT_ROOT at import time; we import
# only ones that do not, but keep any accidental ones out of the user's working directory.
set_default("BFCL_PROJECT_ROOT", os.path.join(tempfile.gettempdir(), "reme-bfcl"))

from reme_cli.bench.base import Benchmark, InProcessEnv, Outcome, Task, ToolDialect, ToolResult  # noqa: E402
from reme_cli.bench.bfcl.config import BFCLConfig  # noqa: E402
from reme_cli.bench.scoring import TASK_METRICS, Labels  # noqa: E402
from reme_cli.bench.bfcl.calls import (  # noqa: E402
    MAX_ARGUMENT_CHARS,
    canonical_call,
    decode_arguments,
    is_identifier,
    parse_call_string,
)
from reme_cli.bench.bfcl.tool_notes import annotated, notes_at  # noqa: E402
from reme_cli.bench.bfcl.release import BFCL_DATA, RELEASES, SPLIT  # noqa: E402
from reme_cli.bench.bfcl.release import ensure as ensure_release  # noqa: E402
from reme_cli.core.departure import Departure  # noqa: E402
from reme_cli.core.errors import UserError  # noqa: E402

try:  # only dependency-free modules of bfcl-eval (installed with --no-deps)
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    try:
        from bfcl_eval.constants.executable_backend_config import (
            CLASS_FILE_PATH_MAPPING,
            MULTI_TURN_FUNC_DOC_FILE_MAPPING,
            STATELESS_CLASSES,
        )
    except ImportError:  # releases before 2025.8.25 (the paper's 2025.7.17 too): the same tables, elsewhere
        from bfcl_eval.constants.category_mapping import MULTI_TURN_FUNC_DOC_FILE_MAPPING
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (
            CLASS_FILE_PATH_MAPPING,
            STATELESS_CLASSES,
        )
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        multi_turn_checker,
        multi_turn_irrelevance_checker,
    )

    _IMPORT_ERROR: Exception | None = None
except ImportError as exc:  # pragma: no cover - exercised only without bfcl-eval
    _IMPORT_ERROR = exc

CATEGORY = "multi_turn_base"
SPLITS = ("train", "test", "all")
_SPLIT_FILE = Path(__file__).parent / "split.json"

# Backend code is not thread-safe in one place that matters: MathAPI.logarithm sets
# mpmath's process-global precision before computing. Backend calls and checker runs are
# short (micro- to milliseconds), so one lock costs nothing and rules that race out.
_BACKEND_LOCK = threading.RLock()

# Calls whose cost explodes with an argument (int ** huge int, 10^9-digit precision)
# would hang the episode and, once recorded, the checker too. bfcl has no such limit;
# these bounds are far above anything a BFCL task needs.
_MAX_INT_EXPONENT = 10_000
_MAX_PRECISION = 10_000

_MAX_DETAIL_CHARS = 4_000


def _require_bfcl() -> None:
    if _IMPORT_ERROR is not None:
        raise UserError(
            "bfcl-eval is not importable "
            f"({_IMPORT_ERROR}); install it with `pip install --no-deps -r requirements-bfcl.txt` "
            "plus `pip install mpmath filelock`"
        )


# --------------------------------------------------------------------------- data


def _bfcl_data_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        raise UserError("bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
    return Path(spec.origin).parent / "data"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return BFCL_DATA.records(path, strict=True)


@cache
def _dataset() -> dict[str, dict[str, Any]]:
    """id -> {entry, ground_truth}, in the data file's order. Read-only; copy before use."""
    _require_bfcl()
    data_dir = _bfcl_data_dir()
    # The data file is BFCL_v3_... up to 2025.6.x and BFCL_v4_... after (same task set).
    name = next(f"{v}_{CATEGORY}.json" for v in ("BFCL_v4", "BFCL_v3") if (data_dir / f"{v}_{CATEGORY}.json").exists())
    entries = _read_jsonl(data_dir / name)
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(data_dir / "possible_answer" / name)}
    return {e["id"]: {"entry": e, "ground_truth": answers[e["id"]]} for e in entries}


@cache
def _split_ids() -> dict[str, tuple[str, ...]]:
    raw = SPLIT.read(_SPLIT_FILE)
    return {"train": tuple(raw["train"]), "test": tuple(raw["test"])}


@cache
def _func_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    path = _bfcl_data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    return tuple(_read_jsonl(path))


@cache
def _backend_class(class_name: str) -> type:
    module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
    return getattr(module, class_name)


# ----------------------------------------------------------------- tool schemas


def _cast_to_openai_type(properties: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """Port of bfcl_eval.model_handler.utils._cast_to_openai_type (that module imports
    parsers and SDKs we do not install). Same output for every BFCL doc."""
    for value in properties.values():
        if "type" not in value:
            value["type"] = "string"
        else:
            var_type = value["type"]
            if mapping is GORILLA_TO_OPENAPI and var_type == "float":
                value["format"] = "float"
                value["description"] = value.get("description", "") + " This is a float type value."
            value["type"] = mapping.get(var_type, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast_to_openai_type(value["properties"], mapping)
            elif "items" in value:
                items = value["items"]
                items["type"] = mapping[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = mapping[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_to_openai_type(items["properties"], mapping)
    return properties


def _to_openai_tool(doc: dict[str, Any]) -> dict[str, Any]:
    """bfcl's convert_to_tool for ModelStyle.OPENAI_COMPLETIONS (the OpenAI FC handler)."""
    item = copy.deepcopy(doc)
    item["name"] = re.sub(r"\.", "_", item["name"])
    item["parameters"]["type"] = "object"
    item["parameters"]["properties"] = _cast_to_openai_type(
        item["parameters"]["properties"], GORILLA_TO_OPENAPI
    )
    return {"type": "function", "function": item}


# What bfcl's OpenAI conversion leaves of its own schema language: its type names in nested
# schemas (which would make llama.cpp's grammar converter fall back to free JSON), and a
# description that starts with the class blurb, the tool's own part after the marker.
TOOL_DIALECT = ToolDialect(types={"dict": "object", "float": "number", "tuple": "array", "any": None},
                           description_marker="Tool description:")


@lru_cache(maxsize=256)
def _tools_json(classes: tuple[str, ...], notes: int = 0, response: bool = True) -> str:
    # Kept as text so every episode gets its own copy cheaply, byte-identical across
    # episodes (prefix caching) and in bfcl's order: classes as listed, docs as filed.
    # ``notes``: passes of bfcl's language pre-processing over the docs (bench/bfcl/tool_notes.py);
    # ``response``: keep each doc's response schema, which bfcl's OpenAI handler sends and
    # the authors' extract_tool_schema (bfcl_utils.py:395-399) removes.
    docs = annotated([doc for cls in classes for doc in _func_docs(cls)], CATEGORY, notes)
    tools = [_to_openai_tool(doc) for doc in docs]
    if not response:
        for tool in tools:
            tool["function"].pop("response", None)
    return json.dumps(tools)


@lru_cache(maxsize=64)
def _doc_names(classes: tuple[str, ...]) -> frozenset[str]:
    return frozenset(doc["name"] for cls in classes for doc in _func_docs(cls))


@lru_cache(maxsize=64)
def _param_names(classes: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Method name -> parameter names in signature order (what a positional call binds
    to under bfcl's eval). Later classes win, as in bfcl's method->instance mapping."""
    names: dict[str, tuple[str, ...]] = {}
    for cls_name in classes:
        cls = _backend_class(cls_name)
        for name, func in inspect.getmembers(cls, predicate=inspect.isfunction):
            if not name.startswith("_"):
                names[name] = tuple(inspect.signature(func).parameters)[1:]
    return names


# -------------------------------------------------------------------- benchmark


# The released pools quote the training tasks of bfcl-eval <= 2025.6.15 (data group A;
# results/bfcl_release_evidence.md): 6 of the 50 read otherwise from 2025.7.17 on.
OLDER_WORDING = ("2025.6.15",)
# Low: the same tasks, 6 of 50 reworded (docs/fidelity.md, "Named, not changed").
WORDING = Departure("pool built from the {release} training-task wording (the released pools: an earlier copy, "
                    "6 of 50 tasks differ)", "low")


class BFCLBenchmark(Benchmark):
    """BFCL-v3 ``multi_turn_base`` with the ReMe paper's official 50/150 split."""

    name = "bfcl_v3"
    config_class = BFCLConfig
    max_steps_per_turn: int | None = BFCLConfig.max_steps_per_turn
    tool_dialect = TOOL_DIALECT
    packages = ("bfcl-eval",)  # its tasks, backends and official checker
    metrics = TASK_METRICS  # the paper's Avg@k and Pass@k
    labels = Labels("BFCL-v3")

    @staticmethod
    def built_pool_notes(build_params: dict[str, Any]) -> list[str]:
        """A pool built here summarizes its release's training tasks; the released ones quote
        an older copy (docs/fidelity.md, "Named, not changed")."""
        release = build_params.get("benchmark.release")
        if release in OLDER_WORDING:
            return []
        return [WORDING.format(release=RELEASES.get(release, release))]

    @classmethod
    def from_config(cls, cfg: BFCLConfig) -> BFCLBenchmark:
        ensure_release(cfg.release)  # may re-execute the command with that release importable
        bench = cls(split=cfg.split, limit=cfg.limit, task_ids=cfg.task_ids, tool_note=cfg.tool_note,
                    tool_response=cfg.tool_response, empty_turns=cfg.empty_turns)
        bench.max_steps_per_turn = cfg.max_steps_per_turn
        return bench

    def __init__(
        self,
        split: str = "test",
        limit: int | None = None,
        task_ids: list[str] | None = None,
        category: str = CATEGORY,
        irrelevance_gate: bool = False,
        tool_note: str = "none",
        tool_response: str = "keep",
        empty_turns: str = "keep",
    ):
        """``irrelevance_gate``: also fail episodes that call tools in a turn whose ground
        truth is empty. Off by default because bfcl-eval's own multi_turn_runner
        (2026.3.23) does not apply ``multi_turn_irrelevance_checker``; its result is
        always reported in ``Outcome.details["irrelevance"]``. ``tool_note``,
        ``tool_response`` and ``empty_turns``: as ``BFCLConfig`` (the defaults here are
        bfcl-eval's plain environment, which tests and tools drive; a run's config gives
        the authors')."""
        _require_bfcl()
        if category != CATEGORY:
            raise UserError(
                f"unsupported BFCL category {category!r}; only {CATEGORY!r} is supported"
            )
        if split not in SPLITS:
            raise UserError(f"unknown BFCL split {split!r}; choose one of {', '.join(SPLITS)}")
        if limit is not None and limit < 0:
            raise UserError(f"limit must be >= 0, got {limit}")
        self.split = split
        self.limit = limit
        self.category = category
        self.irrelevance_gate = irrelevance_gate
        self.tool_note = tool_note
        self.tool_response = tool_response
        self.empty_turns = empty_turns
        self._explicit = list(task_ids) if task_ids is not None else None
        if self._explicit is not None:
            known = _dataset()
            bad = [t for t in self._explicit if t not in known]
            if bad:
                raise UserError(
                    f"unknown BFCL task id(s): {', '.join(map(str, bad))} "
                    f"(ids look like {CATEGORY}_0 ... {CATEGORY}_{len(known) - 1})"
                )

    def task_ids(self) -> list[str]:
        if self._explicit is not None:
            ids = list(self._explicit)
        elif self.split == "all":
            ids = list(_dataset())
        else:
            ids = list(_split_ids()[self.split])
        return ids if self.limit is None else ids[: self.limit]

    def _record(self, task_id: str) -> dict[str, Any]:
        try:
            return _dataset()[task_id]
        except KeyError:
            raise UserError(f"unknown BFCL task id: {task_id}") from None

    def load(self, task_id: str) -> Task:
        record = self._record(task_id)
        entry = copy.deepcopy(record["entry"])
        turns = entry["question"]
        first_user = next(m["content"] for turn in turns for m in turn if m["role"] == "user")
        meta: dict[str, Any] = {
            "category": self.category,
            "involved_classes": entry["involved_classes"],
            "initial_config": entry["initial_config"],
            "ground_truth": copy.deepcopy(record["ground_truth"]),
        }
        if "excluded_function" in entry:  # present in the data, unused by bfcl-eval
            meta["excluded_function"] = entry["excluded_function"]
        return Task(id=task_id, turns=turns, query=first_user, meta=meta)

    def ground_truth(self, task_id: str) -> list[list[str]]:
        return copy.deepcopy(self._record(task_id)["ground_truth"])

    def ground_truth_calls(self, task_id: str) -> list[list[tuple[str, dict[str, Any]]]]:
        """The ground truth as (name, keyword arguments), positional arguments named."""
        entry = self._record(task_id)["entry"]
        names = _param_names(tuple(entry["involved_classes"]))
        return [
            [parse_call_string(call, names) for call in turn] for turn in self.ground_truth(task_id)
        ]

    def episode(self, task: Task, episode_key: str) -> BFCLEnv:
        """The synchronous environment (tests and tools drive it directly)."""
        return BFCLEnv(task, episode_key, irrelevance_gate=self.irrelevance_gate, tool_note=self.tool_note,
                       tool_response=self.tool_response, empty_turns=self.empty_turns)

    async def open(self, task: Task, episode_key: str) -> InProcessEnv:
        return InProcessEnv(self.episode(task, episode_key))


# -------------------------------------------------------------------------- env


class BFCLEnv:
    """One isolated episode: its own backend instances, its own record of calls."""

    def __init__(self, task: Task, episode_key: str, irrelevance_gate: bool = False, tool_note: str = "none",
                 tool_response: str = "keep", empty_turns: str = "keep"):
        _require_bfcl()
        meta = task.meta
        if not {"involved_classes", "initial_config", "ground_truth"} <= meta.keys():
            meta = BFCLBenchmark(split="all").load(task.id).meta
        self.task_id = task.id
        self.episode_key = episode_key
        self._classes: tuple[str, ...] = tuple(meta["involved_classes"])
        unknown = [c for c in self._classes if c not in CLASS_FILE_PATH_MAPPING]
        if unknown:
            raise UserError(f"task {task.id} uses unknown BFCL classes: {', '.join(unknown)}")
        self._initial_config: dict[str, Any] = copy.deepcopy(meta["initial_config"])
        self._ground_truth: list[list[str]] = copy.deepcopy(meta["ground_truth"])
        self._irrelevance_gate = irrelevance_gate
        self._tool_note = tool_note
        self._tool_response = tool_response == "keep"
        self._empty_turns = empty_turns
        safe_key = re.sub(r"[^A-Za-z0-9_]", "_", episode_key)[:48]
        self._name_prefix = f"reme_{safe_key}"

        self._instances: dict[str, Any] = {}
        self._methods: dict[str, Callable[..., Any]] = {}
        self._open_backends()

        self._turns: list[list[list[str]]] = []
        self._steps: list[list[str]] = []  # steps of the current turn
        self._calls: list[str] = []  # valid calls of the current step
        self._closed = False

    def _open_backends(self) -> None:
        # Mirrors bfcl's execute_multi_turn_func_call, minus its global instance cache.
        allowed = _doc_names(self._classes)
        for cls_name in self._classes:
            instance = _backend_class(cls_name)()
            if cls_name not in STATELESS_CLASSES:
                instance._load_scenario(
                    copy.deepcopy(self._initial_config.get(cls_name, {})), long_context=False
                )
            self._instances[cls_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_") and name in allowed:
                    self._methods[name] = method

    # -- Env protocol

    def tools(self) -> list[dict[str, Any]]:
        """The schemas of the current turn (the turns ended so far decide the note count)."""
        return json.loads(_tools_json(self._classes, notes_at(self._tool_note, len(self._turns)), self._tool_response))

    def execute(self, name: str, arguments: Any) -> ToolResult:
        """One call, as the authors' agent ran it (module docstring, "Every call is
        recorded"): its output, and the call the checker will see."""
        if self._closed:
            return ToolResult(
                _display_call(name, arguments),
                "Error during execution: the episode is closed.",
                True,
            )
        args = authors_arguments(arguments)
        method = self._methods.get(name) if is_identifier(name) else None
        try:
            checked = decode_arguments(args)
        except ValueError as exc:  # past reme's bounds on untrusted data: never run, never given to eval
            return self._not_run(name, arguments, _syntax_error(name, args) or (
                unknown_function_text(name) if method is None
                else f"Error during execution: invalid arguments for {name}: {exc}"))
        if method is None:
            return self._not_run(name, arguments, _syntax_error(name, checked) or unknown_function_text(name),
                                 checker=canonical_call(name, checked) if checker_safe(name) else None)
        call = canonical_call(name, checked)
        refusal = _resource_refusal(type(method.__self__).__name__, name, checked)
        if refusal is not None:
            return self._not_run(name, arguments, f"Error during execution: {refusal}")

        self._calls.append(call)
        try:
            with _BACKEND_LOCK:
                output = _format_result(method(**checked))
        except Exception as exc:  # any backend failure is the model's to read
            return ToolResult(call, f"Error during execution: {exc}", error=True)
        return ToolResult(call, output)

    def _not_run(self, name: Any, arguments: Any, output: str, checker: str | None = None) -> ToolResult:
        """A call reme does not run: the model reads ``output``, and the checker still gets the
        call (the authors' agent recorded every one), as ``checker`` when that text is safe
        for its eval (it then fails there as it failed here), else as a stand-in that fails
        there the same way without running anything."""
        recorded = checker or canonical_call(NOT_RUN, {"call": _display_call(name, arguments)})
        self._calls.append(recorded)
        return ToolResult(recorded, output, error=True)

    def end_step(self) -> None:
        # bfcl's eval runner drops steps that decode to no calls.
        if self._calls:
            self._steps.append(self._calls)
        self._calls = []

    def end_turn(self) -> None:
        self.end_step()
        self._turns.append(self._steps)
        self._steps = []

    def decoded_calls(self) -> list[list[list[str]]]:
        """The calls as recorded so far (per turn, per step), including an unfinished turn."""
        turns = copy.deepcopy(self._turns)
        pending = copy.deepcopy(self._steps) + ([list(self._calls)] if self._calls else [])
        if pending:
            turns.append(pending)
        return turns

    def evaluate(self) -> Outcome:
        decoded = self.decoded_calls()
        expected = len(self._ground_truth)
        details: dict[str, Any] = {
            "error_type": None,
            "error_message": None,
            "decoded_calls": copy.deepcopy(decoded),
            "turns_recorded": len(decoded),
            "turns_expected": expected,
            "empty_turns": self._empty_turns,
        }
        if self._empty_turns == "drop":
            # The authors' extract_multi_turn_responses (bfcl_utils.py:254-300): a turn without
            # a call is no turn, the later ones move up, and nothing fills the end; bfcl's
            # runner then fails any count that differs from the ground truth's.
            decoded = [turn for turn in decoded if turn]
            details["turns_scored"] = len(decoded)
            if len(decoded) != expected:
                details["error_type"] = "multi_turn:force_terminated"
                details["error_message"] = (f"{len(decoded)} turns with calls were recorded but the task has "
                                            f"{expected} (benchmark.empty_turns=drop)")
                return Outcome(False, 0.0, details)
        if len(decoded) > expected:
            # What bfcl's runner reports when turn counts differ.
            details["error_type"] = "multi_turn:force_terminated"
            details["error_message"] = (
                f"{len(decoded)} turns were recorded but the task has {expected}."
            )
            return Outcome(False, 0.0, details)
        decoded += [[] for _ in range(expected - len(decoded))]

        model_name = f"{self._name_prefix}_{uuid.uuid4().hex[:12]}"
        test_entry = {
            "id": self.task_id,
            "initial_config": copy.deepcopy(self._initial_config),
            "involved_classes": list(self._classes),
        }
        try:
            with _BACKEND_LOCK:
                result = multi_turn_checker(
                    copy.deepcopy(decoded),
                    copy.deepcopy(self._ground_truth),
                    test_entry,
                    CATEGORY,
                    model_name,
                )
        except Exception:
            details["error_type"] = "reme:checker_exception"
            details["error_message"] = traceback.format_exc()
            return Outcome(False, 0.0, details)
        finally:
            _forget_checker_instances(model_name)

        valid = bool(result.get("valid"))
        if not valid:
            details["error_type"] = _json_safe(result.get("error_type"))
            details["error_message"] = _json_safe(result.get("error_message"))
            details["checker_details"] = _compact_details(result)

        try:
            irrelevance = multi_turn_irrelevance_checker(decoded, self._ground_truth)
        except Exception:
            irrelevance = {
                "valid": False,
                "error_type": "reme:checker_exception",
                "error_message": traceback.format_exc(),
            }
        details["irrelevance"] = {
            "valid": bool(irrelevance.get("valid")),
            "error_type": irrelevance.get("error_type"),
            "error_message": irrelevance.get("error_message"),
            "gating": self._irrelevance_gate,
        }
        if valid and self._irrelevance_gate and not irrelevance.get("valid"):
            valid = False
            details["error_type"] = irrelevance.get("error_type")
            details["error_message"] = irrelevance.get("error_message")
        return Outcome(valid, 1.0 if valid else 0.0, details)

    def close(self) -> None:
        self._closed = True
        self._methods = {}
        self._instances = {}


# ---------------------------------------------------------------------- helpers


def _format_result(result: Any) -> str:
    """bfcl's formatting of a call result (execute_multi_turn_func_call)."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:
            return str(result)
    return str(result)


# --------------------------------------------------------- calls reme does not run

# The names bfcl's execute_multi_turn_func_call refuses before its eval (multi_turn_utils.py).
BFCL_REFUSED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
# The checker's stand-in for a call reme does not give to its eval: defined nowhere, so the
# checker's eval fails on it (NameError) as it failed on the original, with no effect.
NOT_RUN = "reme_call_not_run"


def authors_arguments(raw: Any) -> Any:
    """The arguments as the authors' agent decoded them (bfcl_utils.py:316-327,
    bfcl_agent.py:400-411): a JSON string parsed, anything else as it is; arguments that do
    not parse into an object of names are no arguments at all: the call is ``name()``."""
    try:
        value = json.loads(raw) if isinstance(raw, (str, bytes, bytearray)) else raw
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def unknown_function_text(name: Any) -> str:
    """What bfcl answers a call of a function the task does not have: its refusal of a few
    names, else the NameError its eval raises. A name that would resolve in bfcl's own module
    (a Python builtin such as ``open``, or one of its imports) is answered the same way: reme
    never evaluates it (bfcl would)."""
    shown = str(name)
    if "(" in shown:
        shown = shown.split("(")[0]
    if "." in shown:
        shown = shown.split(".")[1]
    if shown in BFCL_REFUSED:
        return f"Error during execution: Function call {shown} is not allowed."
    first = re.match(r"[A-Za-z_]\w*", str(name))  # eval names the first undefined name of ``a.b(...)``
    return f"Error during execution: name {first.group() if first else str(name)!r} is not defined"


def checker_safe(name: Any) -> bool:
    """Whether ``name(...)`` fails in the checker's eval without running anything: an
    identifier that neither bfcl's module nor Python's builtins define."""
    return (is_identifier(name) and name not in vars(multi_turn_utils) and not hasattr(builtins, name)
            and name not in BFCL_REFUSED)


def _syntax_error(name: Any, args: Any) -> str | None:
    """bfcl's answer where the call text the authors' agent built (``name(k=repr(v), ...)``)
    is not Python: its eval's SyntaxError, found by compiling the text (nothing runs)."""
    try:
        text = f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
        if len(text) > 4 * MAX_ARGUMENT_CHARS:
            return None
        compile(text, "<string>", "eval")
    except SyntaxError as exc:
        return f"Error during execution: {exc}"
    except Exception:  # noqa: BLE001 - a value repr() cannot write: not a syntax question
        return None
    return None


def _resource_refusal(class_name: str, name: str, args: dict[str, Any]) -> str | None:
    if class_name != "MathAPI":
        return None
    if name == "power":
        base, exponent = args.get("base"), args.get("exponent")
        if (
            type(base) is int
            and type(exponent) is int
            and abs(base) > 1
            and abs(exponent) > _MAX_INT_EXPONENT
        ):
            return f"exponent too large for an integer power (limit {_MAX_INT_EXPONENT})"
    if name in ("logarithm", "square_root"):
        precision = args.get("precision")
        if (
            isinstance(precision, (int, float))
            and math.isfinite(precision)
            and precision > _MAX_PRECISION
        ):
            return f"precision too large (limit {_MAX_PRECISION})"
    return None


def _forget_checker_instances(model_name: str) -> None:
    """Drop the checker's module-global backend instances created for ``model_name``
    (plain, ``_eval`` and ``_ground_truth_eval`` variants all contain it)."""
    namespace = vars(multi_turn_utils)
    for key in [k for k in list(namespace) if model_name in k]:
        namespace.pop(key, None)


def _compact_details(result: dict[str, Any]) -> dict[str, Any]:
    # Full instance states and execution logs are large; keep what explains the failure.
    inner = result.get("details")
    if not isinstance(inner, dict):
        return {}
    keep = ("differences", "missing_items", "model response decoded")
    return {k: _json_safe(inner[k]) for k in keep if k in inner}


def _json_safe(value: Any, depth: int = 0) -> Any:
    if value is None or type(value) in (bool, int, str):
        return value if type(value) is not str else _clip(value)
    if type(value) is float:
        return value if math.isfinite(value) else str(value)
    if depth < 8 and isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if depth < 8 and isinstance(value, (list, tuple, set)):
        return [_json_safe(v, depth + 1) for v in value]
    try:
        return _clip(str(value))
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL_CHARS else text[:_MAX_DETAIL_CHARS] + "...[truncated]"


def _short(value: Any, limit: int = 60) -> str:
    text = value if is_identifier(value) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _display_call(name: Any, arguments: Any) -> str:
    """Readable text for a call we did not run; never executed (the checker gets it only
    as a string literal of ``NOT_RUN``)."""
    if isinstance(arguments, str):
        shown = arguments
    else:
        try:
            shown = json.dumps(arguments, default=str)
        except Exception:
            shown = f"<{type(arguments).__name__}>"
    if len(shown) > 200:
        shown = shown[:197] + "..."
    return f"{_short(name)}({shown})"
