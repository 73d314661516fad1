"""A sweep's ``loggers``: the config at the edge, the controller's hooks (each (trial, step)
once, a failing tracker loud but harmless) and the CSV tracker, on simulated sweeps."""

from __future__ import annotations

import csv
import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from tests._sims import Synth
from tuner import ConfigError, load_sweep
from tuner.cli import main
from tuner.sim import SimFaults, simulate

BASE = {"trainable": "operator:add", "metric": "acc",
        "space": {"lr": {"loguniform": [1e-4, 0.1]}}, "scheduler": {"max_resource": 9},
        "budget": {"time": "10m"}}
ASHA = {"type": "asha", "min_resource": 1, "max_resource": 9, "reduction_factor": 3}


def _sim(store_dir: Path, loggers, n: int = 6, **kw):
    return simulate({"scheduler": ASHA, "num_trials": n, "metric": "acc", "mode": "max",
                     "provider": {"type": "local", "workers": 2}, "loggers": loggers},
                    Synth(9), seed=0, time_budget=None, cost_budget=10.0,
                    store_path=store_dir, **kw)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# -- the config ---------------------------------------------------------------------------
def test_loggers_by_name_or_with_options_round_trip_through_the_store():
    cfg = load_sweep(BASE, loggers=["mlflow", {"csv": {"dir": "out"}},
                                    {"wandb": {"project": "p", "mode": "offline"}}])
    assert [e.name for e in cfg.loggers] == ["mlflow", "csv", "wandb"]
    stored = json.loads(json.dumps(cfg.to_json_dict()))
    assert stored["loggers"] == ["mlflow", {"csv": {"dir": "out"}}, {"wandb": {"project": "p"}}]
    assert load_sweep(stored).loggers == cfg.loggers
    assert load_sweep(BASE).loggers == [] and load_sweep(BASE, loggers="csv").loggers[0].name \
        == "csv"


@pytest.mark.parametrize(("loggers", "field", "words"), [
    (["mlfow"], "loggers[0]", "(did you mean 'mlflow'?); allowed: mlflow, wandb, tensorboard, csv"),
    (["csv", "neptune"], "loggers[1]", "allowed: mlflow, wandb, tensorboard, csv"),
    ([{"mlflow": {"uri": "x"}}], "loggers[0].mlflow.uri", "allowed: tracking_uri"),
    ([{"wandb": {"mode": "cloud"}}], "loggers[0].wandb.mode", "'offline' or 'online'"),
    ([{"mlflow": {"tags": ["a"]}}], "loggers[0].mlflow.tags", "dictionary"),
    ([{"csv": "out"}], "loggers[0].csv", "expected a mapping of options"),
    (["csv", "csv"], "loggers[1]", "csv is given twice"),
    ([{"csv": {}, "mlflow": {}}], "loggers[0]", "one mapping of a name"),
    (5, "loggers", "expected a list"),
])
def test_bad_loggers_name_the_entry(loggers, field, words):
    with pytest.raises(ConfigError) as err:
        load_sweep(BASE, loggers=loggers)
    assert err.value.field == field and words in err.value.message, str(err.value)


