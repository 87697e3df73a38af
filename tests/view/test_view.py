"""`reme view` over a suite the scripted server (a TEST DOUBLE: it replays BFCL ground truth,
so its numbers are no model's) ran through `reme ablate`: no memory, ReMe fixed and ReMe
dynamic from a pool built here. One task fails until a retry is guided by what its failure
taught, so dynamic memory fixes it and the others leave it alone.

Below the browser: the data each page gets, checked against the run's own files (metrics,
pools, commit logs); the server; the export; bad input. Then headless Chromium clicks through
the live page and opens exported files with networking off (skipped, saying how to get a
browser, where there is none)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from reme_cli.testing.browser import chromium, missing
from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy
from reme_cli.view.api import answer
from reme_cli.view.runs import Catalog
from reme_cli.view.server import ViewServer
from tests.conftest import REPO, reme_popen, run_reme, script_module

CORRUPT = "multi_turn_base_2"
LABELS = ("none", "fixed", "dynamic")
SUITE = """description: reme view's test suite
table: topk
pools: {p: []}
variants:
  none: {mode: none}
  fixed: {mode: fixed, pool: p}
  dynamic: {mode: dynamic, pool: p}
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("view")
    (work / "view_suite.yaml").write_text(SUITE)
    policy = AgentAndSummarizerPolicy(BFCLReplayPolicy(corrupt={CORRUPT}, heal_on_retry=True), ScriptedSummarizerPolicy())
    with ScriptedServer(policy) as server:
        run_reme(["ablate", str(work / "view_suite.yaml"), "model=qwen3-8b", "embedding=minilm",
                  "benchmark.release=current", f"llm.base_url={server.base_url}", "llm.model=replay",
                  "benchmark.limit=3", "eval.runs=2", "eval.seeds=1", "build.samples=1",
                  "eval.dynamic_workers=1"], work, check=True)
    (root,) = (work / "runs" / "ablate").iterdir()
    return root


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def by_label(catalog: Catalog) -> dict[str, dict]:
    return {row["label"]: row for row in answer(catalog, "index")["runs"]}


def known_experiences(suite: Path) -> dict[str, dict]:
    """Every experience the suite's memory held, from the files: the built pool and what the
    dynamic streams' commit logs added."""
    out = {e["id"]: e for e in lines(suite / "pools" / "p" / "pool" / "experiences.jsonl")}
    for log in (suite / "runs" / "dynamic" / "streams").glob("*/commits.jsonl"):
        for line in lines(log):
            out.update({e["experience"]["id"]: e["experience"] for e in line["events"] if e["op"] == "add"})
    return out


# ---------------------------------------------------------------- the data each page gets

@pytest.mark.slow

def test_overview_rows_are_the_runs_own_metrics_with_intervals_and_notes(suite):
    rows = by_label(Catalog([suite]))
    assert set(rows) == set(LABELS)
    assert {rows[k]["setting"] for k in LABELS} == {"No Memory", "ReMe (fixed)", "ReMe (dynamic)"}
    for label, row in rows.items():
        metrics = json.loads((suite / "runs" / label / "metrics.json").read_text())
        assert row["avg_mean"] == pytest.approx(metrics["avg@2"]["mean"])
        assert row["pass_mean"] == pytest.approx(metrics["pass@2"]["mean"])
        lo, hi = row["avg_ci"]
        assert lo <= row["avg_mean"] <= hi
        assert (row["status"], row["n_units"], row["expected_units"], row["n_errors"]) == ("complete", 6, 6, 0)
        assert row["suite_name"] == suite.name
        assert "scripted server (a test double): not a model result" in row["fidelity"]
    assert rows["dynamic"]["avg_mean"] == 1.0 and rows["dynamic"]["first_avg_mean"] == pytest.approx(2 / 3)
    assert rows["none"]["avg_mean"] == pytest.approx(2 / 3)
    assert "starts from pool p" in rows["fixed"]["fidelity"] and rows["dynamic"]["streams"] == ["s0_r0", "s0_r1"]


