"""End to end: a sweep on real workers logs to CSV, is stopped part way and resumed, and its
files hold each trial once with each step once (what MLflow, W&B and TensorBoard write is
checked on simulated sweeps: tests/tuner/test_trackers.py)."""

from __future__ import annotations

import csv

import pytest

from tuner import resume, tune, uniform
from tuner._store import Store


def _rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_stopped_and_resumed_sweep_continues_its_csv_files(tmp_path):
    exp = tmp_path / "exp"

    def stop_part_way(snapshot):
        if snapshot["total"] >= 1:
            (exp / "STOP").touch()   # what ``elastune stop`` writes

    sweep = {"name": "trk", "trainable": "tests.trainables:quadratic", "metric": "score",
             "mode": "max", "space": {"x": uniform(0.0, 1.0), "sleep": 0.4},
             "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                           "reduction_factor": 3},
             "num_trials": 5, "seed": 3, "provider": {"type": "local", "workers": 2},
             "loggers": ["csv"]}
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
