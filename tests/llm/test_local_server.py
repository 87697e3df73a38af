"""The embedded CPU model server, for real: the installed llama.cpp engine (xllamacpp, or
llama-cpp-python built from source) + the SmolLM2-135M GGUF."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from reme_cli.core.errors import UserError
from reme_cli.llm.json_grammar import compact_json_request
from reme_cli.llm.local_engine import XLLAMACPP, choose
from reme_cli.llm.local_server import LocalServer, default_model_path

REPO = Path(__file__).resolve().parents[2]
ENUM_SCHEMA = {
    "type": "object",
    "properties": {
        "tool_calls": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": ["cd", "ls", "mkdir"]},
                           "arguments": {"type": "object"}},
            "required": ["name", "arguments"]}},
        "answer": {"type": "string"}},
    "required": ["tool_calls"],
}


ENGINE = choose()  # what LocalServer starts here


def server_processes(port: int) -> list[str]:
    """`ps` lines of the engine's server processes on this port (other runs may have their own)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True, check=False).stdout
    rows = [ln.split(None, 2) for ln in out.splitlines()[1:]]
    return [" ".join(r) for r in rows if len(r) == 3 and not r[1].startswith("Z")
            and ENGINE.module in r[2] and f"--port {port} " in r[2] + " "]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LocalServer(log_path=log) as s:
        yield s
    assert server_processes(s.port) == []


@pytest.mark.slow
def test_serves_the_model_alias_and_logs_to_file(server, capfd):
    with urllib.request.urlopen(server.base_url + "/models", timeout=5) as r:
        ids = [m["id"] for m in json.load(r)["data"]]
    assert ids == [server.model_name]
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
    assert server.running and len(server_processes(server.port)) == 1
    assert "llama" in server.log_path.read_text()
    out, err = capfd.readouterr()
    assert "llama" not in out + err  # the server's chatter stays in its log


@pytest.mark.slow
def test_constrained_tool_call_is_valid_json_obeying_the_enum(server):
    from openai import OpenAI

    client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=120)
    request = {"model": server.model_name, "temperature": 0.9, "seed": 1, "max_tokens": 256,
               "extra_body": {"top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1},  # model=local's sampling
               "messages": [{"role": "system", "content": "You operate a file system. Reply with JSON tool calls."},
                            {"role": "user", "content": "Go into the folder 'docs' and create a folder named 'old'."}],
               "response_format": {"type": "json_object", "schema": ENUM_SCHEMA}}
    # As reme sends it: to llama.cpp's C++ server (xllamacpp), the schema as a compact grammar.
    r = client.chat.completions.create(**(compact_json_request(request) if ENGINE is XLLAMACPP else request))
    assert r.choices[0].finish_reason == "stop"
    step = json.loads(r.choices[0].message.content)
    assert isinstance(step["tool_calls"], list)
    assert all(c["name"] in {"cd", "ls", "mkdir"} and isinstance(c["arguments"], dict) for c in step["tool_calls"])


@pytest.mark.slow
def test_a_request_without_a_seed_is_answered_alike_every_time(server):
    """The summarizer's requests send no seed (the authors' memory service sent none), and
    llama.cpp's server would sample each with a fresh random one: the embedded model's
    summarizer answered otherwise on every run. The server reme starts gives such a request one
    fixed seed."""
    body = {"model": server.model_name, "temperature": 0.8, "top_k": 40, "min_p": 0.05, "max_tokens": 48,
            "messages": [{"role": "user", "content": "Give three short tips for cooking pasta."}]}
    if ENGINE is XLLAMACPP:  # each evaluated whole: what one reused of the other's cache is not the question
        body["cache_prompt"] = False

    def ask() -> str:
        request = urllib.request.Request(server.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as r:
            return json.load(r)["choices"][0]["message"]["content"]

    answers = {ask() for _ in range(3)}
    assert len(answers) == 1 and len(next(iter(answers))) > 20, answers


@pytest.mark.slow
def test_assistant_content_null_is_an_error_on_llama_cpp_python_and_empty_content_works_on_both(server):
    """Why reme sends "" for an assistant message without text: llama-cpp-python refuses null
    (llama.cpp's C++ server takes it)."""
    from openai import BadRequestError, InternalServerError, OpenAI

    client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=60)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None},
                {"role": "user", "content": "ok"}]
    if ENGINE is XLLAMACPP:
        client.chat.completions.create(model=server.model_name, messages=messages, max_tokens=2)
    else:
        with pytest.raises((BadRequestError, InternalServerError)):
            client.chat.completions.create(model=server.model_name, messages=messages, max_tokens=2)
    messages[1]["content"] = ""
    client.chat.completions.create(model=server.model_name, messages=messages, max_tokens=2)


