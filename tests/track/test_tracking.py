"""Experiment trackers (``tracker=mlflow|wandb``) through the real CLI, against the scripted
server (a TEST DOUBLE: it replays BFCL's ground truth, so its numbers are not model results),
with the real MLflow (its SQLite store, read back with MLflow's own client) and the real W&B
(offline, its run file read back in W&B's own record format)."""

from __future__ import annotations

import json
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_cli.bench.bfcl.scripted import BFCLReplayPolicy
from reme_cli.core.config import compose, config_hash
from reme_cli.testing.scripted_server import AgentAndSummarizerPolicy, ScriptedServer, ScriptedSummarizerPolicy
from tests.conftest import reme_env, reme_popen, reme_process, run_reme, scripted_server_process

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ["model=qwen3-8b", "embedding=minilm", "llm.model=replay", "llm.cache=false", "benchmark.release=current"]
SMALL = ["benchmark.limit=2", "eval.runs=1"]


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(AgentAndSummarizerPolicy(BFCLReplayPolicy(), ScriptedSummarizerPolicy())) as srv:
        yield srv


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> Path:
    """The authors' released BFCL pool, imported once for the module's runs."""
    where = tmp_path_factory.mktemp("pool")
    run_reme(["pool", "import", "official:bfcl/qwen3-8b", "--out", str(where / "pool"), "model=qwen3-8b",
              "embedding=minilm"], where, check=True)
    return where / "pool"


def mlflow_runs(db: Path) -> tuple[object, list]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("reme")
    return client, ([] if experiment is None else client.search_runs([experiment.experiment_id]))


def last_path(proc: subprocess.CompletedProcess, cwd: Path) -> Path:
    path = Path(proc.stdout.strip().splitlines()[-1])
    return path if path.is_absolute() else cwd / path


