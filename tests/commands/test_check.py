"""`reme check` against the scripted server's DashScope mode (a TEST DOUBLE: it keeps the
provider's rules where reme relies on them and answers the probes as a model that does what
they ask would; its timings are no provider's). The check passes, a wrong key stops it in one
line, and a dry run after it plans with what it measured instead of the assumed rates.
The check against a real llama.cpp server speaking Qwen3's wire format: tests/llm/test_qwen3_server.py."""

from __future__ import annotations

import json
import re

import pytest

from reme_cli.run import calibration, cost
from reme_cli.core.config import compose
from reme_cli.testing.scripted_server import CheckPolicy, Provider, ScriptedServer

KEY = "sk-test-check-4848"
# benchmark.release=current: the check stays in the test process (the paper release would re-execute it).
HOSTED = ["model=qwen3-8b-dashscope", "embedding=minilm", "llm.model=qwen3-8b", "benchmark.release=current"]


@pytest.fixture
def provider():
    limits = {"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "599"}
    with ScriptedServer(CheckPolicy(), provider=Provider(api_key=KEY, fingerprint="fp-check", headers=limits)) as srv:
        yield srv


def _chats(server: ScriptedServer) -> list[dict]:
    return [r for r in server.requests if r["path"] == "/v1/chat/completions"]


def _plain(text: str) -> str:
    return re.sub(r"[\s│┃]+", " ", text)


@pytest.mark.slow  # the CLI composes BFCL's benchmark: a platform probe starts `uname`
def test_check_passes_against_the_provider_with_the_runs_own_requests(reme, provider):
    proc = reme("check", *HOSTED, f"llm.base_url={provider.base_url}", env={"DASHSCOPE_API_KEY": KEY,
                                                                           "COLUMNS": "220"})
    assert proc.returncode == 0, proc.stderr
    err = _plain(proc.stderr)
    for probe in ("plain answer", "thinking", "one tool call", "parallel tool calls", "same seed twice"):
        assert probe in err
    assert "FAIL" not in err and "check passed: calibrated on" in err
    chats = _chats(provider)
    assert 5 <= len(chats) <= 12
    # Each probe is what the run sends: streamed, seed 0, the thinking switch at the top level,
    # parallel calls with the tools, the key as the bearer token.
    for req in chats:
        body = req["body"]
        assert body["stream"] is True and body["seed"] == 0 and body["enable_thinking"] is True
        assert body["temperature"] == 0.9 and "top_p" not in body
        assert req["headers"]["authorization"] == f"Bearer {KEY}"
        assert body.get("parallel_tool_calls") is (True if body.get("tools") else None)
    # Kept beside reme's other state, with its date, host and model, and no key.
    kept = reme.cwd / proc.stdout.strip().splitlines()[-1]
    data = json.loads(kept.read_text())
    host = provider.base_url.split("/")[2]
    assert (data["model"], data["host"], data["model_config"]) == ("qwen3-8b", host, "qwen3-8b-dashscope")
    assert data["measured_at"][:4].isdigit() and data["seconds_per_answer"] > 0
    assert data["seeded_identical"] is True and data["time_to_first_token_s"] is not None
    assert data["rate_limit_headers"] == {"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "599"}
    assert "rate limits: x-ratelimit-limit-requests=600, x-ratelimit-remaining-requests=599" in err
    assert KEY not in kept.read_text()
    assert kept == reme.cwd / ".reme_cache" / "calibration" / f"qwen3-8b-dashscope@{host.replace(':', '_')}.json"


@pytest.mark.slow  # the CLI composes BFCL's benchmark: a platform probe starts `uname`
def test_a_wrong_key_stops_the_check_at_the_first_request_in_one_line(reme, provider):
    proc = reme("check", *HOSTED, f"llm.base_url={provider.base_url}", env={"DASHSCOPE_API_KEY": "sk-wrong"})
    assert proc.returncode == 4
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "refused the API key" in proc.stderr and "Invalid API-key provided" in proc.stderr
    assert len(_chats(provider)) == 1  # nothing asked after the refusal
    assert not (reme.cwd / ".reme_cache" / "calibration").exists()


@pytest.mark.slow  # the CLI composes BFCL's benchmark: a platform probe starts `uname`
def test_a_probe_the_provider_refuses_fails_the_check_with_its_words_and_nothing_is_kept(reme, provider):
    # Thinking without a stream: the provider's 400, in its own words, on the first probe.
    proc = reme("check", *HOSTED, f"llm.base_url={provider.base_url}", "llm.stream=never",
                env={"DASHSCOPE_API_KEY": KEY, "COLUMNS": "250"})
    assert proc.returncode == 4
    err = _plain(proc.stderr)
    assert "FAIL" in err and "enable_thinking must be set to false for non-streaming calls" in err
    assert "check failed: plain answer" in err and proc.stdout.strip() == ""
    assert not (reme.cwd / ".reme_cache" / "calibration").exists()


@pytest.mark.slow  # the CLI composes BFCL's benchmark: a platform probe starts `uname`
def test_appworld_with_a_memory_checks_the_code_action_the_summarizer_and_the_embedding_batch(reme, provider):
    proc = reme("check", "--mode", "fixed", "memory=reme", "benchmark=appworld", "model=qwen3-8b-dashscope",
                "embedding=text-embedding-v4", f"llm.base_url={provider.base_url}",
                f"embedding.base_url={provider.base_url}", env={"DASHSCOPE_API_KEY": KEY, "COLUMNS": "220"})
    assert proc.returncode == 0, proc.stderr
    err = _plain(proc.stderr)
    for probe in ("code action", "summarizer", "embedding", "10 vectors of 1024 numbers"):
        assert probe in err
    assert "one tool call" not in err and "thinking" not in err  # AppWorld: code actions, thinking off
    embeds = [r["body"] for r in provider.requests if r["path"] == "/v1/embeddings"]
    assert [(len(b["input"]), b["dimensions"]) for b in embeds] == [(10, 1024)]  # DashScope's batch of 10
    code = next(r["body"] for r in _chats(provider) if "```python" in r["body"]["messages"][-1]["content"])
    assert code["enable_thinking"] is False and "tools" not in code


@pytest.mark.slow  # the CLI composes BFCL's benchmark: a platform probe starts `uname`
def test_a_dry_run_after_the_check_plans_with_what_it_measured(reme, provider):
    base = f"llm.base_url={provider.base_url}"
    before = _plain(reme("ablate", "table1", *HOSTED, base, "--dry-run", check=True,
                         env={"COLUMNS": "250"}).stderr)
    assert "20 s an answer (assumed)" in before
    reme("check", *HOSTED, base, check=True, env={"DASHSCOPE_API_KEY": KEY})
    after = _plain(reme("ablate", "table1", *HOSTED, base, "--dry-run", check=True, env={"COLUMNS": "250"}).stderr)
    m = re.search(r"([\d.]+) s an answer \(calibrated on (\d{4}-\d\d-\d\d) against ([\w.:]+)\)", after)
    assert m, after
    host = provider.base_url.split("/")[2]
    assert m.group(3) == host and float(m.group(1)) < 20
    wall = re.compile(r"([\d.,]+) h wall")
    assert float(wall.search(after).group(1).replace(",", "")) < float(wall.search(before).group(1).replace(",", ""))
    # cost.hosted_call_s given wins over the measurement; another host has none.
    given = _plain(reme("ablate", "table1", *HOSTED, base, "cost.hosted_call_s=7", "--dry-run", check=True,
                        env={"COLUMNS": "250"}).stderr)
    assert "7 s an answer (cost.hosted_call_s as given)" in given
    other = _plain(reme("ablate", "table1", *HOSTED, "--dry-run", check=True, env={"COLUMNS": "250"}).stderr)
    assert "20 s an answer (assumed)" in other


def test_a_kept_measurement_gives_a_served_model_its_rates(tmp_path):
    """A served (vLLM) model plans with the kept points the way a calibration file's are read;
    cost.calibration=FILE names another file, and a damaged one is one line."""
    cfg = compose(["model=qwen3-8b", "embedding=minilm", "llm.base_url=http://gpu-node:8000/v1",
                   f"llm.cache_dir={tmp_path}/llm"])
    a, _ = cost.split_overrides([])
    assert cost.basis(cfg, a).source.startswith("assumed H200 rates")
    points = [{"concurrency": 1, "prompt_tokens_per_s": 2000.0, "generated_tokens_per_s": 50.0},
              {"concurrency": 8, "prompt_tokens_per_s": 8000.0, "generated_tokens_per_s": 300.0}]
    kept = calibration.Calibration.measured("Qwen/Qwen3-8B", "http://gpu-node:8000/v1", points, "reme check",
                                            host="gpu-node:8000", seconds_per_answer=4.0)
    path = kept.write(calibration.default_path(cfg))
    assert path == tmp_path / "calibration" / "qwen3-8b@gpu-node_8000.json"
    b = cost.basis(cfg, a)
    assert b.source.startswith(f"calibrated on {kept.date} against gpu-node:8000")
    assert (b.rates.generated, b.rates.prompt) == ({1: 50.0, 8: 300.0}, {1: 2000.0, 8: 8000.0})
    bad = tmp_path / "bad.json"
    bad.write_text('{"points": [{"concurrency": 1}]}')
    with pytest.raises(Exception, match="cost.calibration=.*bad.json: not a calibration"):
        cost.split_overrides([f"cost.calibration={bad}"])


@pytest.mark.slow  # the embedded model's server
def test_check_starts_the_embedded_model_as_eval_would_and_stops_it(reme):
    """No server given: the check starts the embedded llama.cpp model (model=local), tries it
    with the run's JSON-protocol requests, keeps a one-request-at-a-time throughput sweep, and
    leaves no server behind."""
    from reme_cli.llm.local_engine import choose
    from tests.conftest import processes

    proc = reme("check", "benchmark.release=current", env={"COLUMNS": "220"})
    assert proc.returncode == 0, proc.stderr
    err = _plain(proc.stderr)
    assert "context limit: 8192 tokens (the server reme started)" in err
    kept = json.loads((reme.cwd / proc.stdout.strip().splitlines()[-1]).read_text())
    assert kept["model"] == "smollm2-135m-instruct" and kept["host"].startswith("embedded@")
    (point,) = kept["points"]
    assert point["concurrency"] == 1 and point["generated_tokens_per_s"] > 0 and point["prompt_tokens_per_s"] > 0
    assert processes(choose().module, f"REME_CACHE_DIR={reme.cwd / '.reme_cache'}") == []


@pytest.mark.slow  # the CLI composes BFCL's benchmark: a platform probe starts `uname`
def test_a_server_that_does_not_answer_fails_the_check_with_exit_4_not_as_bad_input(reme):
    """`reme eval` refuses an unreachable llm.base_url as bad input (exit 2: fix the URL); for the
    check it is what it exists to find, a failed probe (exit 4), said in its table."""
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = reme("check", "model=qwen3-8b", "embedding=minilm", "benchmark.release=current",
                f"llm.base_url=http://127.0.0.1:{port}/v1", env={"COLUMNS": "250"})
    assert proc.returncode == 4, proc.stderr
    err = _plain(proc.stderr)
    assert "FAIL" in err and f"cannot reach the LLM server at http://127.0.0.1:{port}/v1" in err
    assert "check failed: the server does not answer" in err and proc.stdout.strip() == ""
    assert not (reme.cwd / ".reme_cache" / "calibration").exists()
