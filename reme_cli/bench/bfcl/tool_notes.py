"""The language note bfcl appends to every tool description, from the active bfcl-eval release.

bfcl's handlers, and the ReMe authors' BFCL agent, pass the function docs through
``bfcl_eval.model_handler.utils.func_doc_language_specific_pre_processing`` before converting
them to tools: for a Python category it appends " Note that the provided function is in
Python 3 syntax." to each description, in place. The authors' ``compile_tools``
(agentscope-ai/ReMe 65971baf ``benchmark/bfcl/bfcl_utils.py:122-138``) runs it on the same
stored entry at every turn change, on docs that ``preprocess.py`` already annotated once, so
the tools of turn k carry the note k times (counted by running their ``handle_user_turn`` on
bfcl-eval 2025.7.17: ``results/bfcl_authors_agent.md``). ``benchmark.tool_note`` picks
``per_turn`` (theirs), ``once`` (bfcl-eval's own handlers) or ``none``.

The modules that hold it import bfcl's Java and JavaScript parsers (tree-sitter, left out by
the ``--no-deps`` install) or create folders at import; so the function, and the module
functions it calls, are taken from the release's source as it ships them and run here.
Releases up to 2025.x keep it in ``bfcl_eval/model_handler/utils.py``, later ones in
``bfcl_eval/utils.py`` (``_func_doc_language_specific_pre_processing``).
"""

from __future__ import annotations

import ast
import builtins
import copy
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any, Callable

from reme_cli.core.errors import UserError

TOOL_NOTES = ("per_turn", "once", "none")
_WHERE = (("model_handler/utils.py", "func_doc_language_specific_pre_processing"),
          ("utils.py", "_func_doc_language_specific_pre_processing"))


@cache
def pre_processing() -> Callable[[list[dict[str, Any]], str], list[dict[str, Any]]]:
    """bfcl's language pre-processing of function docs, from the bfcl-eval this process imports."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        raise UserError("bfcl-eval is not installed (pip install --no-deps -r requirements-bfcl.txt)")
    package = Path(spec.origin).parent
    for rel, name in _WHERE:
        source = package / rel
        functions = _module_functions(source)
        if name in functions:
            return _compiled(source, functions, name)
    raise UserError(f"bfcl-eval at {package} has no func_doc_language_specific_pre_processing: "
                    "this bfcl-eval release is not supported")


def _module_functions(source: Path) -> dict[str, ast.FunctionDef]:
    if not source.is_file():
        return {}
    tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _compiled(source: Path, functions: dict[str, ast.FunctionDef], name: str) -> Callable[..., Any]:
    """``name`` and every module function it calls, compiled from the release's file (its
    own code, not model output; compiled under its path, so a traceback names the file)."""
    wanted, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in wanted:
            continue
        wanted.add(current)
        todo += [n.id for n in ast.walk(functions[current]) if isinstance(n, ast.Name) and n.id in functions]
    unknown = {n.id for f in wanted for n in ast.walk(functions[f]) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Load)} - wanted - set(dir(builtins)) - {"json"}
    local = {a.arg for f in wanted for a in ast.walk(functions[f]) if isinstance(a, ast.arg)}
    local |= {n.id for f in wanted for n in ast.walk(functions[f]) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    if unknown - local:
        raise UserError(f"{source}: {name} needs {sorted(unknown - local)}, which reme cannot provide; "
                        "this bfcl-eval release is not supported")
    module = ast.Module(body=[functions[f] for f in sorted(wanted)], type_ignores=[])
    namespace: dict[str, Any] = {"json": json}
    exec(compile(module, str(source), "exec"), namespace)  # noqa: S102
    return namespace[name]


def notes_at(mode: str, turn: int) -> int:
    """How many times the note is on the descriptions at ``turn`` (0-based)."""
    return {"per_turn": turn + 1, "once": 1, "none": 0}[mode]


def annotated(docs: list[dict[str, Any]], category: str, times: int) -> list[dict[str, Any]]:
    """A copy of ``docs`` after ``times`` passes of the release's pre-processing."""
    docs = copy.deepcopy(docs)
    for _ in range(times):
        docs = pre_processing()(docs, category)
    return docs