@pytest.mark.slow
def test_stop_leaves_no_process_and_is_idempotent(tmp_path):
    s = LocalServer(log_path=tmp_path / "log")
    with s:
        pid, port = s._proc.pid, s.port
        assert len(server_processes(port)) == 1
    assert not s.running and server_processes(port) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole process group is gone
    s.stop()
    s.stop()


@pytest.mark.slow
def test_a_port_taken_before_the_server_binds_it_is_retried(tmp_path, monkeypatch):
    import socket

    from reme_cli.llm import local_server

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = [taken.getsockname()[1]]
    real = local_server._free_port
    monkeypatch.setattr(local_server, "_free_port", lambda: ports.pop() if ports else real())
    try:
        with LocalServer(log_path=tmp_path / "log") as s:
            assert s.port != taken.getsockname()[1] and s.running
        assert "address already in use" in (tmp_path / "log").read_text()
    finally:
        taken.close()


def test_missing_model_file_is_a_one_line_user_error(tmp_path):
    with pytest.raises(UserError) as e:
        LocalServer(model_path=str(tmp_path / "nope.gguf")).start()
    assert "nope.gguf" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.slow
def test_broken_model_file_reports_the_server_log_in_one_line(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file" * 100)
    s = LocalServer(model_path=str(junk), log_path=tmp_path / "log", startup_timeout=60)
    with pytest.raises(UserError) as e:
        s.start()
    msg = str(e.value)
    assert "\n" not in msg and "exited" in msg and str(tmp_path / "log") in msg
    assert not s.running and server_processes(s.port) == []


@pytest.mark.slow
def test_missing_llama_cpp_server_says_how_to_install(tmp_path):
    # The source engine installed without the [server] extra: llama_cpp imports, llama_cpp.server does not.
    (tmp_path / "llama_cpp").mkdir()
    (tmp_path / "llama_cpp" / "__init__.py").write_text("")
    code = textwrap.dedent(f"""
        from reme_cli.core.errors import UserError
        from reme_cli.llm.local_server import LocalServer
        try:
            LocalServer(startup_timeout=30, log_path={str(tmp_path / "log")!r}).start()
        except UserError as e:
            print("USERERROR", e)
    """)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "REME_LLAMA_ENGINE": "source"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False).stdout
    assert "bash scripts/install.sh" in out and "llama_cpp.server" in out, out


def test_default_model_path_is_the_packaged_gguf():
    path = Path(default_model_path())
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


CHILD = textwrap.dedent("""
    import sys, time
    from reme_cli.llm.local_server import LocalServer
    # Ctrl-C reaches it as in a terminal: tests/conftest.py's pytest_configure.
    s = LocalServer()
    if sys.argv[1] == "atexit":
        s.start()
        print(s.port, flush=True)
        sys.stdin.readline()  # exit once the test has seen the server (it closes our stdin)
        sys.exit(0)
    with s:
        print(s.port, flush=True)
        time.sleep(120)
""")


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "atexit"])
@pytest.mark.slow
def test_parent_exit_stops_the_server(how):
    """Ctrl-C (KeyboardInterrupt through the `with`), SIGTERM, and a plain exit all stop it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", CHILD, how], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        port = int(parent.stdout.readline())
        assert len(server_processes(port)) == 1
        if how == "atexit":
            parent.stdin.close()
        else:
            parent.send_signal(getattr(signal, how))
        try:
            parent.wait(30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the parent had not exited 30 s after {how}")
    finally:
        parent.kill()
        parent.wait()
        parent.stdin.close()
    deadline = time.monotonic() + 5
    while server_processes(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server_processes(port) == []
