"""`memory=langmem_prompt`: LangMem's procedural-memory prompt optimizer, a method of its
own beside the paper's LangMem row. The ReMe authors reproduced LangMem with LangMem's
episodic-memory guide ("How to Extract Episodic Memories", section "With storage";
agentscope-ai/ReMe issue #67): that is ``memory=langmem``. This method is not in the
paper's table suites.

Mechanism: ``langmem.create_prompt_optimizer(model, kind=memory.kind)``: one instructions
text that the optimizer rewrites from trajectories and their feedback (failures included),
given to every task; not a set of retrieved items.
``kind``: ``prompt_memory`` (default; one LLM call with a JSON schema, which every server
here serves, the embedded llama.cpp model included), ``metaprompt`` or ``gradient`` (tool
calls with a forced / required tool_choice: vLLM).

- build-pool: the sampled training trajectories, in split order, go to the optimizer in
  batches of ``memory.batch_size``, each step starting from the previous step's prompt
  (``memory.initial_prompt`` first). Every step is a line of ``build/langmem_steps.jsonl``,
  so an interrupted build resumes at the next batch; assemble writes the last prompt to
  ``pool/langmem_prompt.json`` (+ ``prompt.txt``, ``manifest.json`` with ``"method": "langmem_prompt"``).
- eval, fixed: every task's guidance is the pool's prompt, after the header ReMe's guidance
  uses (``format_guidance``'s family); the retrieved id is the prompt's version (a hash).
- eval, dynamic: each (seed, run) stream starts from the pool's prompt; after each task the
  optimizer runs on that task's trajectory and feedback, and the new prompt is the unit's
  event (the seam commits it, or forgets it if the unit fails; a resumed stream starts
  from the last committed prompt).

All LLM calls go through reme's summarizer client (``langmem.chat_model.RemeChatModel``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reme_cli.agent.trajectory import GUIDANCE_HEADER
from reme_cli.bench.base import Task
from reme_cli.core import integrity
from reme_cli.core.config import Config, config_hash
from reme_cli.core.errors import UserError
from reme_cli.core.io import append_lines, now, write_json_atomic
from reme_cli.core.reading import JsonFile
from reme_cli.methods.base import BuildContext, BuildResult, Learned, Memory, MethodContext, Retrieval, Tried
from reme_cli.methods.langmem.prompt.config import LangMemPromptConfig
from reme_cli.methods.langmem.prompt.optimizer import optimize, prompt_version, require_langmem
from reme_cli.methods.hooks import SavedState
from reme_cli.methods.state_view import StateChange, StateItem

POOL_FILE = "langmem_prompt.json"
PROMPT_FILE = "prompt.txt"
MANIFEST_FILE = "manifest.json"
STEPS_FILE = "langmem_steps.jsonl"
POOL_FORMAT = "reme-langmem-prompt-pool"
_FIX = "rebuild it with `reme build-pool memory=langmem_prompt` or restore the file from a copy"
_POOL_SHAPE = {"format": str, "method": str, "kind": str, "version": str, "steps": int, "trajectories": int,
               "built_by": dict}
POOL_MANIFEST = JsonFile("a LangMem prompt pool's manifest.json", fix=_FIX, shape={**_POOL_SHAPE, "files": dict})
POOL_STATE = JsonFile("a LangMem prompt pool's langmem_prompt.json", fix=_FIX, shape={**_POOL_SHAPE, "prompt": str})
# One line per optimizer step (a resumed build takes the next batch).
STEPS = JsonFile("a LangMem prompt build's langmem_steps.jsonl", lines=True, fix="move that line out",
                 shape={"step": int, "items": list, "changed": bool, "llm_calls": int, "error": (str, type(None)),
                        "prompt": str}, required=("items", "changed", "llm_calls", "error", "prompt"))
METHOD = "langmem_prompt"  # what its pool file and manifest record


def format_guidance(prompt: str) -> str | None:
    """The injected text: ReMe's guidance header, then the learned instructions."""
    prompt = prompt.strip()
    return f"{GUIDANCE_HEADER}:\n{prompt}\n" if prompt else None


