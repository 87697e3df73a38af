"""What a benchmark tells the agent reaches it through the benchmark object: its own system
prompt (AppWorld) and how its tool schemas are written (BFCL); the protocols know neither."""

from reme_cli.agent.protocols import make_protocol
from reme_cli.bench.appworld.benchmark import AppWorldBenchmark
from reme_cli.bench.base import PLAIN_TOOLS, Benchmark
from reme_cli.bench.bfcl.benchmark import TOOL_DIALECT, BFCLBenchmark
from reme_cli.run.settings import episode_settings
from reme_cli.core.config import compose

# A BFCL-style tool: bfcl's type names in a nested schema, the class blurb before the marker.
TOOL = {"type": "function", "function": {
    "name": "touch",
    "description": "This tool belongs to the file system. Tool description: Create a file. Then more.",
    "parameters": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string", "description": "the file"},
        "meta": {"type": "object", "properties": {"size": {"type": "float"}, "extra": {"type": "dict"},
                                                  "anything": {"type": "any"}}},
    }}}}


class Plain(Benchmark):
    """A benchmark that declares neither a prompt nor a dialect: the seam's defaults."""

    max_steps_per_turn = None


def test_appworld_brings_its_own_prompt_and_the_config_still_wins():
    appworld = compose(["benchmark=appworld"])
    # The authors' agent (the default): each task brings its system message (Task.meta), the
    # benchmark none; benchmark.agent=compact sets reme's (tests/bench/appworld/test_appworld_agent.py).
    assert episode_settings(appworld, AppWorldBenchmark).system_prompt is None
    own = compose(["benchmark=appworld", "benchmark.system_prompt=Be brief."])
    assert episode_settings(own, AppWorldBenchmark).system_prompt == "Be brief."
    assert episode_settings(compose([]), Plain()).system_prompt is None
    # The code protocol adds nothing of its own: the prompt is the benchmark's.
    assert make_protocol("code").system_prompt(None, []) is None


def test_the_json_protocol_reads_schemas_in_the_benchmarks_dialect():
    bfcl = episode_settings(compose(["benchmark=bfcl_v3"]), BFCLBenchmark).protocol
    assert bfcl.name == "json" and bfcl.dialect is TOOL_DIALECT
    meta = bfcl.request_kwargs([TOOL])["response_format"]["schema"]["properties"]["tool_calls"]["items"]["anyOf"][0]
    props = meta["properties"]["arguments"]["properties"]["meta"]["properties"]
    assert props == {"size": {"type": "number"}, "extra": {"type": "object", "additionalProperties": False},
                     "anything": {}}
    assert "- touch(name: string, meta?: object): Create a file" in bfcl.system_prompt(None, [TOOL])

    plain = episode_settings(compose([]), Plain()).protocol
    assert plain.dialect is PLAIN_TOOLS
    meta = plain.request_kwargs([TOOL])["response_format"]["schema"]["properties"]["tool_calls"]["items"]["anyOf"][0]
    assert meta["properties"]["arguments"]["properties"]["meta"]["properties"]["size"] == {"type": "float"}
    assert "- touch(name: string, meta?: object): This tool belongs to the file system" in plain.system_prompt(None, [TOOL])
