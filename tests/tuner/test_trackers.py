"""MLflow, W&B and TensorBoard on simulated sweeps, read back with each library's own reader:
one run per trial (params, metrics by step, final state, GPU-seconds, dollars) and one for
the sweep (budgets, spend, best trial and value)."""

from __future__ import annotations

import json
import shutil
import struct
import time
from pathlib import Path

import pytest

from tests._sims import Synth
from tuner.sim import simulate

ASHA = {"type": "asha", "min_resource": 1, "max_resource": 9, "reduction_factor": 3}


def _sim(store_dir: Path, loggers, n: int = 5):
    return simulate({"name": "trk", "scheduler": ASHA, "num_trials": n, "metric": "acc",
                     "mode": "max", "provider": {"type": "local", "workers": 2},
                     "loggers": loggers},
                    Synth(9), seed=0, time_budget=None, cost_budget=10.0,
                    store_path=store_dir)


def _curve(run, trial_id):
    return [(r["step"], r["value"]) for r in run.store.reports(trial_id)]


def _same(got, want):
    """Two lists of (step, value): the same steps, the same values (as floats)."""
    assert [s for s, _ in got] == [s for s, _ in want], (got, want)
    assert [v for _, v in got] == pytest.approx([v for _, v in want])


# -- MLflow -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlflow_db(tmp_path_factory):
    """An empty MLflow store: its SQLite schema takes MLflow seconds to create, so each test
    starts from a copy."""
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow") / "empty.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


def _copy(db: Path, to: Path) -> str:
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(db, to)
    return f"sqlite:///{to}"


@pytest.mark.slow   # (MLflow's import takes a few seconds)
def test_mlflow_has_a_run_per_trial_under_the_sweeps_run(tmp_path, monkeypatch, mlflow_db):
    from mlflow import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _copy(mlflow_db, tmp_path / "mlflow" / "mlflow.db")   # (where it writes by default)
    run = _sim(tmp_path, ["mlflow"])
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("trk")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    ids = json.loads((tmp_path / "loggers.json").read_text())
    (stored,) = ids.values()
    (parent,) = [r for r in runs if r.data.tags.get("elastune.kind") == "sweep"]
    assert parent.info.run_id == stored["sweep"] and parent.info.status == "FINISHED"
    trials = {r.data.tags["elastune.trial_id"]: r for r in runs if r is not parent}
    frame = run.trials.set_index("trial_id")
    assert set(trials) == set(frame.index) and len(trials) == 5
    for tid, r in trials.items():
        row = frame.loc[tid]
        assert r.info.run_id == stored[tid] and r.info.run_name == tid
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert r.data.params == {"config": str(row["params.config"])}
        history = client.get_metric_history(r.info.run_id, "acc")
        _same(sorted((m.step, m.value) for m in history), _curve(run, tid))
        assert r.data.tags["elastune.state"] == row["state"]
        assert r.info.status == ("FINISHED" if row["state"] in ("completed", "pruned")
                                 else "FAILED")
        assert r.data.metrics["gpu_seconds"] == pytest.approx(row["gpu_seconds"])
        assert r.data.metrics["cost_usd"] == pytest.approx(row["cost_usd"])
    metrics, tags = parent.data.metrics, parent.data.tags
    assert metrics["cost_budget_usd"] == 10.0 and "time_budget_s" not in metrics
    assert metrics["spend_usd"] == pytest.approx(run.spend_usd)
    assert metrics["best_value"] == pytest.approx(run.best_value)
    assert tags["elastune.best_trial_id"] == run.outcome.best_trial_id
    assert tags["elastune.best_run_id"] == stored[run.outcome.best_trial_id]
    assert parent.data.params["scheduler.type"] == "asha" and parent.data.params["metric"] \
        == "acc"


