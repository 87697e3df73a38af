"""The manual (mkdocs.yml, docs/) builds strictly, and its generated references cover the code:
every CLI command and option of the Typer app, every config key of the schema and of every
plug-in section. The README stays a front door, and no relative link of it or of the manual
points nowhere."""

from __future__ import annotations

import dataclasses
import html
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reme_cli.core.config import group_files
from tests.conftest import REPO, script_module

README_MAX_LINES = 250
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built in process with ``strict``: any warning (a broken link or anchor, a page
    missing from the nav) aborts the build."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    out = tmp_path_factory.mktemp("site")
    build(load_config(str(REPO / "mkdocs.yml"), site_dir=str(out), strict=True))
    return out


def page(site: Path, name: str) -> str:
    return html.unescape((site / name / "index.html").read_text())


def commands():
    """(``reme pool import``, command) for every command of the Typer app, walked anew."""
    import typer.main

    from reme_cli.cli import app

    todo = [("reme", typer.main.get_command(app))]
    while todo:
        path, command = todo.pop()
        yield path, command
        todo += [(f"{path} {name}", sub) for name, sub in (getattr(command, "commands", None) or {}).items()]


def config_keys():
    """Every leaf key of the schema and of each plug-in option's own dataclass."""
    from reme_cli.core.config import Config
    from reme_cli.core.registry import BENCHMARKS, METHODS

    def leaves(cls, prefix):
        for f in dataclasses.fields(cls):
            factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
            if factory is not None and dataclasses.is_dataclass(factory):
                yield from leaves(factory, f"{prefix}{f.name}.")
            elif f.name not in ("benchmark", "memory") or prefix:
                yield f"{prefix}{f.name}"

    yield from leaves(Config, "")
    for group, registry in (("benchmark", BENCHMARKS), ("memory", METHODS)):
        for path in group_files(group).values():
            name = yaml.safe_load(path.read_text())["name"]
            yield from leaves(registry.section(name), f"{group}.")


def test_every_cli_command_and_option_is_on_the_built_cli_page(site):
    text = page(site, "reference/cli")
    found = list(commands())
    assert {"reme eval", "reme pool import", "reme ablate", "reme view"} <= {p for p, _ in found}
    for path, command in found:
        assert f"<code>{path}</code>" in text, f"{path} is missing from the CLI reference"
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt in text, f"{path} {opt} is missing from the CLI reference"


def test_every_config_key_is_on_the_built_config_page(site):
    text = page(site, "reference/config")
    keys = set(config_keys())
    assert {"llm.concurrency", "model.sampling.top_p", "benchmark.release", "memory.deletion.alpha"} <= keys
    missing = sorted(k for k in keys if f"<code>{k}</code>" not in text)
    assert missing == [], f"config keys missing from the configuration reference: {missing}"
    # the ledger's source reaches the key it names
    row = re.search(r"<code>memory.judge_threshold</code>.*?</tr>", text, re.S).group(0)
    assert "memory_validation_op.py" in row


def test_every_group_option_is_on_the_config_page(site):
    text = page(site, "reference/config")
    for group in ("model", "benchmark", "memory", "embedding", "summarizer", "tracker", "experiment"):
        for option in group_files(group):
            assert f"<code>{group}={option}</code>" in text


def test_the_results_index_is_built_from_results_readme(site):
    text = page(site, "results")
    for name in re.findall(r"^\| `([^`]+)` \|", (REPO / "results" / "README.md").read_text(), re.M):
        assert name in text
        assert (REPO / "results" / name.rstrip("/")).exists(), f"results/README.md names {name}, which is gone"


def test_the_architecture_page_shows_every_layer_in_order(site):
    from tests.test_architecture import LAYERS

    # the built page draws the picture itself (an SVG: no mermaid script, no CDN), top floor first
    drawn = re.search(r'<svg[^>]*aria-label="the layers, top to bottom: ([^"]+)"', page(site, "architecture"))
    assert drawn and drawn.group(1).split(", ") == ["cli", *reversed(LAYERS[:-1])]
    text = (REPO / "docs" / "architecture.md").read_text()
    diagram = text.split("```mermaid", 1)[1].split("```", 1)[0]
    at = [diagram.find(f"{layer}/") if layer != "cli" else diagram.find("cli.py") for layer in LAYERS]
    assert -1 not in at, dict(zip(LAYERS, at))
    assert at == sorted(at, reverse=True), "the diagram lists the floors from the top (cli) down to core"


def test_the_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move the detail into docs/"
    text = "\n".join(lines)
    for command in ("bash scripts/install.sh && reme eval --mode none experiment=quickstart",
                    "bash scripts/install.sh --dev && pytest -q", "apt-get install -y chromium"):
        assert command in text


def generated_pages() -> set[Path]:
    """The pages the build adds (scripts/gen_reference.py: the references, the plug-ins'
    pages): links to them resolve on the site."""
    return {(REPO / "docs" / uri).resolve() for uri in script_module("gen_reference.py").generated_pages()}