def resolve_pool_path(path: str | Path) -> Path:
    """``memory.pool`` may name a LangMem pool or the build-pool output dir holding one; any
    other pool (ReMe's experiences) is refused in one line."""
    p = Path(path)
    for candidate in (p / "pool", p):
        if (candidate / POOL_FILE).is_file():
            return candidate
    for candidate in (p / "pool", p):
        if (candidate / "experiences.jsonl").exists() or (candidate / MANIFEST_FILE).exists():
            raise UserError(f"memory.pool={path} is not a LangMem pool (it holds another method's pool, e.g. "
                            "ReMe's experiences): build one with `reme build-pool memory=langmem_prompt`")
    raise UserError(f"memory.pool={path} is not a LangMem pool: build one with "
                    "`reme build-pool memory=langmem_prompt out_dir=DIR`, then give memory.pool=DIR")


def load_pool(path: str | Path) -> dict[str, Any]:
    pool = resolve_pool_path(path)
    where = pool / POOL_FILE
    recorded = (POOL_MANIFEST.read(pool / MANIFEST_FILE) or {}).get("files")
    if recorded is not None:  # pools made before the manifest recorded its files have none
        integrity.verify(pool, recorded, (POOL_FILE,),
                         "rebuild it with `reme build-pool memory=langmem_prompt` or restore the file from a copy")
    data = POOL_STATE.read(where)
    if data is None or data.get("method") != METHOD or not isinstance(data.get("prompt"), str):
        raise UserError(f"{where} is not a LangMem pool file; rebuild it with `reme build-pool memory=langmem_prompt`")
    return data


# ---------------------------------------------------------------------- what it holds
# The instructions are the one item, named by their version (the id every unit records as
# retrieved); an optimizer step that changed them retires one version and adds the next.
def _version_item(prompt: str, origin: str = "") -> StateItem:
    return StateItem(id=prompt_version(prompt), text=prompt, title="the learned instructions", kind="prompt",
                     origin=origin)


def _change(unit: str, seq: int, events: list[dict[str, Any]]) -> StateChange:
    out = StateChange(unit, seq)
    for e in events:
        if e.get("changed") and isinstance(e.get("prompt"), str):
            out.deleted.append(str(e.get("prompt_before", "")))
            out.added.append(_version_item(e["prompt"], unit))
    return out


def _pool_file(folder: Path) -> dict[str, Any] | None:
    data = POOL_STATE.probe(folder / POOL_FILE)
    ok = data is not None and data.get("method") == METHOD and isinstance(data.get("prompt"), str)
    return data if ok else None


def _locate(where: Path) -> Path | None:
    """A pool (``where`` or its ``pool/``), else a dynamic stream's saved prompt."""
    found = next((c for c in (where, where / "pool") if _pool_file(c) is not None), None)
    return found or (where if (where / PROMPT_FILE).is_file() else None)


def _read(folder: Path) -> tuple[list[StateItem], dict[str, Any], str]:
    data = POOL_STATE.read(folder / POOL_FILE)  # damaged: one line naming it
    if data is not None and isinstance(data.get("prompt"), str):
        prompt, summary = data["prompt"], {k: data[k] for k in ("kind", "steps", "trajectories") if k in data}
    else:  # a dynamic stream's saved prompt
        text = (folder / PROMPT_FILE).read_text(encoding="utf-8", errors="replace")
        prompt, summary = (text[:-1] if text.endswith("\n") else text), {}  # save() adds one newline
    return [_version_item(prompt)], {**summary, "prompt chars": len(prompt)}, prompt