@pytest.mark.slow
def test_mlflow_continues_the_runs_of_a_resumed_sweep(tmp_path, monkeypatch, mlflow_db):
    # The tracker as the hooks drive it over two runs of one experiment: stopped with t0002
    # unfinished, then resumed (a new tracker, as a new process makes). The first finds its
    # store in MLFLOW_TRACKING_URI, the second is given it.
    from mlflow import MlflowClient

    from tuner._hooks import SweepInfo, SweepSummary, TrialInfo
    from tuner.loggers import MLflowLogger

    uri = _copy(mlflow_db, tmp_path / "m.db")
    one, two = TrialInfo("t0001", 1, {"lr": 0.1}), TrialInfo("t0002", 2, {"lr": 0.2})

    def summary(state, spend):
        return SweepSummary(state, "done", None, spend, 10.0, None, 1.0, "t0001", 0.5,
                            {"lr": 0.1}, {"pruned": 1})

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    options = {"experiment_name": "mine", "tags": {"team": "ml"}, "experiment_dir": tmp_path}
    first = MLflowLogger(**options)
    first.on_sweep_start(SweepInfo("e", "trk", "acc", "max", None, 1.0, {}, tmp_path))
    for trial in (one, two):
        first.on_trial_start(trial)
        first.on_result(trial, 1, {"acc": 0.1 * trial.number})
    first.on_trial_end(one, "pruned", 5.0, 0.01)
    first.on_trial_end(two, "stopped", 5.0, 0.01)
    first.on_sweep_end(summary("stopped", 0.02))
    client = MlflowClient(tracking_uri=uri)
    runs = {r.info.run_name: r for r in client.search_runs(
        [client.get_experiment_by_name("mine").experiment_id])}
    assert runs["t0002"].info.status == "KILLED" and runs["e"].info.status == "KILLED"
    assert all(r.data.tags["team"] == "ml" for r in runs.values())

    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    again = MLflowLogger(tracking_uri=uri, **options)
    again.on_sweep_start(SweepInfo("e", "trk", "acc", "max", None, 2.0, {}, tmp_path))
    again.on_result(two, 2, {"acc": 0.4})            # (no on_trial_start: it was started)
    again.on_trial_end(TrialInfo("t0002", 2, {"lr": 0.2}, step=2), "completed", 9.0, 0.02)
    again.on_sweep_end(summary("finished", 0.05))
    after = {r.info.run_name: r for r in client.search_runs(
        [client.get_experiment_by_name("mine").experiment_id])}
    assert {k: r.info.run_id for k, r in after.items()} == {
        k: r.info.run_id for k, r in runs.items()}   # the same three runs
    assert after["t0002"].info.status == "FINISHED" and after["e"].info.status == "FINISHED"
    history = client.get_metric_history(after["t0002"].info.run_id, "acc")
    assert [(m.step, m.value) for m in history] == [(1, pytest.approx(0.2)), (2, 0.4)]
    budget = client.get_metric_history(after["e"].info.run_id, "cost_budget_usd")
    spend = client.get_metric_history(after["e"].info.run_id, "spend_usd")
    assert [(m.step, m.value) for m in budget] == [(0, 1.0), (1, 2.0)]
    assert [(m.step, m.value) for m in spend] == [(0, 0.02), (1, 0.05)]
    assert not (tmp_path / "mlflow").exists()       # (the default store is not made)