def test_a_tracker_whose_library_is_missing_says_which_extra_to_install(tmp_path, capsys,
                                                                         monkeypatch):
    import tuner._extras as extras

    real = extras.find_spec
    monkeypatch.setattr(extras, "find_spec",
                        lambda name: None if name == "mlflow" else real(name))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("trainable: tests.trainables:quadratic\nmetric: score\n"
                     "space: {x: {uniform: [0.0, 1.0]}}\n"
                     "scheduler: {type: asha, min_resource: 1, max_resource: 3}\n"
                     "num_trials: 2\nbudget: {time: 2m, cost: 1.0}\nloggers: [csv, mlflow]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(sweep), "--json"]) == 2
    err = capsys.readouterr().err
    assert "loggers[1]" in err and "pip install 'elastune[mlflow]'" in err, err
    assert not (tmp_path / "experiments").exists()


def test_a_simulation_kept_in_memory_needs_a_folder_for_its_tracker():
    with pytest.raises(ConfigError) as err:
        simulate({"scheduler": ASHA, "num_trials": 2, "metric": "acc",
                  "loggers": ["csv"]}, Synth(9), seed=0, time_budget=None, cost_budget=1.0)
    assert err.value.field == "loggers[0]" and "dir" in err.value.message
    run = simulate({"scheduler": ASHA, "num_trials": 2, "metric": "acc"}, Synth(9), seed=0,
                   time_budget=None, cost_budget=1.0)   # (no loggers: nothing asked)
    assert str(run.outcome.state) == "finished"


# -- the CSV tracker and the hooks --------------------------------------------------------
def test_csv_writes_each_trial_by_step_the_trials_and_the_sweep(tmp_path):
    run = _sim(tmp_path, ["csv"])
    out = tmp_path / "csv"
    trials = {r["trial_id"]: r for r in _rows(out / "trials.csv")}
    frame = run.trials.set_index("trial_id")
    assert set(trials) == set(frame.index) and len(trials) == 6
    for tid, row in trials.items():
        stored = frame.loc[tid]
        assert row["state"] == stored["state"] and int(row["step"]) == stored["last_step"]
        assert float(row["gpu_seconds"]) == pytest.approx(stored["gpu_seconds"])
        assert float(row["cost_usd"]) == pytest.approx(stored["cost_usd"])
        assert int(row["params.config"]) == stored["params.config"]
        curve = _rows(out / f"{tid}.csv")
        reports = run.store.reports(tid)
        assert [int(r["step"]) for r in curve] == [r["step"] for r in reports]
        assert [float(r["acc"]) for r in curve] == pytest.approx([r["value"] for r in reports])
    (sweep,) = _rows(out / "sweep.csv")
    assert sweep["state"] == "finished" and sweep["best_trial_id"] == run.outcome.best_trial_id
    assert float(sweep["spend_usd"]) == pytest.approx(run.spend_usd)
    assert float(sweep["cost_budget_usd"]) == 10.0 and sweep["time_budget_s"] == ""
    assert float(sweep["best_value"]) == pytest.approx(run.best_value)


def test_each_trial_step_is_logged_once_when_segments_run_again(tmp_path, monkeypatch):
    # Workers lost mid-segment and trainables that raise: segments re-run from the last
    # checkpoint and report its later steps again.
    from tuner._hooks import Hooks

    arrived: Counter[tuple[str, int]] = Counter()
    real = Hooks.result

    def counted(self, trial, step, metrics):
        arrived[trial.trial_id, step] += 1
        real(self, trial, step, metrics)

    monkeypatch.setattr(Hooks, "result", counted)
    run = _sim(tmp_path, ["csv"], n=9,
               faults=SimFaults(worker_losses_per_hour=300.0, app_error_prob=0.3))
    assert [key for key, n in arrived.items() if n > 1], "no step was reported twice"
    for tid in run.trials["trial_id"]:
        path = tmp_path / "csv" / f"{tid}.csv"
        steps = [int(r["step"]) for r in _rows(path)] if path.exists() else []
        assert sorted(steps) == sorted({s for t, s in arrived if t == tid}), tid
        assert {r["step"] for r in run.store.reports(tid)} <= set(steps), tid


def test_a_failing_tracker_is_loud_and_the_sweep_goes_on(tmp_path, caplog, capsys):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    (tmp_path / "exp").mkdir()
    with caplog.at_level(logging.WARNING, logger="tuner._hooks"):
        run = _sim(tmp_path / "exp", [{"csv": {"dir": str(blocker / "csv")}}])
    assert str(run.outcome.state) == "finished" and len(run.trials) == 6
    (record,) = [r for r in caplog.records if "csv logger failed" in r.getMessage()]
    assert "on_sweep_start" in record.getMessage()
    assert "NotADirectoryError" in record.getMessage() or "FileExists" in record.getMessage()
    from tuner._status import status_document

    errors = status_document(run.store, tmp_path / "exp")["logger_errors"]
    assert set(errors) == {"csv"} and "Error" in errors["csv"]
    run.store.close()
    assert main(["status", str(tmp_path / "exp")]) == 0       # ... and so does the CLI
    assert "the csv logger failed and stopped logging" in capsys.readouterr().out


def test_a_tracker_failing_mid_sweep_stops_logging_and_the_status_says_so(tmp_path,
                                                                          monkeypatch):
    from tuner._status import status_document
    from tuner.loggers._csv import CSVLogger

    calls = []
    real = CSVLogger.on_result

    def flaky(self, trial, step, metrics):
        calls.append(step)
        if len(calls) == 5:
            raise OSError("disk gone")
        real(self, trial, step, metrics)

    monkeypatch.setattr(CSVLogger, "on_result", flaky)
    run = _sim(tmp_path, ["csv"])
    assert str(run.outcome.state) == "finished" and len(calls) == 5   # not called again
    assert status_document(run.store, tmp_path)["logger_errors"] == {
        "csv": "OSError: disk gone"}
    (sweep,) = _rows(tmp_path / "csv" / "sweep.csv")
    assert sweep["state"] == "running"   # its end was not logged: the tracker was dropped


def test_a_sweep_without_loggers_reports_no_logger_errors(tmp_path):
    from tuner._status import status_document

    run = _sim(tmp_path, [])
    assert status_document(run.store, tmp_path)["logger_errors"] == {}
    assert not (tmp_path / "csv").exists() and not (tmp_path / "loggers.json").exists()


class Recorder:
    """A tracker that keeps what it is told (the protocol's smallest implementation)."""

    name = "recorder"

    def __init__(self):
        self.events = []

    def on_sweep_start(self, sweep):
        self.events.append(("sweep_start", sweep.experiment_id))

    def on_trial_start(self, trial):
        self.events.append(("trial_start", trial.trial_id))

    def on_result(self, trial, step, metrics):
        self.events.append(("result", trial.trial_id, step, dict(metrics)))

    def on_trial_end(self, trial, state, gpu_s, usd):
        self.events.append(("trial_end", trial.trial_id, state, gpu_s, usd))

    def on_sweep_end(self, summary):
        self.events.append(("sweep_end", summary.state))


def test_a_resumed_sweep_logs_neither_the_steps_nor_the_ends_its_earlier_run_logged(tmp_path):
    from tuner._hooks import Hooks, SweepCallback, SweepInfo, SweepSummary
    from tuner._store import Store
    from tuner._sweep_state import TrialRecord
    from worker.records import TrialState

    # What an earlier run left: t0001 pruned, t0002 with steps 1-2 reported (its segment in
    # flight when the controller died: the restore drops those reports, the re-run sends them
    # again).
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "acc", "max", None, 1.0)
    for n, state in ((1, TrialState.PRUNED), (2, TrialState.RUNNING)):
        store.add_trial(f"t000{n}", n, {"lr": 0.1}, 0, 0.0)
        store.update_trial(f"t000{n}", 0.0, state=state, gpu_seconds=3.0, cost_usd=0.5)
    store.add_reports([("t0001", "s1", 1, 0.1, "{}", 0.0),
                       *[("t0002", "s2", k, 0.1 * k, "{}", 0.0) for k in (1, 2)]])
    recorder = Recorder()
    assert isinstance(recorder, SweepCallback)
    hooks = Hooks([recorder], store, SweepInfo("e", "e", "acc", "max", None, 1.0, {}, None))
    store.drop_reports("s2")                       # (what the restore does)
    one = TrialRecord("t0001", 1, {"lr": 0.1}, 0, state=TrialState.PRUNED)
    two = TrialRecord("t0002", 2, {"lr": 0.1}, 0)
    hooks.sweep_started()
    hooks.trial_state(one, TrialState.PRUNED)     # (the restore sets every trial's state)
    for step in (1, 2, 3):
        hooks.result(two, step, {"acc": 0.1 * step, "note": "x", "ok": True})
    hooks.result(two, 3, {"acc": 0.9})             # a re-run's report of a logged step
    two.step, two.value, two.state = 3, 0.3, TrialState.COMPLETED
    hooks.trial_state(two, TrialState.COMPLETED)
    hooks.trial_state(two, TrialState.COMPLETED)   # (set again: ends once)
    hooks.sweep_ended([one, two], SweepSummary("finished", "done", None, 1.0, 5.0, None, 1.0,
                                               "t0002", 0.3, {"lr": 0.1}, {"completed": 1}))
    assert recorder.events == [
        ("sweep_start", "e"),
        ("result", "t0002", 3, {"acc": pytest.approx(0.3)}),   # numbers only
        ("trial_end", "t0002", "completed", 3.0, 0.5),
        ("sweep_end", "finished"),
    ]


