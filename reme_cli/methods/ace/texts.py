"""ACE's prompts, read from ``prompts/*.txt`` (each file names its source at the top), and
their function-calling variant: the authors' prompts are written for AppWorld's code actions;
on a benchmark whose agent calls tools (BFCL) the few lines that name the agent's action
(``code``) or its role (an AppWorld coding agent) are rewritten by ``FUNCTION_CALLING``, and
nothing else changes."""

from __future__ import annotations

from functools import cache
from importlib import resources

MARKER = "#---8<---\n"

# (original, function-calling text): each must occur in the prompt it is applied to.
FUNCTION_CALLING: dict[str, list[tuple[str, str]]] = {
    "reflector": [
        ("You are an expert AppWorld coding agent and educator.",
         "You are an expert function-calling (tool-use) agent and educator."),
        ("- Generated code (candidate to critique):", "- Generated tool calls (candidate to critique):"),
        ("- Execution error (if the generated code was run and failed):",
         "- Execution error (if the generated tool calls were run and failed):"),
        ("- Test report (unit tests result for the task after the generated code was run):",
         "- Test report (the checker's result for the task after the generated tool calls were run):"),
        ("(playbook that's used by model for code generation)", "(playbook that's used by model for tool calling)"),
        ("the output format/schema of APIs used when unclear",
         "the output format/schema of functions used when unclear"),
    ],
    "curator": [
        ("- For coding tasks, explicitly curate", "- For tool-calling tasks, explicitly curate"),
    ],
    "retry": [
        ("the code failed to match the ground truth outputs during unit testing",
         "the tool calls failed the checker's test of the task"),
        ("to improve your code in all future attempts", "to improve your tool calls in all future attempts"),
    ],
}


@cache
def raw(name: str) -> str:
    """The prompt file ``name`` without its provenance header."""
    text = resources.files("reme_cli.methods.ace").joinpath("prompts", f"{name}.txt").read_text()
    head, sep, body = text.partition(MARKER)
    if not sep:
        raise ValueError(f"ACE prompt {name}.txt has no provenance header ending in {MARKER!r}")
    return body


def adapted(text: str, kind: str, code_actions: bool) -> str:
    if code_actions:
        return text
    for old, new in FUNCTION_CALLING.get(kind, []):
        if old not in text:
            raise ValueError(f"ACE's {kind} prompt no longer holds {old!r}; update texts.FUNCTION_CALLING")
        text = text.replace(old, new)
    return text


def reflector(with_gt: bool, code_actions: bool) -> str:
    return adapted(raw("reflector_with_gt" if with_gt else "reflector_no_gt"), "reflector", code_actions)


def curator(code_actions: bool) -> str:
    return adapted(raw("curator"), "curator", code_actions)


def generator_frame() -> str:
    return raw("generator_frame").rstrip("\n")


def retry_frame(code_actions: bool) -> str:
    """What follows the playbook in an offline retry: the failed attempt's reflection."""
    return adapted(raw("retry_frame"), "retry", code_actions).rstrip("\n")


def initial_playbook(code_actions: bool) -> str:
    """AppWorld's initial playbook; elsewhere its section headers alone (its bullets are
    AppWorld's APIs), as ACE's general code starts from sections without bullets."""
    text = raw("initial_playbook_appworld")
    if code_actions:
        return text
    return "\n\n".join(line for line in text.splitlines() if line.startswith("##")) + "\n"
