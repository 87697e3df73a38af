"""The toy plug-in (tests/plugins/reme_toy) contributes through the registry's optional
seams what no shared file of reme names: its saved state's description (`reme pool
stats|show`), its scripted summarizer answers (the TEST DOUBLE server finds them through the
``reme.scripted`` entry point) and a command of its own (``reme.commands``)."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request

import pytest
from rich.console import Console

from reme_cli.core.errors import UserError
from tests.conftest import REPO, scripted_popen
from tests.plugins.test_plugin_toy import reme, site, toy_server  # noqa: F401 - pytest fixtures

pytestmark = pytest.mark.slow  # starts a process (tests/tiers.py)


def test_pool_stats_and_show_read_a_toy_stream_through_its_describe(site, toy_server, tmp_path):  # noqa: F811
    proc = reme(site, tmp_path, "eval", "--mode", "dynamic", "benchmark=toy", "memory=toy", "model=qwen3-8b",
                f"llm.base_url={toy_server.base_url}", "llm.model=toy", "model.tool_protocol=toy",
                "eval.runs=1", "eval.seeds=1", "out_dir=run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    stream = tmp_path / "run" / "streams" / "s0_r0"
    last = json.loads((stream / "toy_memory.json").read_text())["last"]

    stats = reme(site, tmp_path, "pool", "stats", str(stream), "memory=toy")
    assert stats.returncode == 0, stats.stderr[-3000:]
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in stats.stderr.splitlines() if line.count("│") == 3}
    assert rows["items"] == "1" and rows["remembered"] == "yes" and rows["commits"] == "3"
    assert rows["committed units"] == "3" and rows["chars per item"] == f"min {len(last)}, mean {len(last)}, max {len(last)}"

    shown = reme(site, tmp_path, "pool", "show", str(stream), "memory=toy")
    assert shown.returncode == 0 and "1 of 1 items in toy pool" in shown.stderr and last in shown.stderr

    # Whose stream it is cannot be told from its commit log (every method reads one): asked.
    from reme_cli.commands.pool import show_stats

    with pytest.raises(UserError, match="dynamic stream's folder; say whose it is: memory=NAME"):
        show_stats(stream, [], Console(stderr=True))


def test_the_scripted_server_answers_the_toy_prompt_from_the_plugins_script(site):  # noqa: F811
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    server = scripted_popen(["--policy", "summarizer"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        base_url = server.stdout.readline().strip()

        def ask(user: str) -> dict:
            body = json.dumps({"model": "s", "messages": [{"role": "system", "content": "You summarize."},
                                                          {"role": "user", "content": user}]}).encode()
            request = urllib.request.Request(f"{base_url}/chat/completions", body,
                                             {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                return json.loads(exc.read())

        answer = ask("Summarize the toy counter episode: target 7")
        assert answer["choices"][0]["message"]["content"] == "Toy lesson: count to 7 one increment at a time."
        unknown = ask("Something no method's script knows")
        assert "does not know this prompt" in unknown["error"]["message"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_plugins_own_command_runs_with_the_clis_bad_input_handling(site, tmp_path):  # noqa: F811
    ok = reme(site, tmp_path, "toy-count", "4")
    assert ok.returncode == 0 and ok.stdout == "DONE at 4\n"
    bad = reme(site, tmp_path, "toy-count", "0")
    assert bad.returncode == 2 and bad.stderr.strip() == "error: toy-count 0: give a target of at least 1"
