"""A command of the toy plug-in's own (``reme toy-count N``), found through the
``reme.commands`` entry point: reme's cli.py names no plug-in."""

from __future__ import annotations

import typer

from reme_cli.core.errors import UserError


def count(target: int = typer.Argument(..., help="The counter value a toy task asks for.")) -> None:
    """Print the answer a perfect agent gives a toy task."""
    if target < 1:
        raise UserError(f"toy-count {target}: give a target of at least 1")
    print(f"DONE at {target}")
