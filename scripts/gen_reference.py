"""The manual's generated pages: the CLI reference, the configuration reference, the results
index and each plug-in's own page, written from the code and the repository at build time so
they cannot drift.

An mkdocs hook (``mkdocs.yml``: ``hooks: [scripts/gen_reference.py]``): ``on_files`` adds
``reference/cli.md``, ``reference/config.md``, ``results.md`` and the plug-ins' pages to the
build, and ``on_config`` lists the plug-ins' pages in the nav; nothing is written into
``docs/``. Run as a script it writes the same pages into a folder, to read them without
building the site: ``python scripts/gen_reference.py --out DIR``.

- CLI: every command and sub-command of the Typer app (``reme_cli.cli.app``), walked as the
  click tree Typer builds, with its usage, help and options.
- Configuration: every key of the typed schema (``reme_cli/core/config.py``) and of each
  plug-in section (``benchmark.*`` / ``memory.*``: the section of every option of the
  ``benchmark`` and ``memory`` groups, each plug-in's own), with its type, default, the comment
  beside it in the source, and its fidelity source where the ledger (``docs/fidelity.md``)
  names one; then every option of every config group and what it sets.
- Results: ``results/README.md``, the index of the committed results.
- Plug-ins: each registered benchmark's and memory method's page, ``manual.md`` in its package
  (``reme_cli/methods/reme/manual.md``), at ``methods/PACKAGE.md`` / ``benchmarks/PACKAGE.md``
  and in the nav's Memory methods / Benchmarks sections: a plug-in brings its page along.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import html
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the checkout's reme_cli, also when mkdocs runs from elsewhere
    sys.path.insert(0, str(REPO))

LEDGER_PAGE = REPO / "docs" / "fidelity.md"
LEDGER_HEADING = "## The ledger"
GROUPS = ("model", "benchmark", "memory", "embedding", "summarizer", "tracker", "experiment")
TICKED = re.compile(r"`([^`]*)`")


# ---------------------------------------------------------------- the CLI


def cli_commands() -> Iterator[tuple[str, Any]]:
    """(``reme pool import``, its click command) for the app and every command under it."""
    import typer.main

    from reme_cli.cli import app

    def walk(path: str, command: Any) -> Iterator[tuple[str, Any]]:
        yield path, command
        for name in sorted(getattr(command, "commands", {}) or {}):
            yield from walk(f"{path} {name}", command.commands[name])

    yield from walk("reme", typer.main.get_command(app))


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _prose(text: str, one_line: bool = True) -> str:
    """Help text as Markdown: ``<prefix>`` is a placeholder, not an HTML tag."""
    text = html.escape(text, quote=False)
    return _cell(text) if one_line else text


def cli_page() -> str:
    out = ["# CLI reference", "",
           "Generated from the Typer app (`reme_cli/cli.py`) when the manual is built: every command, "
           "its usage, help and options, as `reme COMMAND --help` prints them. Every command also takes "
           "Hydra overrides where it says `OVERRIDES` ([Configuration](../configuration.md)).", ""]
    for path, command in cli_commands():
        ctx = command.context_class(command, info_name=path)  # Typer's own click (it vendors one)
        level = "#" * min(2 + path.count(" ") - 1, 4) if path != "reme" else "##"
        out += [f"{level} `{path}`", ""]
        out += ["```text", f"Usage: {path} {' '.join(command.collect_usage_pieces(ctx))}".rstrip(), "```", ""]
        help_text = inspect.cleandoc(command.help or "")
        if help_text:
            out += [_prose(help_text, one_line=False), ""]
        params = [p for p in command.get_params(ctx) if p.name != "help"]
        if params:
            out += ["| argument / option | help |", "| --- | --- |"]
            for p in params:  # what `--help` prints for it (Typer's own help records)
                names, help_text = p.get_help_record(ctx) or (p.name, "")
                out.append(f"| `{_cell(names)}` | {_prose(help_text)} |")
            out.append("")
        subs = sorted(getattr(command, "commands", {}) or {})
        if subs:
            out += ["Commands: " + ", ".join(f"`{path} {s}`" for s in subs), ""]
    return "\n".join(out)


# ---------------------------------------------------------------- the configuration


def ledger_sources() -> dict[str, str]:
    """Config key -> the "source" cell of its fidelity-ledger row."""
    if not LEDGER_PAGE.is_file():
        return {}
    text = LEDGER_PAGE.read_text().split(LEDGER_HEADING, 1)[-1].split("\n## ", 1)[0]
    sources = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            for key in TICKED.findall(cells[0]):
                sources[key.rstrip("=")] = cells[3]
    return sources


def field_comments(cls: type) -> dict[str, str]:
    """Field name -> the comment written beside it (trailing) or on the lines just above."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass.__module__ == "builtins":
            continue
        try:
            lines, _ = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue
        source = textwrap.dedent("".join(lines))
        body = source.splitlines()
        tree = ast.parse(source)
        for node in tree.body[0].body:  # the class's statements
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            text = []
            above = node.lineno - 2
            while above >= 0 and body[above].strip().startswith("#"):
                text.insert(0, body[above].strip().lstrip("#").strip())
                above -= 1
            line = body[node.lineno - 1]
            if "#" in line and not line.strip().startswith("#"):
                trailing = _trailing_comment(line)
                if trailing:
                    text.append(trailing)
            if text:
                comments[node.target.id] = " ".join(text)
    return comments


