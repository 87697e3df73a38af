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


@dataclass
class DeletionCfg:
    enabled: bool = True
    alpha: int = 5
    beta: float = 0.5
    rule: str = "le"  # le: u/f <= beta (paper) | lt: u/f < beta (official code)


@dataclass
class ReMeConfig:
    name: str = "reme"
    pool: Optional[str] = None
    top_k: int = 5
    retrieval_key: str = "usage_scenario"  # usage_scenario | task_query | generalized_query | keywords
    rerank: bool = False
    rewrite: bool = False
    addition: str = "selective"  # selective | full
    granularity: str = "keypoint"  # keypoint | trajectory
    judge_threshold: float = 0.3  # paper 0.3, official code 0.5
    dedup_threshold: float = 0.85  # paper 0.85, official code 0.5
    reflection: ReflectionCfg = field(default_factory=ReflectionCfg)
    deletion: DeletionCfg = field(default_factory=DeletionCfg)

    def check(self) -> None:
        check_choices("memory", self, {
            "retrieval_key": {"usage_scenario", "task_query", "generalized_query", "keywords"},
            "addition": {"selective", "full"},
            "granularity": {"keypoint", "trajectory"},
            "deletion.rule": {"le", "lt"},
        }, {"top_k": 0, "reflection.max_retries": 0, "deletion.alpha": 1})
