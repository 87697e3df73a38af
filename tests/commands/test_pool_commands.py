"""`reme pool stats|show|import` name no method: each reads a pool through its method's hooks
(``describe``, ``preflight``, ``query_saved``, ``releases``), found in the registry. In
process (the commands' own functions); the CLI's one-line errors are tested in test_bad_input."""

from __future__ import annotations

import pytest
from rich.console import Console

from reme_cli.commands.pool import _with_method, import_pool, show_pool, show_stats
from reme_cli.core.errors import UserError
from reme_cli.methods.reme.experience import Experience
from reme_cli.methods.reme.pool import Pool
from tests.core.test_safe_state import FakeEmbedder


def rows(text: str) -> dict[str, str]:
    return {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in text.splitlines() if line.count("│") == 3}


@pytest.fixture
def pool(tmp_path):
    pool = Pool.create(tmp_path / "built" / "pool", FakeEmbedder())
    pool.add([Experience(when_to_use=f"When doing task {i}", content=f"Do step {i} first.",
                         source="success" if i % 3 else "failure") for i in range(6)])
    pool.save()
    return tmp_path / "built"


def test_stats_finds_a_reme_pool_without_being_told_and_reads_its_description(pool):
    console = Console(record=True, width=200)
    show_stats(pool, [], console)  # no memory=: ReMe's manifest names no method; its describe knows it
    text = console.export_text()
    table = rows(text)
    assert text.lstrip().startswith("reme pool")
    assert table["items"] == "6" and table["by source"] == "failure 2, success 4"
    assert table["f per item"] == "min 0, mean 0, max 0" and table["confidence per item"] == "min 1, mean 1, max 1"


def test_show_lists_items_and_a_damaged_pool_is_refused_before_it_is_read(pool):
    console = Console(record=True, width=200)
    show_pool(pool, None, 2, [], console)
    text = console.export_text()
    assert "2 of 6 items in reme pool" in text and "When doing task 0" in text and "task 2" not in text
    data = pool / "pool" / "experiences.jsonl"
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:2]))
    with pytest.raises(UserError, match="damaged"):
        show_stats(pool, [], Console(record=True))


def test_a_folder_of_no_method_and_a_method_without_releases_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="holds no pool of any registered method"):
        show_stats(tmp_path / "empty", [], Console(record=True))
    with pytest.raises(UserError, match="memory=amem has no released pools to import; methods that do: memory=reme"):
        import_pool("official:bfcl/qwen3-8b", tmp_path / "out", ["memory=amem"], Console(record=True))
    assert not (tmp_path / "out").exists()
    # Not told which: the one registered method with released pools.
    assert _with_method(["model=qwen3-8b"]) == ["memory=reme", "model=qwen3-8b"]
