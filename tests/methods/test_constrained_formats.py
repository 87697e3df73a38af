"""What ACE, DC and ReasoningBank send their summarizer: a free-text request (no JSON mode,
no grammar) to any server, as their authors' code does, and a schema or a grammar of the
method's own answer format only to a constrained llama.cpp summarizer (the embedded model).
The LLM here records the requests and answers nothing useful."""

import asyncio

from reme_cli.agent.trajectory import Step, Trajectory
from reme_cli.bench.base import Outcome, Task
from reme_cli.llm.client import ChatResult
from reme_cli.methods.ace import roles
from reme_cli.methods.ace.playbook import ALLOWED_SECTIONS
from reme_cli.methods.dc import curator
from reme_cli.methods.reasoningbank.induce import InduceStats, induce
from reme_cli.methods.reasoningbank.method import ReasoningBankConfig
from reme_cli.methods.summarizer import SummarizerSettings

TASK = Task("t1", [[{"role": "user", "content": "Move the report into the archive folder."}]],
            "Move the report into the archive folder.")
TRAJECTORY = Trajectory(turns=[[Step("Done.", [{"name": "mv", "arguments": "{}", "call": "mv(a='x')",
                                               "output": "ok"}], 1, 1, 0.0, False)]])


class Recorder:
    def __init__(self):
        self.requests: list[dict] = []

    async def chat(self, messages, **kwargs):
        self.requests.append(kwargs)
        return ChatResult("no answer", [], None, 1, 1, 0.0, False)


def _requests(constrained: bool) -> list[dict]:
    llm = Recorder()
    summ = SummarizerSettings(llm, "t", 0.6, None, constrained=constrained, llama_cpp=constrained)

    async def every_call() -> None:
        s = roles.Settings(summ, code_actions=False, max_chars=2000)
        stats = roles.AceStats()
        reflection = await roles.reflect(s, TASK, TRAJECTORY, Outcome(False, 0.0), "", set(), False, stats)
        await roles.curate(s, TASK, TRAJECTORY, "", reflection, stats)
        await curator.rewrite(summ, "(empty)", TASK.query, "Done.")
        await curator.synthesize(summ, "(empty)", "(empty)", TASK.query)
        await induce(summ, ReasoningBankConfig(), TASK, TRAJECTORY, Outcome(False, 0.0), "u", InduceStats())

    asyncio.run(every_call())
    return llm.requests


def test_any_other_server_gets_free_text_requests():
    requests = _requests(constrained=False)
    assert len(requests) == 6  # reflector, curator, DC rewrite, DC synthesis, judge, extraction
    assert all("response_format" not in r and "extra_body" not in r for r in requests)
    assert all(r["temperature"] == 0.6 and r["max_tokens"] is None for r in requests)


def test_the_embedded_model_gets_each_roles_format():
    reflector, curation, rewrite, synthesis, judge, extract = _requests(constrained=True)
    assert reflector["response_format"]["type"] == "json_object"
    ops = curation["response_format"]["schema"]["properties"]["operations"]
    assert (ops["minItems"], ops["maxItems"]) == (1, 3)
    assert ops["items"]["properties"]["section"]["enum"] == sorted(ALLOWED_SECTIONS)
    assert rewrite["extra_body"]["grammar"] == synthesis["extra_body"]["grammar"] == curator.GRAMMAR
    assert '"\\nStatus: \\"" ("success" | "failure")' in judge["extra_body"]["grammar"]
    assert extract["extra_body"]["grammar"].startswith('root ::= item ("\\n\\n" item){0,2}')


def test_answers_in_the_grammars_formats_read_as_the_authors_read_them():
    from reme_cli.methods.dc.cheatsheet import extract_cheatsheet
    from reme_cli.methods.reasoningbank.prompting import read_items, read_verdict

    sheet = "<cheatsheet>\n\nVersion: 1\n\n<memory_item>\nCheck the folder first.\n</memory_item>\n\n</cheatsheet>"
    curated = extract_cheatsheet(sheet, "(empty)")
    assert curated.usable and curated.closed and "Check the folder first." in curated.text
    assert read_verdict('Thoughts: it moved the file.\nStatus: "success"') == ("success", "it moved the file.", True)
    items = read_items("# Memory Item 1\n## Title Check first\n## Description Before moving.\n## Content Look.", 3)
    assert items == [{"title": "Check first", "description": "Before moving.", "content": "Look."}]