def test_a_trial_open_when_the_sweep_ends_is_ended_with_its_state(tmp_path):
    from tuner._hooks import Hooks, SweepInfo, SweepSummary
    from tuner._store import Store
    from tuner._sweep_state import TrialRecord
    from worker.records import TrialState

    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "acc", "max", None, 1.0)
    store.add_trial("t0001", 1, {}, 0, 0.0)
    recorder = Recorder()
    hooks = Hooks([recorder], store, SweepInfo("e", "e", "acc", "max", None, 1.0, {}, None))
    trial = TrialRecord("t0001", 1, {}, 0)
    hooks.trial_started(trial)
    hooks.result(trial, 1, {"acc": 0.5})
    trial.state = TrialState.STOPPED
    hooks.sweep_ended([trial], SweepSummary("stopped", "requested", None, 0.1, 1.0, None, 1.0,
                                            None, None, None, {"stopped": 1}))
    assert recorder.events[-2:] == [("trial_end", "t0001", "stopped", 0.0, 0.0),
                                    ("sweep_end", "stopped")]


def test_an_mlflow_server_that_takes_no_connections_fails_its_tracker_at_once(tmp_path,
                                                                               caplog):
    import importlib.util
    import socket
    import time

    from tuner._status import status_document

    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("mlflow is not installed (pip install 'elastune[mlflow]')")
    with socket.socket() as s:            # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="tuner._hooks"):
        run = _sim(tmp_path, [{"mlflow": {"tracking_uri": f"http://127.0.0.1:{port}"}},
                              "csv"])
    assert time.monotonic() - started < 5
    assert str(run.outcome.state) == "finished"
    errors = status_document(run.store, tmp_path)["logger_errors"]
    assert list(errors) == ["mlflow"] and "does not answer" in errors["mlflow"]
    assert any("mlflow logger failed" in r.getMessage() for r in caplog.records)
    assert len(_rows(tmp_path / "csv" / "trials.csv")) == 6   # the other tracker went on
