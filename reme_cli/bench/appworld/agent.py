"""The AppWorld agent's words: the authors' (the default) or reme's compact ones.

``benchmark.agent=authors`` is the agent of agentscope-ai/ReMe at 65971baf
(``benchmark/appworld/appworld_react_agent.py``, ``prompt.py``): the system message is
``NEW_PROMPT_TEMPLATE`` (shipped verbatim in ``authors_prompts/``, see its NOTICE)
rendered with jinja2 after ``.lstrip()``, with the task's supervisor and the app
descriptions of its world (``json.dumps(..., indent=1)``); the first user message is the
task's instruction alone, or with experiences ``"Task:\\n" + instruction + "\\n\\nSome
Related Experience to help you to complete the task:\\n" + items``, each item labelled
``Experience i:`` (their agent turns the memory service's ``Memory i :`` into that with
``re.sub(r"\\bMemory\\s*(\\d+)\\s*[:]", r"Experience \\1:", ...)``; reme's own labels,
``Experience i :`` as on BFCL, are relabelled the same way: ``EXPERIENCE_LABEL``,
applied by ``reme_cli.agent.loop``). The loop
side (first python block runs, only the code is kept, ``Output:`` answers) is
``reme_cli.agent.protocols.CodeProtocol``. ``benchmark.agent=compact`` is reme's earlier
768-character system prompt and a first user message that carries the supervisor line;
the loop is the same.

AppWorld agent of the paper's tables (results/authors_setup_evidence.md has the sources).
The September agent (C09, ``cookbook/appworld/`` at 1257c30e, 2025-09-15) differs from
65971baf: one *user* message, ``PROMPT_TEMPLATE_WITH_EXPERIENCE`` (an older onboarding text
with a password example, 17 "key instructions", the experiences as item 18, then the
supervisor and the instruction), no system message; the whole reply kept in the history and
run whole (no code extraction); the raw output as the answer, cut at 2,048 characters, no
``Output:`` wrapper; memories distilled only after all runs, from the uplift score; no trial
protocol. The November agent (C11, ``cookbook/appworld/`` at 66a2d133, 2025-11-26, after the
AppWorld pools were built and before the paper) is already 65971baf's agent (same
``NEW_PROMPT_TEMPLATE``, extraction, ``Output:`` answers, trial protocol) except that it cut
outputs at 2,048 characters and sent the service's ``Memory i :`` labels unchanged; both
were changed on 2025-12-24 (8016fa94 "for prompt consistency"), after the paper. reme runs
65971baf's agent, the one the authors' FAQ points to for reproducing the tables (the
project's rule: the FAQ wins, then the code of the period). Which cut-off produced the
published AppWorld numbers is not stated anywhere we could read: open.
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path
from typing import Any

import jinja2

from reme_cli.core.errors import UserError

AGENTS = ("authors", "compact")
AUTHORS_PROMPT = Path(__file__).parent / "authors_prompts" / "prompt.py"
# How the authors' AppWorld agent labels each experience (appworld_react_agent.py 110, 126).
EXPERIENCE_LABEL = "Experience {n}:"

# reme's own system prompt (benchmark.agent=compact).
COMPACT_SYSTEM_PROMPT = """\
You are an AI assistant who completes a user's day-to-day task by writing Python code that \
calls app APIs. Work step by step, in a loop: think briefly, then write ONE ```python code block; \
it runs in a persistent Python session where `apis` is defined, and its printed output comes \
back to you. Look up what you need first: apis.api_docs.show_app_descriptions(), \
apis.api_docs.show_api_descriptions(app_name=...), apis.api_docs.show_api_doc(app_name=..., \
api_name=...). Log in to an app with the supervisor's credentials from \
apis.supervisor.show_account_passwords() before using it. When the task is done, call \
apis.supervisor.complete_task(answer=...) (answer only when the task asks a question; use \
status="fail" if it cannot be done). Do not ask for clarification."""


@functools.cache
def new_prompt_template() -> str:
    """``NEW_PROMPT_TEMPLATE`` of the shipped prompt.py, read as a literal (never executed)."""
    for node in ast.parse(AUTHORS_PROMPT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NEW_PROMPT_TEMPLATE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError(f"{AUTHORS_PROMPT} has no NEW_PROMPT_TEMPLATE")


def authors_system_prompt(supervisor: dict[str, Any], app_descriptions: dict[str, str]) -> str:
    """The authors' system message for one task (appworld_react_agent.py ``prompt_messages``)."""
    apps = json.dumps([{"name": k, "description": v} for k, v in app_descriptions.items()], indent=1)
    return jinja2.Template(new_prompt_template().lstrip()).render(
        {"supervisor": supervisor, "app_descriptions": apps})


def compact_user_message(supervisor: dict[str, Any], instruction: str) -> str:
    return (f"My name is: {supervisor['first_name']} {supervisor['last_name']}. My personal email is "
            f"{supervisor['email']} and phone number is {supervisor['phone_number']}.\nTask:\n\n{instruction}")


def app_descriptions(venv: Path) -> dict[str, str]:
    """``world.task.app_descriptions``: every app but admin (``appworld.task.Task.__init__``:
    ``APP_TO_DESCRIPTION`` of ``appworld/apps/__init__.py``, whose keys are
    ``get_all_apps(skip_admin=True)``), read from the installed file as a literal, never
    executed: no AppWorld code runs on the host for it."""
    found = sorted(venv.glob("lib/python3*/site-packages/appworld/apps/__init__.py"))
    if not found:
        raise UserError("AppWorld is not set up: reme appworld setup")
    for node in ast.parse(found[-1].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "APP_TO_DESCRIPTION" for t in node.targets):
            apps = ast.literal_eval(node.value)
            if isinstance(apps, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in apps.items()):
                return apps
    raise UserError(f"{found[-1]} has no APP_TO_DESCRIPTION: reinstall AppWorld (reme appworld setup)")

