"""`memory=langmem_prompt`: the LangMem baseline's settings (reme_cli/methods/langmem/configs/memory/langmem_prompt.yaml lists them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reme_cli.core.config import check_choices
from reme_cli.core.errors import UserError
from reme_cli.core.plugin import Section
from reme_cli.methods.langmem.install import check_installed

KINDS = {"prompt_memory", "metaprompt", "gradient"}


@dataclass
class LangMemPromptConfig(Section):
    name: str = "langmem_prompt"
    pool: Optional[str] = None
    # LangMem's optimizer: prompt_memory (1 call, JSON schema: any server, the embedded
    # model included) | metaprompt | gradient (forced / required tool calls: vLLM).
    kind: str = "prompt_memory"
    batch_size: int = 4  # build-pool: training trajectories per optimizer step
    initial_prompt: str = "Follow the user's instructions step by step, using the available tools."
    update_instructions: str = (
        "The prompt guides a tool-using agent on multi-turn tasks. Keep it general: write lessons that help "
        "on other tasks with these tools, never the answers of the tasks shown. Make minimal changes, only "
        "where the trajectories show errors.")
    max_reflection_steps: int = 5  # metaprompt / gradient (LangMem's default: 5)
    min_reflection_steps: int = 1  # metaprompt / gradient (LangMem's default: 1)
    feedback: str = "reason"  # reason: success / failure + the checker's reason | verdict: success / failure only
    max_trajectory_chars: int = 12000  # one rendered trajectory, cut from the middle beyond this

    def check(self) -> None:
        check_choices("memory", self, {"kind": KINDS, "feedback": {"reason", "verdict"}},
                      {"batch_size": 1, "max_reflection_steps": 1, "min_reflection_steps": 0,
                       "max_trajectory_chars": 200})
        if self.min_reflection_steps > self.max_reflection_steps:
            raise UserError(f"memory.min_reflection_steps={self.min_reflection_steps} must be <= "
                            f"memory.max_reflection_steps={self.max_reflection_steps}")
        check_installed()  # before any work: build-pool samples trajectories first
