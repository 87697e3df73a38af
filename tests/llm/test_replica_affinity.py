"""Episode affinity: every call of one episode (its steps, trials and summarizer calls) goes
to one replica while that replica answers, so its prefix cache serves the next step. Two
scripted servers (TEST DOUBLES) count the requests of each episode."""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict

import pytest

from reme_cli.llm.client import ChatClient, episode_affinity
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import FixedPolicy, ScriptedServer
from tests.conftest import REPO, reme_process

EPISODE = "x-episode"


def by_episode(*servers: ScriptedServer) -> dict[str, set[int]]:
    """episode -> indices of the servers that saw its requests."""
    seen: dict[str, set[int]] = defaultdict(set)
    for i, srv in enumerate(servers):
        for req in srv.requests:
            if req["path"].endswith("/chat/completions"):
                seen[req["headers"].get(EPISODE, "")].add(i)
    return seen


async def episode(client: ChatClient, name: str, steps: int, pinned: bool = True) -> None:
    async def call() -> None:
        await client.chat([{"role": "user", "content": name}], headers={EPISODE: name})

    with episode_affinity(name) if pinned else _nothing():
        for _ in range(steps):
            await call()
            await asyncio.sleep(0.01)  # a tool runs: nothing of this episode is in flight
        await asyncio.gather(call(), call())  # summarizer calls spawned as tasks


class _nothing:
    def __enter__(self) -> None: ...
    def __exit__(self, *exc) -> None: ...


def test_each_episode_stays_on_one_replica_and_episodes_spread():
    with ScriptedServer(FixedPolicy(), delay=0.02) as a, ScriptedServer(FixedPolicy(), delay=0.02) as b:
        async def main(pinned: bool) -> list:
            client = ChatClient([a.base_url, b.base_url], "m", concurrency=16)
            try:
                await asyncio.gather(*(episode(client, f"{pinned}-{i}", 6, pinned) for i in range(8)))
                return [r.episodes for r in client.replicas]
            finally:
                await client.close()

        assert asyncio.run(main(True)) == [0, 0]  # every pin released when its episode ended
        pinned = {k: v for k, v in by_episode(a, b).items() if k.startswith("True")}
        asyncio.run(main(False))
        loose = {k: v for k, v in by_episode(a, b).items() if k.startswith("False")}
    assert len(pinned) == 8 and all(len(servers) == 1 for servers in pinned.values())
    # fewest open episodes first: 4 on each
    assert sorted(sum(servers == {i} for servers in pinned.values()) for i in (0, 1)) == [4, 4]
    # without affinity, least-outstanding routing scatters an episode's steps (what this fixes)
    assert any(len(servers) == 2 for servers in loose.values())


def test_an_episode_moves_only_when_its_replica_fails():
    with ScriptedServer(FixedPolicy()) as a, ScriptedServer(FixedPolicy()) as b:
        async def main() -> None:
            client = ChatClient([a.base_url, b.base_url], "m", max_retries=2)
            try:
                with episode_affinity("u"):
                    for step in range(6):
                        if step == 3:
                            first = next(s for s in (a, b) if s.requests)
                            first._httpd.refuse_chat = True  # its replica hangs up from now on
                        await client.chat([{"role": "user", "content": "x"}], headers={EPISODE: "u"})
            finally:
                await client.close()

        asyncio.run(main())
        answered = [sum(1 for r in s.requests if r["path"].endswith("/chat/completions")) for s in (a, b)]
    # 3 steps on the first replica (its refusal is not counted), then the other took the rest
    assert sorted(answered) == [3, 3]


@pytest.mark.slow
def test_a_run_keeps_each_episode_on_one_replica(tmp_path):
    with ScriptedServer(BFCLReplayPolicy(), delay=0.02) as a, ScriptedServer(BFCLReplayPolicy(), delay=0.02) as b:
        env = {**os.environ, "REME_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
        proc = reme_process(
            ["eval", "model=qwen3-8b", "embedding=minilm", "llm.model=replay",
             "llm.cache=false", f"llm.base_url=[{a.base_url},{b.base_url}]", "llm.concurrency=8",
             "benchmark.release=current", "benchmark.limit=6", "eval.runs=1", "eval.seeds=1", "out_dir=run"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        seen: dict[str, set[int]] = defaultdict(set)
        steps: dict[str, int] = defaultdict(int)
        for i, srv in enumerate((a, b)):
            for req in srv.requests:
                if req["path"].endswith("/chat/completions"):
                    seen[req["headers"]["x-reme-episode"]].add(i)
                    steps[req["headers"]["x-reme-episode"]] += 1
    recs = [json.loads(line) for line in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and len(seen) == 6
    assert sum(steps.values()) > 6  # multi-step episodes: there was something to scatter
    assert all(len(servers) == 1 for servers in seen.values())
    assert {next(iter(s)) for s in seen.values()} == {0, 1}  # both replicas served episodes
