"""`memory=reme`: the method's settings.

The defaults are what the authors ran for the paper's tables (their reproduction FAQ, then
their code of the experiments' period; results/authors_setup_evidence.md gives every
source); ``experiment=paper_text`` sets the values the paper's text gives where they differ
(docs/fidelity.md, the ledger)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from reme_cli.core.config import check_choices
from reme_cli.core.plugin import Section

# Deletion passes per trials of one worker in the authors' agents (65971baf):
# bfcl_agent.py asks after every 5th trial (run_bfcl.py delete_freq=5); the AppWorld agent
# after every trial (its counter test is commented out).
AUTHORS_DELETE_EVERY = {"bfcl_v3": 5, "appworld": 1}


@dataclass
class ReflectionCfg:
    enabled: bool = True
    # Trials after a failed one: 2 = the FAQ's num_trials=3 (paper text: "up to 3" retries).
    max_retries: int = 2
    # summary: the failed trial is summarized (failure analysis, judged, de-duplicated) and
    #   those memories guide the next trial instead of a retrieval; nothing is kept unless a
    #   trial succeeds (the authors' agents).
    # lesson: a reflection call writes a lesson that is appended to the guidance; the last
    #   one is kept as an experience when a retry succeeds (the paper's text).
    style: str = "summary"  # summary | lesson
    judge: bool = True  # (lesson) the LLM judge validates a kept lesson like any other experience


@dataclass
class DeletionCfg:
    enabled: bool = True
    alpha: int = 5
    beta: float = 0.5
    rule: str = "lt"  # lt: u/f < beta (authors' code) | le: u/f <= beta (paper text)
    # A deletion pass runs every `every` counted things; None: the authors' number for the
    # benchmark (AUTHORS_DELETE_EVERY; 1 elsewhere), settled when the config is validated.
    every: Optional[int] = None
    # trials: trials run by the same worker (authors' per-worker counter) | tasks: tasks
    # committed to the stream (paper text: "after each task")
    counts: str = "trials"


@dataclass
class ReMeConfig(Section):
    name: str = "reme"
    pool: Optional[str] = None
    # A pool embedded with another model is refused; true: re-embed a copy for this run.
    reembed: bool = False
    top_k: int = 5
    retrieval_key: str = "usage_scenario"  # usage_scenario | task_query | generalized_query | keywords
    rerank: bool = False  # LLM rerank of the top K (FAQ scripts off; paper text and v0.1.9 service on)
    rewrite: bool = False  # LLM rewrite into task-specific guidance (same sources)
    # Whose summarizer distils and validates experiences (pool building and dynamic trials):
    # authors: the authors' memory service (v0.1.9) with its prompts, fed and read as it was
    #   (reme_cli/methods/reme/authors_flow.py);
    # reme: reme's own prompts, written from the paper's text (distill.py, prompts/*.md).
    prompts: str = "authors"  # authors | reme
    addition: str = "selective"  # selective | full
    granularity: str = "keypoint"  # keypoint | trajectory
    judge_threshold: float = 0.5  # validation score kept (authors 0.5, paper text 0.3)
    # Cosine above which a new experience is a duplicate of one in the pool (authors, #213): a
    # dynamic trial's summary is de-duplicated against the pool (the FAQ's service ends
    # summary_task_memory with MemoryDeduplication); building and commits only with the switches below.
    dedup_threshold: float = 0.5
    # build-pool de-duplicates the candidates against the growing pool: off, as v0.1.9's
    # summary_task_memory of the released pools' period had no such step (default.yaml:25-32).
    build_dedup: bool = False
    # A dynamic commit de-duplicates a trial's memories again, against the pool as it is then:
    # off, as the FAQ's add_task_memory (MemoryAddition) inserts what the agent posts.
    dedup_at_commit: bool = False
    # What near-duplicate detection compares:
    # key_content_vs_key: a new experience's retrieval key + content against the pool's
    #   retrieval vectors and the batch's key + content (the authors' memory_deduplication_op);
    # key_content: key + content on both sides; key: the retrieval vectors on both sides.
    dedup_text: str = "key_content_vs_key"
    # Who earns u among the experiences a trial retrieved: that trial's own outcome (authors:
    # every trial that retrieved is credited) or the task's final outcome (paper text).
    u_credit: str = "trial"  # trial | final
    reflection: ReflectionCfg = field(default_factory=ReflectionCfg)
    deletion: DeletionCfg = field(default_factory=DeletionCfg)

    def check(self) -> None:
        check_choices("memory", self, {
            "retrieval_key": {"usage_scenario", "task_query", "generalized_query", "keywords"},
            "prompts": {"authors", "reme"},
            "addition": {"selective", "full"},
            "granularity": {"keypoint", "trajectory"},
            "deletion.rule": {"le", "lt"},
            "deletion.counts": {"trials", "tasks"},
            "dedup_text": {"key_content_vs_key", "key_content", "key"},
            "u_credit": {"trial", "final"},
            "reflection.style": {"summary", "lesson"},
        }, {"top_k": 0, "reflection.max_retries": 0, "deletion.alpha": 1, "deletion.every": 1,
            "judge_threshold": 0, "dedup_threshold": 0, "deletion.beta": 0},
           {"judge_threshold": 1, "dedup_threshold": 1})

    def settle(self, cfg: Any) -> None:
        """Benchmark-dependent defaults: the deletion period the authors used on it."""
        if self.deletion.every is None:
            self.deletion.every = AUTHORS_DELETE_EVERY.get(cfg.benchmark.name, 1)