@dataclass(eq=False)  # the state and what it is run with (identity, not value, compares)
class LangMemPrompt(Memory):
    """The learned instructions as every task's guidance; refined per stream in dynamic mode."""

    config_class = LangMemPromptConfig
    report_columns = {"setting": "LangMem (prompt optimizer)"}
    needs_summarizer = True
    saved = SavedState(METHOD, _read, _change, locate=_locate)

    prompt: str  # the learned instructions
    cfg: LangMemPromptConfig
    summ: Any

    # ------------------------------------------------------------------ build-pool
    @classmethod
    async def learn_from_training(cls, ctx: BuildContext) -> None:
        """Optimizer steps over the training trajectories in split order, ``batch_size`` at
        a time; each finished step is a line of ``STEPS_FILE`` (resume: the next batch)."""
        require_langmem()
        cfg: LangMemPromptConfig = ctx.cfg.memory
        items = [(task_id, i) for task_id in ctx.task_ids for i in range(len(ctx.attempts.get(task_id, [])))]
        batches = [items[k:k + cfg.batch_size] for k in range(0, len(items), cfg.batch_size)]
        path = ctx.work / STEPS_FILE
        done = STEPS.records(path)
        prompt = done[-1]["prompt"] if done else cfg.initial_prompt
        for index in range(len(done), len(batches)):
            batch = batches[index]
            triples = [(ctx.bench.load(t), *ctx.attempts[t][i]) for t, i in batch]
            step = await optimize(prompt, triples, cfg, ctx.summarizer)
            append_lines(path, [{
                "step": index, "items": [f"{t}#{i}" for t, i in batch],
                "successes": sum(o.success for _, _, o in triples),
                "before": prompt_version(prompt), "after": prompt_version(step.prompt),
                "changed": step.changed, "llm_calls": step.llm_calls, "error": step.error,
                "prompt": step.prompt,
            }])
            prompt = step.prompt

    @classmethod
    def assemble_pool(cls, ctx: BuildContext, staging: Path) -> BuildResult:
        cfg: LangMemPromptConfig = ctx.cfg.memory
        steps = STEPS.records(ctx.work / STEPS_FILE)
        prompt = steps[-1]["prompt"] if steps else cfg.initial_prompt
        meta = {
            "format": POOL_FORMAT, "format_version": 1, "method": METHOD, "kind": cfg.kind,
            "version": prompt_version(prompt), "initial_version": prompt_version(cfg.initial_prompt),
            "steps": len(steps), "batch_size": cfg.batch_size,
            "trajectories": sum(len(s["items"]) for s in steps),
            "built_by": {"kind": "build-pool", "run": str(ctx.work), "config_hash": config_hash(ctx.cfg),
                         "model": ctx.cfg.model.name, "summarizer": ctx.cfg.summarizer.name,
                         "samples": ctx.cfg.build.samples},
            "created_at": now(),
        }
        write_json_atomic(staging / POOL_FILE, {**meta, "prompt": prompt})
        (staging / PROMPT_FILE).write_text(prompt + "\n", encoding="utf-8")
        # Written last: a complete pool, recording what it holds.
        write_json_atomic(staging / MANIFEST_FILE, {**meta, "files": integrity.record(staging, (POOL_FILE,))})
        report = {
            "langmem_kind": cfg.kind,
            "optimizer_steps": len(steps),
            "prompt_changes": sum(bool(s["changed"]) for s in steps),
            "optimizer_failures": sum(bool(s["error"]) for s in steps),
            "summarizer_llm_calls": sum(s["llm_calls"] for s in steps),
            "prompt_version": meta["version"],
            "prompt_chars": len(prompt),
        }
        rows = [
            ("optimizer (LangMem)", cfg.kind),
            ("optimizer steps", f"{len(steps)} (batch {cfg.batch_size})"),
            ("prompt changed / failed steps", f"{report['prompt_changes']} / {report['optimizer_failures']}"),
            ("prompt version", f"{meta['version']} ({len(prompt)} chars)"),
        ]
        return BuildResult(report, rows)

    # ------------------------------------------------------------------ eval
    @classmethod
    def check_installed(cls) -> None:
        require_langmem()  # a missing extra is bad input: refused before anything is written

    @classmethod
    def check_pool(cls, cfg: Config) -> None:
        load_pool(cfg.memory.pool)

    @classmethod
    def load(cls, ctx: MethodContext) -> LangMemPrompt:
        require_langmem()
        return cls(load_pool(cls.require_pool(ctx.cfg))["prompt"], ctx.cfg.memory, ctx.summarizer)

    def fork(self, where: Path) -> LangMemPrompt:
        return LangMemPrompt(self.prompt, self.cfg, self.summ)

    def replay(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.prompt = event["prompt"]

    def save(self, where: Path) -> None:
        tmp = where / (PROMPT_FILE + ".tmp")
        tmp.write_text(self.prompt + "\n", encoding="utf-8")
        os.replace(tmp, where / PROMPT_FILE)

    async def retrieve(self, task: Task, unit: str = "") -> Retrieval:
        version = prompt_version(self.prompt)
        return Retrieval(format_guidance(self.prompt), [version], details={"kind": self.cfg.kind,
                                                                             "prompt_version": version})

    async def learn(self, task: Task, tried: Tried, retrieval: Retrieval, unit: str = "") -> Learned:
        prompt = self.prompt  # the optimizer starts from the state this unit retrieved
        step = await optimize(prompt, [(task, a.trajectory, a.outcome) for a in tried.attempts], self.cfg,
                              self.summ)
        info = {"kind": self.cfg.kind, "prompt_before": prompt_version(prompt),
                "prompt_after": prompt_version(step.prompt), "changed": step.changed,
                "llm_calls": step.llm_calls, "optimizer_error": step.error}
        return Learned(info, [{"task_id": task.id, **info, "prompt": step.prompt}])