# -- W&B ----------------------------------------------------------------------------------
def wandb_records(path: Path):
    """The records of a ``.wandb`` file, as W&B's own protobuf ``Record``s.

    The SDK (0.31) ships no Python reader of its transaction log any more (the Go core
    writes it), so the framing is read here: a 7-byte header (``:W&B``, magic, version),
    then LevelDB's log format (32 KiB blocks; each chunk has a crc32c, a length and a type:
    1 full, 2 first, 3 middle, 4 last)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pos += 7
        if kind == 0:
            break
        pending += data[pos:pos + length]
        pos += length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)   # (newer SDKs fill nested_key only)


def wandb_run(folder: Path) -> dict:
    """One offline run: its id, name, config, history rows, summary and exit code (once its
    file holds the run's exit: W&B's service process writes the file, at times a moment
    after ``finish()`` has returned)."""
    (path,) = folder.glob("*.wandb")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kinds = [r.WhichOneof("record_type") for r in wandb_records(path)]
        if kinds and kinds[-1] == "exit":
            break
        time.sleep(0.1)
    out: dict = {"history": [], "summary": {}, "config": {}}
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["id"], out["name"] = record.run.run_id, record.run.display_name
            out["config"] = {i.key: json.loads(i.value_json) for i in record.run.config.update
                             if not i.key.startswith("_")}
        elif kind == "history":
            out["history"].append({_key(i): json.loads(i.value_json)
                                   for i in record.history.item})
        elif kind == "summary":
            out["summary"].update({_key(i): json.loads(i.value_json)
                                   for i in record.summary.update})
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
    return out


@pytest.mark.slow   # (W&B starts its service and a run per trial: a few seconds)
def test_wandb_offline_has_a_run_per_trial_and_one_for_the_sweep(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = _sim(tmp_path, ["wandb"], n=3)
    (stored,) = json.loads((tmp_path / "loggers.json").read_text()).values()
    runs = {r["name"]: r for r in map(wandb_run, (tmp_path / "wandb").glob("offline-run-*"))}
    frame = run.trials.set_index("trial_id")
    assert set(runs) == {*frame.index, "sim"}
    for tid, row in frame.iterrows():
        r = runs[tid]
        assert r["id"] == stored[tid] and r["config"] == {"config": row["params.config"]}
        _same(sorted((h["step"], h["acc"]) for h in r["history"]), _curve(run, tid))
        assert r["summary"]["state"] == row["state"]
        assert r["summary"]["gpu_seconds"] == pytest.approx(row["gpu_seconds"])
        assert r["summary"]["cost_usd"] == pytest.approx(row["cost_usd"])
        assert r["exit_code"] == 0
    sweep = runs["sim"]
    assert sweep["id"] == stored["sweep"] and sweep["config"]["scheduler.type"] == "asha"
    summary = sweep["summary"]
    assert summary["cost_budget_usd"] == 10.0 and summary["spend_usd"] == pytest.approx(
        run.spend_usd)
    assert summary["best_trial_id"] == run.outcome.best_trial_id
    assert summary["best_value"] == pytest.approx(run.best_value)
    assert summary["state"] == "finished"

    # A resumed sweep (a new tracker over the same experiment) logs on under the same ids.
    from tuner._hooks import SweepInfo, SweepSummary, TrialInfo
    from tuner.loggers import WandbLogger

    time.sleep(1.1)   # (W&B names a run's folder by the second it starts: a later one)
    again = WandbLogger(experiment_dir=tmp_path)
    again.on_sweep_start(SweepInfo("sim", "trk", "acc", "max", None, 10.0, {}, tmp_path))
    again.on_result(TrialInfo("t0001", 1, {"config": 0}), 99, {"acc": 1.0})
    again.on_trial_end(TrialInfo("t0001", 1, {"config": 0}, step=99), "completed", 1.0, 0.1)
    again.on_sweep_end(SweepSummary("finished", "done", None, 1.0, 1.0, None, 10.0, "t0001",
                                    1.0, {"config": 0}, {"completed": 1}))
    runs = [wandb_run(f) for f in (tmp_path / "wandb").glob("offline-run-*")]
    assert len(runs) == 3 + 1 + 2 and {r["id"] for r in runs} == set(stored.values())
    (resumed,) = [r for r in runs if r["id"] == stored["t0001"] and
                  any(h["step"] == 99 for h in r["history"])]
    assert resumed["summary"]["state"] == "completed"


# -- TensorBoard --------------------------------------------------------------------------
@pytest.mark.slow   # (importing TensorBoard's reader takes over a second)
def test_tensorboard_has_a_folder_per_trial_and_one_for_the_sweep(tmp_path):
    pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    run = _sim(tmp_path, ["tensorboard"], n=4)
    root = tmp_path / "tensorboard"
    frame = run.trials.set_index("trial_id")
    assert {p.name for p in root.iterdir()} == {*frame.index, "sweep"}
    for tid, row in frame.iterrows():
        events = EventAccumulator(str(root / tid)).Reload()
        scalars = {tag: [(e.step, e.value) for e in events.Scalars(tag)]
                   for tag in events.Tags()["scalars"]}
        _same(scalars["acc"], _curve(run, tid))
        _same(scalars["gpu_seconds"], [(row["last_step"], row["gpu_seconds"])])
        _same(scalars["cost_usd"], [(row["last_step"], row["cost_usd"])])
        hparams = events.PluginTagToContent("hparams")
        start = plugin_data_pb2.HParamsPluginData.FromString(
            hparams["_hparams_/session_start_info"]).session_start_info
        assert start.hparams["config"].number_value == row["params.config"]
        assert "state/text_summary" in events.Tags()["tensors"]
    sweep = EventAccumulator(str(root / "sweep")).Reload()
    values = {tag: sweep.Scalars(tag)[-1].value for tag in sweep.Tags()["scalars"]}
    assert values["cost_budget_usd"] == 10.0
    assert values["spend_usd"] == pytest.approx(run.spend_usd)
    assert values["best_value"] == pytest.approx(run.best_value)
