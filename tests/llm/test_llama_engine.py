"""The embedded model's two llama.cpp engines (reme_cli/llm/local_engine.py): which one reme
starts and how; xllamacpp's launcher for real (it starts, serves, stops on SIGTERM, and fails
in one line); and the compact JSON grammar reme sends llama.cpp's C++ server instead of a
response_format schema, checked on the real server with every schema reme sends."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from reme_cli.core.config import compose, config_hash
from reme_cli.core.errors import UserError
from reme_cli.llm import local_engine
from reme_cli.llm.endpoint import is_llama_cpp_server, request_extra_body
from reme_cli.llm.json_grammar import closed, compact_json_request, grammar
from reme_cli.llm.local_engine import LLAMA_CPP_PYTHON, XLLAMACPP, choose
from reme_cli.llm.local_server import LocalServer, default_model_path
from tests.conftest import REPO, processes

needs_xllamacpp = pytest.mark.skipif(not XLLAMACPP.installed(), reason="the xllamacpp engine is not installed "
                                     "here (the venv has the source build); its launcher cannot run")


# ------------------------------------------------------------------ which engine, which command
@pytest.mark.parametrize("wanted, wheel_installed, engine", [
    (None, True, XLLAMACPP), (None, False, LLAMA_CPP_PYTHON), ("auto", True, XLLAMACPP),
    ("source", True, LLAMA_CPP_PYTHON), ("xllamacpp", False, XLLAMACPP), ("", True, XLLAMACPP)])
def test_the_engine_is_xllamacpp_where_installed_unless_REME_LLAMA_ENGINE_says(monkeypatch, wanted, wheel_installed,
                                                                                engine):
    if wanted is None:
        monkeypatch.delenv("REME_LLAMA_ENGINE", raising=False)
    else:
        monkeypatch.setenv("REME_LLAMA_ENGINE", wanted)
    monkeypatch.setattr(local_engine.importlib.util, "find_spec",
                        lambda name: object() if name == "xllamacpp" and wheel_installed else None)
    assert choose() == engine


def test_an_unknown_engine_is_one_line(monkeypatch):
    monkeypatch.setenv("REME_LLAMA_ENGINE", "llamafile")
    with pytest.raises(UserError, match=r"^REME_LLAMA_ENGINE='llamafile' is not an engine; use auto, xllamacpp or "
                                        r"source$"):
        choose()


def test_a_missing_engine_is_one_line_naming_it_and_the_install(monkeypatch, tmp_path):
    monkeypatch.setenv("REME_LLAMA_ENGINE", "xllamacpp")
    monkeypatch.setattr(local_engine.Engine, "installed", lambda self: False)
    with pytest.raises(UserError) as e:
        LocalServer(log_path=tmp_path / "log").start()
    assert "xllamacpp is not installed" in str(e.value) and "bash scripts/install.sh" in str(e.value)
    assert "\n" not in str(e.value) and not (tmp_path / "log").exists()


@pytest.mark.parametrize("engine", [XLLAMACPP, LLAMA_CPP_PYTHON])
def test_both_engines_start_with_reme_s_argument_names(monkeypatch, engine):
    monkeypatch.setenv("REME_LLAMA_ENGINE", "xllamacpp" if engine is XLLAMACPP else "source")
    argv = LocalServer(n_ctx=512, n_threads=1).command("/m.gguf", 8123)
    assert argv[:3] == [sys.executable, "-m", engine.module]
    assert argv[3:17] == ["--model", "/m.gguf", "--model_alias", "smollm2-135m-instruct", "--host", "127.0.0.1",
                          "--port", "8123", "--n_ctx", "512", "--n_threads", "1", "--n_threads_batch", "1"]
    assert argv[17:] == (["--logits_all", "false", "--cache", "true"] if engine is LLAMA_CPP_PYTHON else [])

    from reme_cli.llm.vllm_server import serve_command

    printed = serve_command(compose(["model=local"]), 9000, "0.0.0.0")  # what `reme serve model=local` runs
    assert printed[1:3] == ["-m", engine.module] and printed[printed.index("--host") + 1] == "0.0.0.0"


# ------------------------------------------------------------------ the request dialect
def test_objects_with_properties_are_closed_as_llama_cpp_python_reads_them():
    schema = {"type": "object", "properties": {
        "properties": {"type": "object", "properties": {"a": {"type": "string"}}},  # a key named so
        "type": {"type": "string"},
        "free": {"type": "object"},
        "open": {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": True},
        "list": {"type": "array", "items": {"anyOf": [{"type": "object", "properties": {"c": {"const": 1}}},
                                                      {"$ref": "#/$defs/d"}]}}},
        "$defs": {"d": {"properties": {"e": {"type": "number"}}}}}
    out = closed(schema)
    assert out["additionalProperties"] is False
    props = out["properties"]
    assert set(props) == {"properties", "type", "free", "open", "list"}  # property names untouched
    assert props["properties"]["additionalProperties"] is False and "additionalProperties" not in props["type"]
    assert props["free"] == {"type": "object"}  # a free object stays free
    assert props["open"]["additionalProperties"] is True
    assert props["list"]["items"]["anyOf"][0]["additionalProperties"] is False
    assert out["$defs"]["d"]["additionalProperties"] is False
    assert "additionalProperties" not in schema  # the caller's schema is not changed


def test_a_schema_request_becomes_a_compact_grammar_and_every_other_request_stays():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    base = {"model": "m", "messages": [], "temperature": 0.5, "extra_body": {"repeat_penalty": 1.1}}
    for fmt in ({"type": "json_object", "schema": schema},
                {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}):
        out = compact_json_request({**base, "response_format": fmt})
        assert "response_format" not in out and out["temperature"] == 0.5
        assert out["extra_body"] == {"repeat_penalty": 1.1, "grammar": grammar(schema)}
    text = grammar(schema)
    assert text.startswith("%llguidance {}\nstart: %json {")
    sent = json.loads(text.split("%json ", 1)[1])
    assert sent["x-guidance"] == {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
    assert sent["additionalProperties"] is False
    free = {**base, "response_format": {"type": "json_object"}}
    own = {**base, "response_format": {"type": "json_object", "schema": schema},
           "extra_body": {"grammar": 'root ::= "x"'}}
    for request in (base, free, own):
        assert compact_json_request(request) == request


def test_the_dialect_follows_the_server_and_the_penalty_its_name():
    assert is_llama_cpp_server([{"id": "smollm2-135m-instruct", "owned_by": "llamacpp", "aliases": []}])
    assert not is_llama_cpp_server([{"id": "smollm2-135m-instruct", "owned_by": "me", "permissions": []}])
    assert not is_llama_cpp_server([{"id": "Qwen/Qwen3-8B", "owned_by": "vllm", "max_model_len": 32768}])
    assert request_extra_body(compose(["model=local"])) == {"repeat_penalty": 1.1}
    qwen = compose(["model=qwen3-8b"])
    assert "repeat_penalty" not in request_extra_body(qwen) and "repetition_penalty" not in request_extra_body(qwen)
    assert request_extra_body(compose(["model=qwen3-8b", "model.sampling.repeat_penalty=1.05"]))[
        "repetition_penalty"] == 1.05  # vLLM's name
    # Unset, the key is out of the run hash: runs made before it existed still resume.
    assert config_hash(compose(["model=qwen3-8b", "model.sampling.repeat_penalty=null"])) == config_hash(qwen)
    assert config_hash(compose(["model=qwen3-8b", "model.sampling.repeat_penalty=1.0"])) != config_hash(qwen)
    with pytest.raises(UserError, match="must be >= 0"):
        compose(["model=local", "model.sampling.repeat_penalty=-1"])


# ------------------------------------------------------------------ the launcher, for real
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(port: int, model: str, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "reme_cli.llm.xllama_server", "--model", model, "--port", str(port),
                             "--model_alias", "smol", "--n_ctx", "512"], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)


@needs_xllamacpp
@pytest.mark.slow
def test_the_launcher_serves_the_model_and_exits_cleanly_on_sigterm(tmp_path):
    port = _free_port()
    with open(tmp_path / "log", "wb") as log:
        proc = _launch(port, default_model_path(), log)
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, (tmp_path / "log").read_text()[-2000:]
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                        models = json.load(r)
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the launcher did not answer within 60 s"
                    time.sleep(0.2)
            assert [m["id"] for m in models["data"]] == ["smol"] and is_llama_cpp_server(models["data"])
            body = {"model": "smol", "temperature": 0, "seed": 0, "max_tokens": 16,
                    "messages": [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]}
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as r:
                answer = json.load(r)["choices"][0]["message"]["content"]
            assert "Paris" in answer
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(15) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert processes("reme_cli.llm.xllama_server", f"--port {port} ") == []
    assert f"serving {default_model_path()}" in (tmp_path / "log").read_text()


@needs_xllamacpp
@pytest.mark.parametrize("case", ["port taken", "junk model"])
@pytest.mark.slow
def test_a_launcher_that_cannot_serve_ends_with_one_error_line(tmp_path, case):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    model = default_model_path()
    if case == "junk model":
        model = str(tmp_path / "junk.gguf")
        (tmp_path / "junk.gguf").write_bytes(b"not a gguf file" * 100)
    try:
        with open(tmp_path / "log", "wb") as log:
            port = taken.getsockname()[1] if case == "port taken" else _free_port()
            proc = _launch(port, model, log)
            assert proc.wait(60) == 1
    finally:
        taken.close()
    (line,) = [ln for ln in (tmp_path / "log").read_text().splitlines() if ln.startswith("error:")]
    assert line.startswith("error: llama.cpp server did not start")
    assert ("address already in use" in line) == (case == "port taken"), line


@pytest.mark.slow
def test_an_engine_that_does_not_load_says_why_in_one_line(tmp_path):
    """A wheel whose shared library is missing a system library (libgomp.so.1 on a bare image):
    the import fails inside the launcher, and LocalServer says so in one line."""
    fake = tmp_path / "xllamacpp"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('libgomp.so.1: cannot open shared object file: "
                                      "No such file or directory')\n")
    code = ("from reme_cli.core.errors import UserError\nfrom reme_cli.llm.local_server import LocalServer\n"
            f"try:\n    LocalServer(startup_timeout=30, log_path={str(tmp_path / 'log')!r}).start()\n"
            "except UserError as e:\n    print('USERERROR', e)\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "REME_LLAMA_ENGINE": "xllamacpp"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60).stdout
    assert out.startswith("USERERROR ") and out.count("\n") == 1, out
    assert "exited with exit code 1" in out and "libgomp.so.1" in out and "REME_LLAMA_ENGINE=source" in out


# ------------------------------------------------------------------ every schema reme sends
def _reme_schemas() -> dict[str, dict]:
    """The response_format schemas of reme's requests: the JSON tool protocol's step for each
    BFCL class's tools, ReMe's summarizer roles, and ACE's reflector and curator."""
    from reme_cli.agent.protocols import JSONProtocol
    from reme_cli.bench.bfcl.benchmark import MULTI_TURN_FUNC_DOC_FILE_MAPPING, TOOL_DIALECT, _tools_json
    from reme_cli.methods.reme.formats import CONSTRAINED_FORMATS
    from tests.methods.test_constrained_formats import _requests

    protocol = JSONProtocol(TOOL_DIALECT)
    schemas = {f"bfcl:{cls}": protocol.request_kwargs(json.loads(_tools_json((cls,))))["response_format"]["schema"]
               for cls in MULTI_TURN_FUNC_DOC_FILE_MAPPING}
    schemas |= {f"reme:{role}": fmt["schema"] for role, fmt in CONSTRAINED_FORMATS.items()}
    reflector, curator = [r["response_format"]["schema"] for r in _requests(constrained=True)
                          if "response_format" in r]
    return schemas | {"ace:reflector": reflector, "ace:curator": curator}


@needs_xllamacpp
@pytest.mark.slow
def test_llama_cpp_takes_every_schema_reme_sends_as_a_compact_grammar(embedded_server):
    """One short greedy answer per schema from the real server (xllamacpp): each grammar is
    accepted (an unsupported schema would be HTTP 400), and the answer is JSON on one line
    with ", " and ": " between tokens, not llama.cpp's pretty-printed form."""
    from openai import OpenAI

    assert embedded_server.engine is XLLAMACPP
    client = OpenAI(base_url=embedded_server.base_url, api_key="none", max_retries=0, timeout=300)
    schemas = _reme_schemas()
    assert len(schemas) >= 15
    for name, schema in schemas.items():
        request = compact_json_request({
            "model": embedded_server.model_name, "temperature": 0.0, "seed": 0, "max_tokens": 12,
            "messages": [{"role": "user", "content": "Answer in JSON."}],
            "response_format": {"type": "json_object", "schema": schema}, "extra_body": {"repeat_penalty": 1.1}})
        text = client.chat.completions.create(**request).choices[0].message.content
        assert re.match(r'\{"[^"\n]+": [^\s]', text) and "\n" not in text, (name, text)
