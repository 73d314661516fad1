"""End to end: a sweep on real workers logs to CSV and MLflow, is stopped part way and
resumed, and each tracker holds one run per trial (continued, not started again) with each
step once."""

from __future__ import annotations

import csv
import importlib.util
import json

import pytest

from tuner import resume, tune, uniform
from tuner._store import Store


def _rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_stopped_and_resumed_sweep_continues_its_tracker_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    exp = tmp_path / "exp"
    with_mlflow = importlib.util.find_spec("mlflow") is not None
    loggers = ["csv", "mlflow"] if with_mlflow else ["csv"]

    def stop_part_way(snapshot):
        if snapshot["total"] >= 2:
            (exp / "STOP").touch()   # what ``elastune stop`` writes

    sweep = {"name": "trk", "trainable": "tests.trainables:quadratic", "metric": "score",
             "mode": "max", "space": {"x": uniform(0.0, 1.0), "sleep": 0.3},
             "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                           "reduction_factor": 3},
             "num_trials": 5, "seed": 3, "provider": {"type": "local", "workers": 2},
             "loggers": loggers}
    first = tune(sweep, time_budget="2m", cost_budget=1.0, experiment_dir=exp,
                 observer=stop_part_way)
    assert first.state == "stopped" and first.trials.shape[0] < 5
    assert first.status["logger_errors"] == {}
    (sweep_row,) = _rows(exp / "csv" / "sweep.csv")
    assert sweep_row["state"] == "stopped"
    again = resume(exp, time_budget="3m", cost_budget=1.0)
    assert again.state == "finished" and again.trials.shape[0] == 5
    assert again.status["logger_errors"] == {}

    store = Store(exp, readonly=True)
    frame = again.trials.set_index("trial_id")
    trials = {r["trial_id"]: r for r in _rows(exp / "csv" / "trials.csv")}
    assert set(trials) == set(frame.index)
    for tid, row in frame.iterrows():
        assert trials[tid]["state"] == row["state"]
        steps = [int(r["step"]) for r in _rows(exp / "csv" / f"{tid}.csv")]
        assert sorted(steps) == [r["step"] for r in store.reports(tid)], tid
    (sweep_row,) = _rows(exp / "csv" / "sweep.csv")
    assert sweep_row["state"] == "finished" and sweep_row["best_trial_id"] == \
        again.best_trial_id

    if not with_mlflow:
        return
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{exp / 'mlflow' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("trk").experiment_id])
    (ids,) = [v for k, v in json.loads((exp / "loggers.json").read_text()).items()
              if " mlflow " in k]
    assert len(runs) == 5 + 1                       # continued on resume, never started twice
    assert {r.info.run_id for r in runs} == {ids[k] for k in [*frame.index, "sweep"]}
    for r in runs:
        tid = r.data.tags.get("elastune.trial_id")
        if tid is None:                             # the sweep's run: both runs' spend
            spend = client.get_metric_history(r.info.run_id, "spend_usd")
            assert [m.step for m in spend] == [0, 1]
            assert spend[-1].value == pytest.approx(again.spend_usd, abs=1e-6)
            assert r.info.status == "FINISHED"
            continue
        history = client.get_metric_history(r.info.run_id, "score")
        assert sorted(m.step for m in history) == [x["step"] for x in store.reports(tid)]
        assert r.info.status in ("FINISHED", "FAILED"), (tid, r.info.status)
        assert r.data.tags["elastune.state"] == frame.loc[tid, "state"]