@pytest.mark.slow
def test_a_suites_runs_follow_the_order_the_cli_hands_the_viewer(suite):
    """The viewer knows no suite file (it imports nothing from commands/): `reme view` hands it
    `reme ablate`'s order; without one, or where it fails, runs go by name."""
    def order(folder: Path) -> list[str]:
        if folder.name != suite.name:
            raise AssertionError(f"asked the order of {folder}, not of the suite")
        return ["none", "fixed", "dynamic"]

    def labels(catalog: Catalog) -> list[str]:
        return [row["label"] for row in answer(catalog, "index")["runs"]]

    assert labels(Catalog([suite], order)) == ["none", "fixed", "dynamic"]
    assert labels(Catalog([suite])) == ["dynamic", "fixed", "none"]
    assert labels(Catalog([suite], lambda folder: 1 / 0)) == ["dynamic", "fixed", "none"]


@pytest.mark.slow
def test_the_units_table_holds_every_unit_as_recorded(suite):
    catalog = Catalog([suite])
    rows = by_label(catalog)
    for label in LABELS:
        table = answer(catalog, f"units/{rows[label]['id']}")
        records = {t["unit"]: t for t in lines(suite / "runs" / label / "trials.jsonl")}
        assert sorted(table["unit"]) == sorted(records)
        for i, unit in enumerate(table["unit"]):
            assert table["success"][i] == int(records[unit]["success"])
            assert table["retrieved"][i] == len(records[unit]["retrieved_ids"])
        corrupt = [table["success"][i] for i, t in enumerate(table["task"]) if t == CORRUPT]
        assert corrupt == ([1, 1] if label == "dynamic" else [0, 0])  # what the grid's comparison reads


@pytest.mark.slow
def test_a_unit_page_tells_each_retrieved_experience_and_its_counts_then(suite):
    catalog = Catalog([suite])
    rows = by_label(catalog)
    experiences = known_experiences(suite)
    start = {e["id"]: e for e in lines(suite / "pools" / "p" / "pool" / "experiences.jsonl")}
    for label in ("fixed", "dynamic"):
        for record in lines(suite / "runs" / label / "trials.jsonl"):
            unit = answer(catalog, f"unit/{rows[label]['id']}/{record['unit']}")
            assert [r["id"] for r in unit["retrieved"]] == record["retrieved_ids"] != []
            for r, score in zip(unit["retrieved"], record["retrieval_scores"]):
                assert r["title"] == experiences[r["id"]]["when_to_use"]
                assert r["text"] == experiences[r["id"]]["content"] and r["score"] == score
                if label == "fixed":
                    assert {k: r["numbers"][k] for k in ("f", "u")} == {k: start[r["id"]][k] for k in ("f", "u")}
                else:  # recorded when the task retrieved ...
                    assert r["numbers_from"] == "recorded at retrieval"
            # ... and, one worker per stream, what the commit log replays before the unit's commit.
            if label == "dynamic":
                from reme_cli.view.memory import numbers_before

                replayed = numbers_before(catalog.run(rows[label]["id"]), record["unit"])
                assert {r["id"]: r["numbers"] for r in unit["retrieved"]} == \
                    {i: {"f": replayed[i]["f"], "u": replayed[i]["u"]} for i in record["retrieved_ids"]}
            assert unit["first_message"].startswith("Task:\n") and unit["first_message"].endswith(record["guidance"])
            assert record["trajectory"]["user"][0][0] in unit["first_message"]
            assert record["retrieval_s"] is not None and record["retrieval_s"] >= 0


