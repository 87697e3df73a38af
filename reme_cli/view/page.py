"""The page itself: one HTML file with its own style and script (``static/``), nothing
fetched from elsewhere. Served live it asks the server for data (``api.py``); exported, it
carries the answer to every key it can ask, as JSON in the file."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

GENERATOR = '<meta name="generator" content="reme view">'  # what marks a file reme wrote


def _static(name: str) -> str:
    return resources.files("reme_cli.view").joinpath("static", name).read_text(encoding="utf-8")


def embed_json(data: Any) -> str:
    """JSON that cannot end the <script> element it sits in, whatever strings it holds (model
    output may contain "</script>"): every "<" is written as its JSON escape."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def render(data: dict[str, Any] | None = None) -> str:
    """The page; with ``data`` (key -> answer, or key -> its JSON text) it needs no server."""
    html = _static("index.html")
    html = html.replace("/*REME:STYLE*/", _static("app.css"))
    html = html.replace("/*REME:SCRIPT*/", _static("app.js").replace("</script", "<\\/script"))
    # Last: the runs' text must never be searched for a marker.
    block = f'<script id="reme-data" type="application/json">{embed_json(data)}</script>' if data is not None else ""
    return html.replace("<!--REME:DATA-->", block, 1)
