"""The LLM a benchmark's simulated user speaks with (``Benchmark.user_model``), served as the
summarizer is (``methods/summarizer.py``): by the executor's server (``name: same``, or no
``base_url``), or by an endpoint of its own with the run's limits, pacer and spend meter and
a response cache of its own. Each episode gets a handle bound to it (``for_episode``)."""

from __future__ import annotations

from dataclasses import dataclass

from reme_cli.bench.base import Benchmark
from reme_cli.bench.users import UserModelCfg
from reme_cli.core.config import Config
from reme_cli.llm.client import LLM, ChatClient, check_server
from reme_cli.llm.endpoint import WithDefaults, side_client
from reme_cli.llm.keys import llm_key


@dataclass(frozen=True)
class UserModel:
    """A run's simulated-user LLM and its settings."""

    llm: LLM
    settings: UserModelCfg

    def for_episode(self, seed: int | None, headers: dict[str, str]) -> LLM:
        """The user's LLM in one episode: its settings' sampling, the episode's seed (each
        trial its own sample, a rerun the same one from the cache) and the episode's headers
        (the scripted server's task) go with every call; a call may set its own."""
        s = self.settings
        return WithDefaults(self.llm, None, {"temperature": s.temperature, "max_tokens": s.max_tokens, "top_p": None,
                                             "seed": seed, "headers": headers})


def serve_user_model(cfg: Config, bench: Benchmark, executor: ChatClient) -> tuple[UserModel | None, ChatClient | None]:
    """The benchmark's user LLM (None when it asks for none), and a client of its own to close
    (None when it shares the executor's)."""
    settings = bench.user_model()
    if settings is None:
        return None, None
    if settings.name == "same" or not settings.base_url:
        return UserModel(executor, settings), None
    model = settings.model or next(iter(check_server(settings.base_url, llm_key(cfg))), settings.name)
    own = side_client(cfg, executor, settings.base_url, model, f"user-{settings.name}")
    return UserModel(own, settings), own