@pytest.mark.slow
def test_the_memory_page_rebuilds_each_stream_from_its_start_and_commits(suite):
    catalog = Catalog([suite])
    rows = by_label(catalog)
    memory = answer(catalog, f"memory/{rows['dynamic']['id']}")
    start = lines(suite / "pools" / "p" / "pool" / "experiences.jsonl")
    records = {t["unit"]: t for t in lines(suite / "runs" / "dynamic" / "trials.jsonl")}
    assert memory["start"]["ids"] == [e["id"] for e in start]
    for stream in memory["streams"]:
        saved = {e["id"]: e for e in lines(suite / "runs" / "dynamic" / "streams" / stream["name"] / "pool" /
                                           "experiences.jsonl")}
        assert sorted(stream["present"]) == sorted(saved)
        for i, e in saved.items():
            assert (stream["numbers"][i]["f"], stream["numbers"][i]["u"]) == (e["f"], e["u"])
        log = lines(suite / "runs" / "dynamic" / "streams" / stream["name"] / "commits.jsonl")
        adds = [[e for e in line["events"] if e["op"] == "add"] for line in log]
        assert stream["timeline"]["unit"] == [line["unit"] for line in log]
        assert stream["timeline"]["added"] == [len(a) for a in adds]
        assert stream["timeline"]["size"][-1] == len(start) + sum(map(len, adds)) == len(saved)
        for line, added in zip(log, adds):
            for e in added:
                life = stream["lives"][e["experience"]["id"]]
                assert (life["added_by"], life["added_seq"]) == (line["unit"], line["seq"])
                assert e["experience"]["origin_task"] == records[line["unit"]]["task_id"]
        for unit in stream["timeline"]["unit"]:
            for i in records[unit]["retrieved_ids"]:
                assert unit in [u for u, _ in stream["lives"][i]["retrieved_by"]]
    fixed = answer(catalog, f"memory/{rows['fixed']['id']}")
    (state,) = fixed["streams"]
    assert state["present"] == [e["id"] for e in start] and state["timeline"] is None
    fixed_records = lines(suite / "runs" / "fixed" / "trials.jsonl")
    for i in state["present"]:
        assert len(state["lives"].get(i, {"retrieved_by": []})["retrieved_by"]) == \
            sum(i in t["retrieved_ids"] for t in fixed_records)


@pytest.mark.slow
def test_health_counts_what_the_files_say(suite):
    catalog = Catalog([suite])
    rows = by_label(catalog)
    dyn = answer(catalog, f"health/{rows['dynamic']['id']}")
    assert dyn["task"]["success"] == 1.0 and dyn["task"]["units"] == 6
    assert dyn["task"]["along_stream"]["position"] == [0, 1, 2]
    adds = sum(e["op"] == "add" for log in (suite / "runs" / "dynamic" / "streams").glob("*/commits.jsonl")
               for line in lines(log) for e in line["events"])
    assert sum(s["adds"] for s in dyn["memory"]["streams"]) == adds > 0
    assert dyn["memory"]["latency_s"]["n"] == 6 and len(dyn["memory"]["best_scores"]) == 6
    assert dyn["memory"]["rewritten"] is None  # memory.rewrite is off (the authors' setting)
    assert 0 <= dyn["memory"]["utility"]["mean"] <= 1
    # Every unit ended in success, so every trial was summarized (a failed one for the next): none raised.
    trials = sum(len(t["method"]["trials"]) for t in lines(suite / "runs" / "dynamic" / "trials.jsonl"))
    assert dyn["task"]["summaries"] == {"summaries": trials, "failed": 0} and trials >= 6
    none = answer(catalog, f"health/{rows['none']['id']}")
    assert none["memory"] is None and none["task"]["success"] == pytest.approx(2 / 3)
    assert none["task"]["summaries"] == {"summaries": 0, "failed": 0}


@pytest.mark.slow
def test_a_run_still_going_shows_new_units_on_reload(suite, tmp_path):
    run = tmp_path / "going"
    shutil.copytree(suite / "runs" / "none", run)
    catalog = Catalog([run])
    assert answer(catalog, "index")["runs"][0]["n_units"] == 6
    record = lines(run / "trials.jsonl")[0]
    with open(run / "trials.jsonl", "a") as f:
        f.write(json.dumps({**record, "unit": "s0/r2/" + record["task_id"], "run": 2}) + "\n")
        f.write('{"unit": "s0/r2/multi_turn_base_1", "task_id": "multi')  # a line being written
    assert answer(catalog, "index")["runs"][0]["n_units"] == 7
    assert "s0/r2/" + record["task_id"] in answer(catalog, f"units/{catalog.runs()[0].id}")["unit"]


# ---------------------------------------------------------------- the server