def served_plugin_pages() -> dict[Path, Path]:
    """Each plug-in's page (its package's manual.md) -> where the site serves it, as if in docs/."""
    return {path: REPO / "docs" / uri for uri, path in script_module("gen_reference.py").plugin_pages().items()}


def broken_links(files: list[Path], generated: set[Path] = frozenset(), served: dict[Path, Path] = {}) -> list[str]:  # noqa: B006
    """``path: target`` of each relative link that points nowhere; a page the site serves from
    elsewhere (``served``: a plug-in's page) is read as if it stood there."""
    broken = []
    for path in files:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # code is not a link
        for target in (a or b for a, b in LINK.findall(text)):
            if re.match(r"[a-z]+:|#", target):
                continue
            where = (served.get(path, path).parent / target.split("#", 1)[0]).resolve()
            if not where.exists() and where not in generated:
                broken.append(f"{path}: {target}")
    return broken


def test_every_relative_link_of_the_readme_and_the_manual_resolves():
    generated = generated_pages()
    assert (REPO / "docs" / "reference" / "cli.md").resolve() in generated
    # the README is read on GitHub too, where the generated pages do not exist
    assert broken_links([REPO / "README.md"]) == []
    assert broken_links(sorted((REPO / "docs").rglob("*.md")), generated) == []
    served = served_plugin_pages()
    assert len(served) >= 2 and broken_links(sorted(served), generated, served) == []
    links = LINK.findall((REPO / "README.md").read_text())
    assert sum(t.startswith("docs/") for a, b in links for t in (a or b,)) >= 10, "the README links into the manual"


def test_the_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("x")
    page_md = tmp_path / "docs" / "page.md"
    page_md.write_text("[ok](there.md#a) [gone](nowhere.md) ![img](images/none.png) [web](https://x.org)\n"
                       "```\n[in code](ignored.md)\n```\n")
    assert [b.rsplit(": ", 1)[1] for b in broken_links([page_md])] == ["nowhere.md", "images/none.png"]


# ---------------------------------------------------------------- paths the manual names

PATH_ROOTS = ("reme_cli", "tests", "scripts", "configs", "results", "docs")
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
# Another repository's file: "owner/repo `path`", or "`path` @ commit" / "at commit".
FOREIGN_BEFORE = re.compile(r"[\w.-]+/[\w.-]+\s+$")
FOREIGN_AFTER = re.compile(r"^\s*(@|at)\s*[0-9a-f]{7,}")


def repo_packages(repo: Path) -> tuple[str, ...]:
    """reme_cli's packages: the manual also names their files without the reme_cli/ prefix."""
    return tuple(sorted(p.name for p in (repo / "reme_cli").iterdir() if (p / "__init__.py").is_file()))


def named_paths(text: str, packages: tuple[str, ...]) -> list[str]:
    """The repository paths a page names: in code spans (but another repository's, named
    beside it) and in plain or text code blocks (layout trees); a shell block's paths are
    what a command writes, not what must exist."""
    token = re.compile(r"(?<![\w./@:-])((?:%s)/[\w.\-/<>*{},]*)" % "|".join(PATH_ROOTS + packages))
    found = []
    for lang, body in FENCE.findall(text):
        if lang in ("", "text"):
            found += token.findall(body)
    prose = FENCE.sub("", text)
    for span in SPAN.finditer(prose):
        line_start = prose.rfind("\n", 0, span.start()) + 1
        if FOREIGN_BEFORE.search(prose[line_start:span.start()]) or FOREIGN_AFTER.match(prose[span.end():]):
            continue
        found += token.findall(span.group(1))
    return found


def path_exists(repo: Path, name: str, packages: tuple[str, ...]) -> bool:
    """Whether ``name`` names something in ``repo``: ``<name>``, ``NAME`` and ``*`` stand for
    any name, ``{a,b}`` for either; a ``:line``, ``::test`` or ``#anchor`` tail and a module's
    ``.attribute`` are not part of the path; a package's path may leave out ``reme_cli/``."""
    name = re.split(r"::|#|:(?=\d)", name.rstrip(".,;:)"))[0]
    if name.split("/")[0] in packages and name.split("/")[0] not in PATH_ROOTS:
        name = f"reme_cli/{name}"
    pattern = "/".join("*" if re.fullmatch(r"[A-Z_]+", part) else re.sub(r"<[^>]*>", "*", part)
                       for part in name.rstrip("/").split("/"))
    alternatives = [pattern]
    while any("{" in p for p in alternatives):
        alternatives = [p.replace(m.group(0), choice, 1) for p in alternatives
                        for m in [re.search(r"\{([^}]*)\}", p)] for choice in m.group(1).split(",")]
    return all(any(repo.glob(candidate)) or any(repo.glob(re.sub(r"\.\w+$", ".py", candidate)))
               for candidate in alternatives)


