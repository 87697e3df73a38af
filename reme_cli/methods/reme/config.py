"""`memory=reme`: the method's settings. Paper values are the defaults; the official
code's differ where noted (README, "Paper vs official code")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from reme_cli.core.config import check_choices


@dataclass
class ReflectionCfg:
    enabled: bool = True
    max_retries: int = 3
    judge: bool = True  # the LLM judge validates a kept lesson like any other experience


@dataclass
class DeletionCfg:
    enabled: bool = True
    alpha: int = 5
    beta: float = 0.5
    rule: str = "le"  # le: u/f <= beta (paper) | lt: u/f < beta (official code)
    every: int = 1  # tasks between deletion passes: 1 = after each task (paper); official BFCL: 5


@dataclass
class ReMeConfig:
    name: str = "reme"
    pool: Optional[str] = None
    # A pool embedded with another model is refused; true: re-embed a copy for this run.
    reembed: bool = False
    top_k: int = 5
    retrieval_key: str = "usage_scenario"  # usage_scenario | task_query | generalized_query | keywords
    rerank: bool = True  # LLM rerank of the top K (paper; v0.1.9/v0.2.0.4 default; 2026 scripts: off)
    rewrite: bool = True  # LLM rewrite into task-specific guidance (same sources)
    addition: str = "selective"  # selective | full
    granularity: str = "keypoint"  # keypoint | trajectory
    judge_threshold: float = 0.3  # paper 0.3, official code 0.5
    dedup_threshold: float = 0.85  # paper 0.85, official code 0.5
    # What near-duplicate detection embeds: the retrieval key and the content (a lesson
    # with an empty key is then not a duplicate of every other one), or the key alone.
    dedup_text: str = "key_content"  # key_content | key
    # Who earns u: the final outcome of the task (paper: "recall that contributes to
    # success") or only the first attempt, the one that retrieved (official code).
    u_credit: str = "final"  # final | first_attempt
    reflection: ReflectionCfg = field(default_factory=ReflectionCfg)
    deletion: DeletionCfg = field(default_factory=DeletionCfg)

    def check(self) -> None:
        check_choices("memory", self, {
            "retrieval_key": {"usage_scenario", "task_query", "generalized_query", "keywords"},
            "addition": {"selective", "full"},
            "granularity": {"keypoint", "trajectory"},
            "deletion.rule": {"le", "lt"},
            "dedup_text": {"key_content", "key"},
            "u_credit": {"final", "first_attempt"},
        }, {"top_k": 0, "reflection.max_retries": 0, "deletion.alpha": 1, "deletion.every": 1,
            "judge_threshold": 0, "dedup_threshold": 0, "deletion.beta": 0},
           {"judge_threshold": 1, "dedup_threshold": 1})