def _get(url: str, host: str | None = None, method: str = "GET") -> tuple[int, bytes]:
    req = urllib.request.Request(url, method=method, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
def served(suite):
    server = ViewServer(Catalog([suite]), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_the_server_only_reads_and_only_for_loopback_names(served, suite):
    url = served.url
    status, page = _get(url)
    assert status == 200 and b'<meta name="generator" content="reme view">' in page and b'id="reme-data"' not in page
    status, body = _get(url + "api/index")
    runs = json.loads(body)["runs"]
    assert status == 200 and {r["label"] for r in runs} == set(LABELS)
    dyn = next(r for r in runs if r["label"] == "dynamic")
    unit = lines(suite / "runs" / "dynamic" / "trials.jsonl")[0]["unit"]
    status, body = _get(url + f"api/unit/{dyn['id']}/" + urllib.request.quote(unit, safe=""))
    assert status == 200 and json.loads(body)["unit"] == unit
    assert _get(url + "api/unit/r9/nothing")[0] == 404
    assert _get(url + "api/..%2F..%2Fetc%2Fpasswd")[0] == 404
    assert _get(url + "static/../../config.yaml")[0] == 404
    assert _get(url + "api/index", method="POST")[0] == 405
    # A page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) gets nothing.
    status, body = _get(url + "api/index", host="evil.example:80")
    assert status == 403 and b"loopback" in body
    assert _get(url + "api/index", host=f"localhost:{served.server_address[1]}")[0] == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
@pytest.mark.slow
def test_reme_view_serves_until_interrupted(suite, host):
    """The command as a user runs it: the URL on stdout, the page served, Ctrl-C ends it
    cleanly; served beyond this machine, it says what the page shows and that it has no
    authentication."""
    proc = reme_popen(["view", str(suite), "--host", host], cwd=REPO,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith(f"http://{host}:")
        assert _get(url.replace("0.0.0.0", "127.0.0.1") + "api/index")[0] == 200
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()  # no viewer outlives a failed test
    assert proc.returncode == 0 and "Traceback" not in err and "stopped" in err
    warned = " ".join(err.split())
    if host == "0.0.0.0":
        assert "warning: serving on 0.0.0.0" in warned and "prompts and model output" in warned \
            and "no authentication" in warned, err
    else:
        assert "warning" not in warned, err


# ---------------------------------------------------------------- export and bad input

@pytest.mark.slow

def test_export_writes_one_file_and_replaces_only_its_own(suite, reme):
    out = reme.cwd / "view.html"
    proc = reme("view", str(suite), "--export", str(out))
    assert proc.returncode == 0 and proc.stdout.strip() == str(out)
    html = out.read_text()
    assert html.count("<script") == 2 and "http://" not in html.split("<body>", 1)[1].split("reme-data")[0]
    assert 'src="http' not in html and "https://" not in html.split("reme-data")[0]  # nothing from a CDN
    before = out.stat().st_mtime_ns
    assert reme("view", str(suite), "--export", str(out)).returncode == 0 and out.stat().st_mtime_ns != before
    foreign = reme.cwd / "notes.html"
    foreign.write_text("my notes")
    proc = reme("view", str(suite), "--export", str(foreign))
    assert proc.returncode == 2 and "is not a page `reme view` wrote" in proc.stderr
    assert foreign.read_text() == "my notes" and not list(reme.cwd.glob(".notes.html.*"))


@pytest.mark.parametrize("case", ["missing", "no_run", "damaged", "port", "export_dir"])
@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(suite, reme, case):
    args = {"missing": ["view", str(reme.cwd / "nope")],
            "no_run": ["view", str(reme.cwd)],
            "port": ["view", str(suite), "--port", "70000"],
            "export_dir": ["view", str(suite), "--export", str(reme.cwd)]}.get(case)
    if case == "damaged":
        run = reme.cwd / "damaged"
        shutil.copytree(suite / "runs" / "none", run)
        (run / "config.yaml").write_text("::: not yaml :::\n  - [")
        args = ["view", str(run)]
    proc = reme(*args)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    expected = {"missing": "does not exist", "no_run": "no `reme eval` run directories", "damaged": "damaged",
                "port": "--port 70000", "export_dir": "is a directory"}[case]
    assert expected in proc.stderr


# ---------------------------------------------------------------- in a real browser

@pytest.fixture(scope="module")
def browser(suite):
    """(After the suite: Playwright's sync API keeps an event loop running in this thread, and
    reme's commands run their own.)"""
    why = missing()
    if why:
        pytest.skip(why)
    with chromium() as b:
        yield b


def goto(page, url: str, wait: bool = True) -> None:
    """Open ``url`` (or a route of the page already open) and wait until it has rendered."""
    count = page.evaluate("() => Number(document.body && document.body.dataset.rendered || 0)") if \
        page.url.split("#")[0] == url.split("#")[0] else 0
    page.goto(url)
    page.wait_for_function(f"() => Number(document.body.dataset.rendered || 0) > {count}", timeout=60000)


def clicked(page, selector: str) -> None:
    """Click ``selector`` and wait for the page it leads to."""
    count = page.evaluate("() => Number(document.body.dataset.rendered || 0)")
    page.click(selector)
    page.wait_for_function(f"() => Number(document.body.dataset.rendered || 0) > {count}", timeout=60000)


def shoot(page, name: str) -> None:
    """Screenshots for the manual, when asked: REME_VIEW_SCREENSHOTS=docs/images."""
    where = os.environ.get("REME_VIEW_SCREENSHOTS")
    if where:
        page.screenshot(path=str(Path(where) / f"view-{name}.png"))


@pytest.mark.slow
def test_click_through_a_suite_live(browser, served, suite):
    """Overview -> task grid -> the comparison of two rows -> a unit -> an experience -> back."""
    page = browser.new_page(viewport={"width": 1360, "height": 860})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    goto(page, served.url)
    assert page.locator("#overview tr.run-row").count() == 3
    assert page.locator("#banner").is_visible()  # every number here is a test double's
    shoot(page, "overview")
    clicked(page, "#nav-grid")
    ids = {row["label"]: row["id"] for row in by_label(served.catalog).values()}
    assert page.locator("#grid th.task-head").all_inner_texts() == [f"multi_turn_base_{i}" for i in range(3)]
    for select, label in (("#cmp-a", "none"), ("#cmp-b", "dynamic")):
        if page.input_value(select) != ids[label]:  # (A starts at the run without memory)
            count = page.evaluate("() => Number(document.body.dataset.rendered)")
            page.select_option(select, ids[label])
            page.wait_for_function(f"() => Number(document.body.dataset.rendered) > {count}")
    assert page.locator("#cmp-fixed li").evaluate_all("els => els.map(e => e.dataset.task)") == [CORRUPT]
    assert page.locator("#cmp-broke li").count() == 0 and page.locator("#cmp-alone li").count() == 2
    shoot(page, "grid")
    clicked(page, f"#cmp-fixed li[data-task='{CORRUPT}'] a:has-text(\"B's units\")")
    assert page.locator("#units tr.unit-row").count() == 2
    clicked(page, "#units tr.unit-row a >> nth=0")
    assert page.locator("h1").inner_text().startswith(f"Unit s0/r") and CORRUPT in page.locator("h1").inner_text()
    assert "Trials (2)" in page.locator("main").inner_text()  # the failed first trial, then the guided retry
    first = page.locator("table.retrieved-table tr.retrieved >> nth=0")
    exp_id = first.get_attribute("data-id")
    when = known_experiences(suite)[exp_id]["when_to_use"]
    assert when in first.inner_text()
    shoot(page, "unit")
    unit_url = page.url
    clicked(page, f"table.retrieved-table tr.retrieved[data-id='{exp_id}'] a")
    life = page.locator("#life")
    assert exp_id in life.inner_text() and when in life.inner_text() and "retrieved by" in life.inner_text()
    shoot(page, "memory")
    unit = unit_url.split("/")[-1]
    clicked(page, f"#life a[href$='{unit}']")
    assert page.url == unit_url
    clicked(page, "#nav-health")
    assert page.locator("#health tr.health-row").count() == 3
    shoot(page, "health")
    assert errors == []
    page.close()


def _open_offline(browser, html: Path):
    context = browser.new_context(offline=True)
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    goto(page, html.as_uri())
    return context, page, requests, errors


@pytest.mark.parametrize("label", ["fixed", "dynamic"])
@pytest.mark.slow
def test_an_exported_run_opened_from_disk_offline_shows_every_task_and_retrieval(browser, suite, reme, label):
    out = reme.cwd / f"{label}.html"
    assert reme("view", str(suite / "runs" / label), "--export", str(out)).returncode == 0
    context, page, requests, errors = _open_offline(browser, out)
    records = lines(suite / "runs" / label / "trials.jsonl")
    experiences = known_experiences(suite)
    goto(page, out.as_uri() + "#/grid")
    assert set(page.locator("#grid th.task-head").all_inner_texts()) == {t["task_id"] for t in records}
    for record in records:
        goto(page, out.as_uri() + f"#/unit/r0/{urllib.request.quote(record['unit'], safe='')}")
        rows = page.locator("table.retrieved-table tr.retrieved")
        shown = rows.evaluate_all("rs => rs.map(r => [r.dataset.id, r.innerText])")
        assert [i for i, _ in shown] == record["retrieved_ids"]
        for exp_id, text in shown:  # (a page shows a run of spaces as one)
            assert exp_id in text and " ".join(experiences[exp_id]["when_to_use"].split()) in " ".join(text.split())
    assert all(url.startswith("file:") for url in requests), requests
    assert errors == []
    context.close()


@pytest.mark.slow
def test_an_exported_suite_compares_its_rows_offline(browser, suite, reme):
    out = reme.cwd / "suite.html"
    assert reme("view", str(suite), "--export", str(out)).returncode == 0
    context, page, requests, errors = _open_offline(browser, out)
    ids = {r["label"]: r["id"] for r in by_label(Catalog([suite])).values()}
    goto(page, out.as_uri() + f"#/grid?a={ids['none']}&b={ids['fixed']}")
    assert page.locator("#cmp-fixed li").count() == 0 and page.locator("#cmp-alone li").count() == 3
    goto(page, out.as_uri() + f"#/grid?a={ids['none']}&b={ids['dynamic']}")
    assert page.locator("#cmp-fixed li").evaluate_all("els => els.map(e => e.dataset.task)") == [CORRUPT]
    assert all(url.startswith("file:") for url in requests) and errors == []
    context.close()


@pytest.mark.slow
def test_model_output_shows_as_text_never_as_markup(browser, suite, reme):
    """A reply holding HTML and a closing script tag is shown as the characters it is."""
    run = reme.cwd / "hostile"
    shutil.copytree(suite / "runs" / "fixed", run)
    records = lines(run / "trials.jsonl")
    evil = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script>'
    records[0]["trajectory"]["turns"][0][0]["text"] = evil
    records[0]["guidance"] = evil
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = reme.cwd / "hostile.html"
    assert reme("view", str(run), "--export", str(out)).returncode == 0
    context, page, _, errors = _open_offline(browser, out)
    goto(page, out.as_uri() + f"#/unit/r0/{urllib.request.quote(records[0]['unit'], safe='')}")
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("main img").count() == 0
    assert page.locator("main").inner_text().count(evil) >= 2  # the guidance and the step, verbatim
    assert errors == []
    context.close()


@pytest.mark.slow
@pytest.mark.script("bench_view.py")
def test_the_view_benchmark_measures_a_synthetic_run(tmp_path, request):
    """scripts/bench_view.py at a small size: every measure is there (the browser's too, when
    there is one; its absence is said in the table)."""
    bench = script_module("bench_view.py")
    out = tmp_path / "bench.md"
    browser = request.getfixturevalue("browser") if missing() is None else None  # one Playwright per process
    text = bench.main(["--tasks", "4", "--runs", "2", "--seeds", "1", "--pool", "6", "--out", str(out)], browser)
    assert out.read_text() == text and "8 units (4 tasks x 2 runs x 1 seeds)" in text
    for row in ("Overview (reads the 8 records", "its memory (2 streams replayed)", "export (every page"):
        assert row in text
    assert ("| Task grid (4 tasks x 2 rows) |" in text) == (missing() is None)
    assert missing() is None or f"Browser: not measured ({missing()})" in text