def _trailing_comment(line: str) -> str:
    """The ``# ...`` of a code line, not a ``#`` inside a string."""
    import io
    import tokenize

    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return tok.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError):
        return ""
    return ""


def _type_name(tp: Any) -> str:
    text = (tp if isinstance(tp, str) else getattr(tp, "__name__", str(tp))).replace("typing.", "")
    if text.startswith("Optional[") and text.endswith("]"):
        return "null | " + text[len("Optional["):-1]
    return text


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _shown(value: Any) -> str:
    if value == "???" or value is dataclasses.MISSING:
        return "(required)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value!r}`" if isinstance(value, (list, dict, tuple)) else f"`{value}`"


def config_rows(cls: type, prefix: str) -> Iterator[tuple[str, str, str, str]]:
    """(dotted key, type, default, comment) for every leaf key of a config dataclass."""
    comments = field_comments(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        default = _default(f)
        if dataclasses.is_dataclass(default):
            yield from config_rows(type(default), key + ".")
            continue
        yield key, _type_name(f.type), _shown(default), comments.get(f.name, "")


def plugin_classes(group: str) -> list[tuple[str, type]]:
    """(option name, its section's class) of every option of the ``benchmark`` or ``memory``
    group, reme's own and the installed plug-ins'."""
    import yaml

    from reme_cli.core.config import group_files
    from reme_cli.core.registry import BENCHMARKS, METHODS

    registry = {"benchmark": BENCHMARKS, "memory": METHODS}[group]
    out = []
    for stem, path in group_files(group).items():
        name = (yaml.safe_load(path.read_text()) or {}).get("name", stem)
        out.append((name, registry.section(name)))
    return out


def _table(rows: list[tuple[str, str, str, str]], sources: dict[str, str]) -> list[str]:
    out = ["| key | type | default | what it is | fidelity source |", "| --- | --- | --- | --- | --- |"]
    for key, tp, default, doc in rows:
        out.append(f"| `{key}` | {_cell(tp)} | {_cell(default)} | {_cell(doc)} | {sources.get(key, '')} |")
    return out + [""]


def _header_comment(text: str) -> str:
    """The comment lines a group file opens with (its own description), Hydra's header aside."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if "@package" not in line:
            lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def _flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(data, dict):
        for k, v in data.items():
            if k == "defaults":  # Hydra's defaults list: which other options this one picks
                yield "defaults", v
                continue
            yield from _flatten(v, f"{prefix}{k}.")
    else:
        yield prefix.rstrip("."), data


def config_page() -> str:
    import yaml

    from reme_cli.core.config import Config, group_files

    sources = ledger_sources()
    out = ["# Configuration reference", "",
           "Generated from the typed schema (`reme_cli/core/config.py`), each plug-in's section and "
           "the group files (reme's `configs/` and each plug-in's own) when the manual is built. Each key's comment is the one written "
           "beside it in the source; *fidelity source* is the ledger's ([Fidelity](../fidelity.md)) for keys "
           "whose default follows what the authors ran. How overrides, groups and presets work: "
           "[Configuration](../configuration.md).", "",
           "## Top-level keys", "",
           "The schema `Config` and its sections. `benchmark.*` and `memory.*` belong to the plug-in "
           "the section names (below).", ""]
    top = [r for r in config_rows(Config, "") if r[0] not in ("benchmark", "memory")]
    out += _table(top, sources)
    for group, title in (("benchmark", "Benchmark keys: `benchmark.*`"), ("memory", "Memory-method keys: `memory.*`")):
        out += [f"## {title}", ""]
        for name, cls in plugin_classes(group):
            out += [f"### `{group}={name}`", "",
                    f"`{cls.__module__}.{cls.__qualname__}`. " + _cell(inspect.cleandoc(cls.__doc__ or "")
                                                                       if cls.__doc__ and not cls.__doc__.startswith(
                                                                           cls.__name__ + "(") else ""), ""]
            out += _table(list(config_rows(cls, f"{group}.")), sources)
    out += ["## Config groups and their options", "",
            "`configs/config.yaml` picks one option per group; `GROUP=OPTION` on the command line picks "
            "another. An option's file holds only what it changes from the defaults above.", ""]
    for group in GROUPS:
        out += [f"### `{group}=`", "", "| option | what it is | sets |", "| --- | --- | --- |"]
        for stem, path in group_files(group).items():
            text = path.read_text()
            # A group file's keys are under its group, unless it is a global package (presets).
            prefix = "" if "@package _global_" in text.split("\n", 1)[0] else f"{group}."
            sets = "; ".join(f"`{k}={_yaml_value(v)}`" for k, v in _flatten(yaml.safe_load(text) or {}, prefix))
            out.append(f"| `{group}={stem}` | {_cell(_header_comment(text))} | {_cell(sets) or '(the defaults)'} |")
        out.append("")
    return "\n".join(out)


def _yaml_value(value: Any) -> str:
    import json

    return json.dumps(value) if not isinstance(value, str) else value


# ---------------------------------------------------------------- results, the hook, the script


def results_page() -> str:
    text = (REPO / "results" / "README.md").read_text()
    return text + "\n\nThe files are in the repository's `results/` folder.\n"


PAGES = {"reference/cli.md": cli_page, "reference/config.md": config_page, "results.md": results_page}


# ---------------------------------------------------------------- the plug-ins' own pages

PAGE_FILE = "manual.md"  # a plug-in's page, in its package
# The nav section each plug-in floor's pages join, and the folder of the site they are under.
PLUGIN_SECTIONS = {"Benchmarks": "benchmarks", "Memory methods": "methods"}


def plugin_pages() -> dict[str, Path]:
    """Site path -> page file of every registered benchmark and memory method that brings one:
    the ``manual.md`` nearest to its module in its package (a plug-in registering two names
    from one package, LangMem's, has one page). Nothing is imported but the packages."""
    import importlib.util

    from reme_cli.core.registry import BENCHMARKS, METHODS

    pages: dict[str, Path] = {}
    for folder, registry in (("benchmarks", BENCHMARKS), ("methods", METHODS)):
        for target in registry.targets().values():
            spec = importlib.util.find_spec(target.split(":")[0])
            where = Path(spec.origin).parent if spec and spec.origin else None
            while where is not None and (where / "__init__.py").is_file():
                if (where / PAGE_FILE).is_file():
                    pages.setdefault(f"{folder}/{where.name}.md", where / PAGE_FILE)
                    break
                where = where.parent
    return pages


def page_title(path: Path) -> str:
    """The nav's name of a page: its title up to a colon (``# ReMe: the memory workflow``: ReMe)."""
    title = next((line[2:].strip() for line in path.read_text().splitlines() if line.startswith("# ")), path.stem)
    return title.split(": ", 1)[0]


def plugin_nav() -> dict[str, list[dict[str, str]]]:
    """Nav section -> its plug-ins' pages as nav entries: the default method's first (the
    paper's), then by title."""
    from reme_cli.core.registry import DEFAULT_METHOD

    pages = plugin_pages()
    out: dict[str, list[dict[str, str]]] = {}
    for section, folder in PLUGIN_SECTIONS.items():
        ours = sorted((uri for uri in pages if uri.startswith(f"{folder}/")),
                      key=lambda uri: (uri != f"{folder}/{DEFAULT_METHOD}.md", page_title(pages[uri]).lower()))
        out[section] = [{page_title(pages[uri]): uri} for uri in ours]
    return out


def generated_pages() -> list[str]:
    """Every page the hook adds to the site (its path there)."""
    return [*PAGES, *plugin_pages()]


# ---------------------------------------------------------------- the layers picture

MERMAID = re.compile(r"```mermaid\n(flowchart TB\n.*?)```", re.S)
NODE = re.compile(r'^\s*(\w+)\["(.*)"\]\s*$')


def chain_svg(source: str) -> str | None:
    """A top-down mermaid chain (``a["title<br/>note"]`` nodes, one ``a --> b --> ...`` line)
    drawn as an SVG, so the picture shows without mermaid's script (offline, no CDN). Any other
    diagram: None (it stays mermaid)."""
    lines = source.strip().splitlines()[1:]
    nodes = {m.group(1): m.group(2) for m in map(NODE.match, lines) if m}
    chains = [line for line in lines if "-->" in line]
    if len(chains) != 1 or len(nodes) + len(chains) != len(lines):
        return None
    order = [part.strip() for part in chains[0].split("-->")]
    if set(order) != set(nodes):
        return None
    width, box, gap = 760, 50, 16
    height = len(order) * (box + gap) - gap + 2
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
           f'aria-label="the layers, top to bottom: {", ".join(order)}" font-family="sans-serif">']
    for i, name in enumerate(order):
        title, _, note = nodes[name].partition("<br/>")
        y = 1 + i * (box + gap)
        out.append(f'<rect x="1" y="{y}" width="{width - 2}" height="{box}" rx="6" fill="#eef2fb" stroke="#3f51b5"/>')
        out.append(f'<text x="14" y="{y + 20}" font-size="15" font-weight="bold">{html.escape(title)}</text>')
        out.append(f'<text x="14" y="{y + 39}" font-size="12.5">{html.escape(note)}</text>')
        if i:
            out.append(f'<path d="M{width // 2} {y - gap + 1} v{gap - 3}" stroke="#3f51b5" stroke-width="2"/>'
                       f'<path d="M{width // 2 - 5} {y - 6} l5 5 l5 -5" fill="none" stroke="#3f51b5" stroke-width="2"/>')
    return "\n".join(out + ["</svg>"])


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: a mermaid chain becomes an inline SVG (GitHub draws the mermaid itself)."""
    return MERMAID.sub(lambda m: chain_svg(m.group(1)) or m.group(0), markdown)


def on_config(config: Any) -> Any:
    """mkdocs hook: each plug-in's page joins its nav section (mkdocs.yml lists the pages that
    are no plug-in's), after the section's overview page (its folder's index.md) if it has one."""
    for section, entries in plugin_nav().items():
        for item in config["nav"]:
            if isinstance(item, dict) and section in item:
                pages = item[section]
                at = 1 if pages and list(pages[0].values())[0] == f"{PLUGIN_SECTIONS[section]}/index.md" else 0
                item[section] = [*pages[:at], *entries, *pages[at:]]
    return config


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: the generated pages and the plug-ins' own join the build (nothing is
    written into docs/)."""
    from mkdocs.structure.files import File

    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    for uri, path in plugin_pages().items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write the generated pages into")
    args = parser.parse_args()
    written = {uri: make() for uri, make in PAGES.items()}
    written |= {uri: path.read_text() for uri, path in plugin_pages().items()}
    for uri, text in written.items():
        path = args.out / uri
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(path)


if __name__ == "__main__":
    main()
