"""Run the ReMe authors' own BFCL tool path and compare what it sends with reme's, turn by turn.

The authors' agent (agentscope-ai/ReMe 65971baf, benchmark/bfcl/) offers the tools of the
preprocessed task file at turn 1 (``preprocess.py``: bfcl's language pre-processing, once)
and, at every later turn, the tools ``bfcl_utils.handle_user_turn`` returns, each time
without its response schema (``extract_tool_schema``). This script runs their unmodified
``bfcl_utils.py`` from a checkout of that commit, on the bfcl-eval release reme calls
``paper`` (2025.7.17), re-creating only ``preprocess.py``'s lines 27-63 (it reads bfcl's
files through a module that imports every vendor SDK), and prints, per task, how many times
the Python 3 note sits on the descriptions at each turn and whether reme's tools
(``benchmark.tool_note=per_turn benchmark.tool_response=drop``, the defaults) are the same
JSON (results/bfcl_authors_agent.md holds a run of it).

    git clone https://github.com/agentscope-ai/ReMe && git -C ReMe checkout 65971baf
    python scripts/authors_bfcl_tools.py ReMe/benchmark/bfcl [TASK_ID ...]

tree-sitter is stubbed: bfcl imports it for its Java and JavaScript parsers, which no
multi-turn task reaches. bfcl-eval's modules are imported from the paper release, so this
runs in a process of its own (it re-executes itself with that release first on the path).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import types
from pathlib import Path

NOTE = " Note that the provided function is in Python 3 syntax."


def _stub_tree_sitter() -> None:
    class _Anything:
        def __init__(self, *args, **kwargs): ...
        def __call__(self, *args, **kwargs): return _Anything()
        def __getattr__(self, name): return _Anything()

    for name in ("tree_sitter", "tree_sitter_java", "tree_sitter_javascript"):
        module = types.ModuleType(name)
        module.Language = module.Parser = _Anything
        module.language = lambda: None
        sys.modules[name] = module


def main(authors_dir: str, task_ids: list[str]) -> int:
    from reme_cli.bench.bfcl.release import RELEASES, loaded_version, release_dir

    if loaded_version() != RELEASES["paper"]:  # bfcl_eval must be the paper release's: start over with it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(release_dir("paper")), os.environ.get("PYTHONPATH", "")])}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl-root-"))
    _stub_tree_sitter()
    sys.path.insert(0, authors_dir)
    import bfcl_utils  # the authors' file, unmodified
    from bfcl_eval.constants.category_mapping import MULTI_TURN_FUNC_DOC_FILE_MAPPING
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler.model_style import ModelStyle
    from bfcl_eval.model_handler.utils import convert_to_tool, func_doc_language_specific_pre_processing

    from reme_cli.bench.bfcl.benchmark import BFCLBenchmark

    data = Path(sys.modules["bfcl_eval"].__file__).parent / "data"

    def load(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    entries = {e["id"]: e for e in load(data / "BFCL_v3_multi_turn_base.json")}

    def preprocess(entry: dict) -> dict:  # preprocess.py process_multi_turn_test_case, lines 27-63
        entry = json.loads(json.dumps(entry))
        category = entry["id"].rsplit("_", 1)[0]
        entry["function"] = []
        for cls in entry["involved_classes"]:
            entry["function"].extend(load(data / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[cls]))
        functions = func_doc_language_specific_pre_processing(entry["function"], category)
        tools = convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OpenAI_Completions)
        row = {"id": entry["id"], "messages": entry["question"][0], "tools": tools, "extra": entry}
        return json.loads(json.dumps(row))  # written to and read from the jsonl, as bfcl_agent.init_state does

    reme = BFCLBenchmark(split="all", tool_note="per_turn", tool_response="drop")
    ids = task_ids or list(entries)
    same_all, rows = True, []
    for task_id in ids:
        row = preprocess(entries[task_id])
        theirs = [bfcl_utils.extract_tool_schema(row["tools"])]  # turn 1: bfcl_agent.py:116
        turn = 1
        while True:  # a reply without calls: env_step -> handle_user_turn (bfcl_agent.py:376)
            out = bfcl_utils.handle_user_turn(row["extra"], turn)
            if "tools" not in out:
                break
            theirs.append(bfcl_utils.extract_tool_schema(out["tools"]))  # bfcl_agent.py:637-638
            turn += 1
        env = reme.episode(reme.load(task_id), f"authors-{task_id}")
        ours = []
        for _ in theirs:
            ours.append(env.tools())
            env.end_turn()
        counts = [tools[0]["function"]["description"].count(NOTE) for tools in theirs]
        same = [json.dumps(a) == json.dumps(b) for a, b in zip(theirs, ours, strict=True)]
        same_all &= all(same)
        rows.append(f"| {task_id} | {len(theirs)} | {', '.join(map(str, counts))} | {'yes' if all(same) else 'NO'} |")
    print(f"bfcl-eval {loaded_version()}, the authors' bfcl_utils.py from {Path(authors_dir).name}/\n")
    print("| task | turns | Python-3 notes per turn (theirs) | reme's tools the same JSON, every turn |")
    print("| --- | --- | --- | --- |")
    print("\n".join(rows))
    print(f"\n{len(ids)} tasks; reme's per_turn/drop tools equal the authors' at every turn: {same_all}")
    return 0 if same_all else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        raise SystemExit(2)
    raise SystemExit(main(sys.argv[1], sys.argv[2:]))