def trials(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_an_eval_logs_params_metrics_tags_series_and_files_to_mlflow(reme, server, pool):
    proc = reme("eval", "--mode", "dynamic", *REPLAY, *SMALL, "eval.seeds=2", f"llm.base_url={server.base_url}",
                f"memory.pool={pool}", "tracker=mlflow", check=True)
    run = last_path(proc, reme.cwd)
    client, found = mlflow_runs(reme.cwd / "runs" / "mlflow.db")  # the default store: sqlite beside the runs
    (logged,) = found
    manifest = json.loads((run / "manifest.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    assert logged.info.run_name == run.name and logged.info.status == "FINISHED"
    assert manifest["trackers"] == {f"sqlite:///{(reme.cwd / 'runs' / 'mlflow.db').resolve()}": {
        "name": "mlflow", "run_id": logged.info.run_id, "series": True}}
    # params: the flattened resolved config, the hash, the packages (the BFCL release's), the pool's provenance
    params = logged.data.params
    assert params["eval.mode"] == "dynamic" and params["memory.top_k"] == "5" and params["benchmark.release"] == "current"
    assert params["run.hash"] == manifest["config_hash"] and params["packages.bfcl-eval"] == manifest["packages"]["bfcl-eval"]
    assert params["pool.source"] == "official:bfcl/qwen3-8b" and params["pool.kind"] == "import_official"
    assert not any(k.startswith("tracker.") for k in params)
    # metrics: Avg@k / Pass@k mean and per seed, first-trial, stop reasons, tokens and time
    m = logged.data.metrics
    assert m["avg_at_1/mean"] == metrics["avg@1"]["mean"] and m["pass_at_1/std"] == metrics["pass@1"]["std"]
    assert m["per_seed/1/avg_at_1"] == metrics["per_seed"]["1"]["avg@1"]
    assert m["first_attempt/avg_at_1/mean"] == metrics["first_attempt"]["avg@1"]["mean"]
    assert m["stop_reasons/answered"] == metrics["stop_reasons"]["answered"] == 4
    units = trials(run)
    assert m["tokens/prompt"] == sum(t["tokens"]["prompt"] for t in units) > 0
    assert m["time/llm_s"] == pytest.approx(sum(t["llm_latency_s"] for t in units), abs=1e-3)
    # the pool along each stream, one point per position
    for seed in (0, 1):
        history = sorted((p.step, p.value) for p in client.get_metric_history(logged.info.run_id,
                                                                              f"stream/pool_size/s{seed}_r0"))
        assert history == sorted((t["position"], float(t["method"]["pool_size"])) for t in units if t["seed"] == seed)
        assert len(history) == 2
    # tags: where the numbers come from
    tags = logged.data.tags
    assert tags["scripted server"] == "true" and "not model results" in tags["reme.test_double"]
    assert "benchmark.release=current (authors: paper)" in tags["reme.fidelity"]
    assert tags["reme.status"] == "complete" and tags["reme.path"] == str(run.resolve())
    # files, in a hidden store beside the database: out of the way of the folders runs are read from
    assert {a.path for a in client.list_artifacts(logged.info.run_id)} == {
        "config.yaml", "manifest.json", "metrics.json", "metrics.csv"}
    assert client.get_experiment_by_name("reme").artifact_location == (reme.cwd / "runs" / ".mlartifacts").as_uri()
    assert sorted(p.name for p in (reme.cwd / "runs").iterdir() if not p.name.startswith(".")) == ["default", "mlflow.db"]
    copy = Path(client.download_artifacts(logged.info.run_id, "metrics.json", str(reme.cwd)))
    assert json.loads(copy.read_text()) == metrics
    assert_the_docs_mlflow_ui_opens(reme.cwd / "runs" / "mlflow.db")


# The UI's install command, as the docs and the README name it.
UI_INSTALL = re.compile(r"pip install -c constraints\.txt mlflow==([0-9][0-9a-z.]*)")


def assert_the_docs_mlflow_ui_opens(db: Path) -> None:
    """The MLflow the docs name for the UI opens the store reme wrote. Its UI server is the full
    `mlflow` package at the client's version, which runs mlflow-skinny's store code of that
    version (mlflow==X requires mlflow-skinny==X); that code's own schema check, the one `mlflow
    ui` runs when it opens a store, passes here. (The UI's web server itself, Flask and pyarrow,
    is not installed in the tests: `mlflow ui` was started on such a store by hand, see
    docs/tracking.md.)"""
    from importlib import metadata

    from mlflow.store.db.utils import _get_latest_schema_revision, _get_schema_version, _verify_schema
    from sqlalchemy import create_engine

    (version,) = set(UI_INSTALL.findall((ROOT / "docs" / "tracking.md").read_text()))
    assert version == metadata.version("mlflow-skinny")
    engine = create_engine(f"sqlite:///{db}")
    try:
        _verify_schema(engine)  # raises MlflowException on a schema this MLflow does not know
        assert _get_schema_version(engine) == _get_latest_schema_revision()
    finally:
        engine.dispose()


def test_the_docs_install_mlflows_ui_at_the_version_of_the_client_reme_pins():
    """An unpinned `pip install mlflow` resolved an MLflow older than reme's client (the full
    MLflow at the client's version did not install), whose UI refused the store's newer schema:
    every place that tells a user how to get the UI names the client's pinned version."""
    texts = {p: (ROOT / p).read_text() for p in ("README.md", "docs/tracking.md", "configs/tracker/mlflow.yaml")}
    named = {p: set(UI_INSTALL.findall(t)) for p, t in texts.items()}
    pins = {p: re.findall(r"^mlflow-skinny==(\S+)$", (ROOT / p).read_text(), re.M)
            for p in ("constraints.txt", "constraints-gpu.txt")}
    (pin,) = set(pins["constraints.txt"])
    assert pins["constraints-gpu.txt"] == [pin]
    assert named == {p: {pin} for p in texts}, named
    for p, text in texts.items():
        assert not re.search(r"pip install mlflow(?![=-])", text), f"{p} names the UI unpinned"


def test_the_tracker_is_out_of_the_run_hash():
    """Logging a run somewhere changes nothing it computes: the same run directory resumes."""
    plain = compose(["model=qwen3-8b"])
    assert config_hash(plain) == config_hash(compose(["model=qwen3-8b", "tracker=mlflow"])) \
        == config_hash(compose(["model=qwen3-8b", "tracker=wandb", "tracker.project=x"]))
    assert compose(["tracker=mlflow", "runs_root=/data/runs"]).tracker.uri == "sqlite:////data/runs/mlflow.db"


@pytest.mark.slow
def test_kill_9_and_resume_keep_one_mlflow_run(tmp_path):
    with scripted_server_process("--policy", "bfcl-replay", "--delay", "0.15") as url:
        args = ["eval", *REPLAY, f"llm.base_url={url}", "benchmark.limit=6", "eval.runs=2", "eval.seeds=1",
                "llm.concurrency=2", "out_dir=run", "tracker=mlflow"]
        env = reme_env(tmp_path / "cache")
        proc = reme_popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        records = tmp_path / "run" / "trials.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and not (records.exists() and len(records.read_text().splitlines()) >= 3):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert 3 <= len(trials(tmp_path / "run")) < 12, "the kill must land mid-run"
        _, (before,) = mlflow_runs(tmp_path / "runs" / "mlflow.db")
        assert before.info.status == "RUNNING"  # nobody could say otherwise
        done = reme_process(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    _, (after,) = mlflow_runs(tmp_path / "runs" / "mlflow.db")
    assert after.info.run_id == before.info.run_id and after.info.status == "FINISHED"
    assert after.data.metrics["units"] == 12 and after.data.metrics["avg_at_2/mean"] == 1.0


@pytest.mark.slow
def test_an_ablate_suite_is_one_parent_run_with_a_child_per_run(reme, server):
    suite = reme.cwd / "mine.yaml"
    suite.write_text("table: topk\npools: {released: official}\n"
                     "variants:\n  none: {mode: none}\n  fixed: {mode: fixed, pool: released}\n")
    args = ("ablate", str(suite), *REPLAY, f"llm.base_url={server.base_url}", *SMALL, "eval.seeds=1", "tracker=mlflow")
    reme(*args, check=True)
    client, found = mlflow_runs(reme.cwd / "runs" / "mlflow.db")
    (parent,) = [r for r in found if r.data.tags.get("reme.kind") == "suite"]
    children = {r.info.run_name: r for r in found if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert set(children) == {"none", "fixed"} and len(found) == 3
    assert parent.info.run_name == "mine-bfcl_v3-qwen3-8b" and parent.info.status == "FINISHED"
    assert parent.data.metrics["fixed/avg_at_1"] == children["fixed"].data.metrics["avg_at_1/mean"] == 1.0
    assert children["fixed"].data.params["memory.pool"].endswith("pools/released")
    files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"report", "view.html"} <= files
    assert "report/report.md" in {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    reme(*args, check=True)  # a rerun continues the same parent and children
    _, again = mlflow_runs(reme.cwd / "runs" / "mlflow.db")
    assert {r.info.run_id for r in again} == {r.info.run_id for r in found}


def wandb_records(run_file: Path) -> list:
    """The records of a W&B run file (``run-ID.wandb``): W&B's own protobuf ``Record``s in the
    LevelDB log framing W&B writes them in (a 7-byte header, then 32 KiB blocks of chunks)."""
    from wandb.proto import wandb_internal_pb2

    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, buf, out = 32768, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        buf += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(buf)
            out.append(record)
            buf = b""
    return out


@pytest.mark.slow
def test_wandb_offline_writes_a_run_whose_summary_holds_the_metrics(reme, server, pool):
    proc = reme("eval", "--mode", "fixed", *REPLAY, *SMALL, "eval.seeds=1", f"llm.base_url={server.base_url}",
                f"memory.pool={pool}", "tracker=wandb", check=True)
    run = last_path(proc, reme.cwd)
    assert "wandb" not in proc.stderr.lower()  # W&B keeps off reme's terminal
    (entry,) = json.loads((run / "manifest.json").read_text())["trackers"].values()
    (folder,) = (reme.cwd / "runs" / ".wandb" / "wandb").glob(f"offline-run-*-{entry['run_id']}")  # hidden
    records = wandb_records(folder / f"run-{entry['run_id']}.wandb")
    summary: dict = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update({"/".join([i.key, *i.nested_key]).strip("/"): json.loads(i.value_json) for i in r.summary.update})
    metrics = json.loads((run / "metrics.json").read_text())
    assert summary["avg@1/mean"] == metrics["avg@1"]["mean"] == 1.0 and summary["units"] == 2
    (started,) = {r.run.display_name for r in records if r.WhichOneof("record_type") == "run"}
    assert started == run.name
    saved = {f.path for r in records if r.WhichOneof("record_type") == "files" for f in r.files.files}
    assert {"metrics.json", "config.yaml", "manifest.json", "metrics.csv"} <= saved
    assert json.loads((folder / "files" / "metrics.json").read_text()) == metrics


@pytest.mark.slow
def test_a_trackers_copies_of_a_run_are_not_runs(reme, server):
    """MLflow's artifacts and W&B's run files hold copies of a run's config.yaml and
    manifest.json. Stores where an earlier reme kept them, in plain folders of runs/
    (runs/mlartifacts, runs/wandb), are not read as runs: the report, the viewer and
    `reme track sync` find the one run, and the MLflow run stays pointed at it."""
    from mlflow.tracking import MlflowClient

    from reme_cli.core.run_log import find_runs
    from reme_cli.view.runs import Catalog

    runs = reme.cwd / "runs"
    runs.mkdir()
    MlflowClient(tracking_uri=f"sqlite:///{runs / 'mlflow.db'}").create_experiment(
        "reme", artifact_location=(runs / "mlartifacts").as_uri())  # the store as reme made it before
    run = last_path(reme("eval", *REPLAY, *SMALL, "eval.seeds=1", f"llm.base_url={server.base_url}",
                         "tracker=mlflow", check=True), reme.cwd).resolve()
    reme("track", "sync", "runs", "tracker=wandb", "tracker.dir=runs", check=True)  # W&B's files in runs/wandb
    copies = [p.parent for p in runs.rglob("manifest.json") if p.parent != run]
    assert {"artifacts", "files"} <= {c.name for c in copies}  # MLflow's and W&B's copies are there

    assert find_runs([runs]) == [run]
    assert Catalog([runs]).paths == [run]
    reme("report", "runs", check=True)
    assert json.loads((runs / "report" / "REME_REPORT").read_text())["runs"] == [str(run)]
    synced = reme("track", "sync", "runs", "tracker=mlflow", check=True)
    assert synced.stdout.split() == [str(run)]
    _, (logged,) = mlflow_runs(runs / "mlflow.db")
    assert logged.data.tags["reme.path"] == str(run)


@pytest.mark.slow
def test_an_unreachable_tracker_costs_one_warning_and_the_run_exits_0(reme, server):
    proc = reme("eval", *REPLAY, *SMALL, "eval.seeds=2", f"llm.base_url={server.base_url}", "tracker=mlflow",
                "tracker.uri=http://127.0.0.1:9", "tracker.timeout=2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("warning:") == 1 and "tracker mlflow failed" in proc.stderr
    run = last_path(proc, reme.cwd)
    assert json.loads((run / "metrics.json").read_text())["units"] == 4
    assert "trackers" not in json.loads((run / "manifest.json").read_text())


def test_a_missing_tracker_package_is_refused_before_anything_runs(reme, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if MLflow were not installed
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    proc = reme("eval", *REPLAY, "llm.base_url=http://127.0.0.1:9/v1", "tracker=mlflow", "out_dir=run")
    assert proc.returncode == 2 and proc.stderr.startswith("error: tracker=mlflow needs MLflow: pip install")
    assert not (reme.cwd / "run").exists()


@pytest.mark.slow
def test_track_sync_logs_finished_runs_after_the_fact_once(reme, server):
    proc = reme("eval", *REPLAY, *SMALL, "eval.seeds=1", f"llm.base_url={server.base_url}", check=True)
    run = last_path(proc, reme.cwd)
    synced = reme("track", "sync", "runs", "tracker=mlflow", check=True)
    assert synced.stdout.split() == [str(run.resolve())]
    _, (logged,) = mlflow_runs(reme.cwd / "runs" / "mlflow.db")
    assert logged.info.run_name == run.name and logged.data.metrics["avg_at_1/mean"] == 1.0
    assert logged.data.params["run.hash"] == json.loads((run / "manifest.json").read_text())["config_hash"]
    reme("track", "sync", "runs", "tracker=mlflow", check=True)  # continues the same run
    _, again = mlflow_runs(reme.cwd / "runs" / "mlflow.db")
    assert [r.info.run_id for r in again] == [logged.info.run_id]
    bad = reme("track", "sync", "runs")
    assert bad.returncode == 2 and "tracker=mlflow" in bad.stderr