def missing_paths(repo: Path, files: list[Path]) -> list[str]:
    """``file: path`` for each repository path the pages (and mkdocs.yml's nav and hooks) name
    that is not there."""
    packages = repo_packages(repo)
    missing = [f"{f.relative_to(repo)}: {name}" for f in files for name in named_paths(f.read_text(), packages)
               if not path_exists(repo, name, packages)]
    mkdocs = yaml.load((repo / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def pages(nav):
        for entry in nav:
            for value in (entry.values() if isinstance(entry, dict) else [entry]):
                yield from (pages(value) if isinstance(value, list) else [value])

    generated = set(script_module("gen_reference.py").generated_pages()) if repo == REPO else set()
    missing += [f"mkdocs.yml nav: docs/{page}" for page in pages(mkdocs.get("nav") or [])
                if not (repo / "docs" / page).is_file() and page not in generated]
    missing += [f"mkdocs.yml hooks: {hook}" for hook in mkdocs.get("hooks") or [] if not (repo / hook).is_file()]
    return missing


def manual_files(repo: Path) -> list[Path]:
    """The README, docs/ and (in this checkout) each plug-in's own page."""
    plugins = sorted(served_plugin_pages()) if repo == REPO else []
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md")), *plugins]


def test_every_repository_path_the_manual_names_exists():
    assert missing_paths(REPO, manual_files(REPO)) == []
    # it reads what it must: the layout trees and the prose's spans, short and long forms
    named = {n for f in manual_files(REPO) for n in named_paths(f.read_text(), repo_packages(REPO))}
    assert {"reme_cli/methods/<name>/", "tests/plugins/reme_toy/", "scripts/gen_reference.py"} <= named


def test_the_path_check_finds_a_path_that_is_gone(tmp_path):
    (tmp_path / "reme_cli" / "core").mkdir(parents=True)
    (tmp_path / "reme_cli" / "core" / "__init__.py").write_text("")
    for module in ("staging.py", "io.py"):
        (tmp_path / "reme_cli" / "core" / module).write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("x")
    (tmp_path / "mkdocs.yml").write_text("nav:\n  - Home: index.md\n  - Gone: gone.md\n")
    page_md = tmp_path / "docs" / "page.md"
    page_md.write_text("`core/staging.replace_dir` `reme_cli/core/staging.py:12` `reme_cli/<pkg>/` "
                       "`reme_cli/core/{staging,io}.py` `reme_cli/testing/<name>_policy.py` `core/gone.py` "
                       "`reme_cli/core/{io,gone}.py`\n"
                       "owner/repo `docs/cookbook/faq.md` and `docs/guide.md` @ c4de781 are another's\n"
                       "```bash\npython x.py --out results/new.json\n```\n```text\nscripts/gone.sh  a tree\n```\n")
    assert missing_paths(tmp_path, [page_md]) == [
        "docs/page.md: scripts/gone.sh", "docs/page.md: reme_cli/testing/<name>_policy.py",
        "docs/page.md: core/gone.py", "docs/page.md: reme_cli/core/{io,gone}.py", "mkdocs.yml nav: docs/gone.md"]


@pytest.mark.script("gen_reference.py")
@pytest.mark.slow
def test_gen_reference_writes_the_generated_pages(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_reference.py"), "--out", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cli = (tmp_path / "reference" / "cli.md").read_text()
    assert "## `reme eval`" in cli and "`--dry-run`" in cli
    assert "| `eval.runs` | int | `4` |" in (tmp_path / "reference" / "config.md").read_text()
    assert (tmp_path / "results.md").read_text().startswith("# Results committed with reme")
    assert not (REPO / "docs" / "reference").exists()  # generated, never written into docs/


def test_the_strict_build_fails_on_a_broken_anchor(tmp_path):
    """The manual's own settings (mkdocs.yml's validation) turn a link to a missing heading
    into a failed build, not a warning scrolled past."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n## Here\n\n[fine](#here) [gone](#nowhere)\n")
    cfg = load_config(str(REPO / "mkdocs.yml"), docs_dir=str(docs), site_dir=str(tmp_path / "site"),
                      strict=True, nav=["index.md"], hooks=[])
    with pytest.raises(Abort, match="warning"):
        build(cfg)


def test_every_schema_key_has_its_doc_beside_it():
    """The configuration reference shows each key's comment from the source: a key of the
    schema (reme_cli/core/config.py) or of BenchmarkConfig added without one fails here."""
    from reme_cli.bench.base import BenchmarkConfig
    from reme_cli.core.config import Config

    gen = script_module("gen_reference.py")
    rows = [*gen.config_rows(Config, ""), *gen.config_rows(BenchmarkConfig, "benchmark.")]
    assert len(rows) > 60
    assert [key for key, _, _, doc in rows if not doc and key not in ("benchmark", "memory")] == []
