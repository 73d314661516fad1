"""Optuna both ways: its distributions in a sweep's space (every kind, through the stored sweep,
a resumed sampler, ``simulate`` and ``elastune plan``), and a sweep written as an Optuna study
(``export_optuna``, ``elastune export``) that ``optuna.load_study`` and optuna-dashboard read."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import optuna
import pytest
from optuna.distributions import (
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState as Optuna

from tuner import ConfigError, export_optuna, load_sweep
from tuner._sampling import Sampler
from tuner._store import Store
from tuner.cli import main
from tuner.sim import SAMPLE_DIR, discover, load_curves, simulate
from worker.records import TrialState

with warnings.catch_warnings():
    warnings.simplefilter("ignore")   # Optuna's note that it moved high onto the step grid
    KINDS = {
        "f": FloatDistribution(0.0, 1.0),
        "flog": FloatDistribution(1e-4, 1e-1, log=True),
        "fstep": FloatDistribution(0.0, 1.0, step=0.1),
        "fstep_off_grid": FloatDistribution(0.0, 1.0, step=0.3),   # high moved to 0.9
        "i": IntDistribution(1, 10),
        "ilog": IntDistribution(1, 1024, log=True),
        "istep": IntDistribution(0, 100, step=5),
        "istep_off_grid": IntDistribution(0, 10, step=3),          # high moved to 9
        "c": CategoricalDistribution(["a", None, 1, 2.5, True]),
    }
SCHEDULER = {"type": "asha", "min_resource": 1, "max_resource": 9, "reduction_factor": 3}


def _sweep(space, **more):
    return load_sweep({"trainable": "tests.trainables:quadratic", "metric": "score",
                       "scheduler": SCHEDULER, "space": space,
                       "budget": {"time": 600, "cost": 5.0}, **more})


def _contains(dist, value):
    return dist._contains(dist.to_internal_repr(value))


# -- distributions in the space ----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_optuna_distribution_is_stored_and_read_back_unchanged(name):
    sweep = _sweep({name: KINDS[name], "fixed": 3})
    assert sweep.space[name] == KINDS[name]
    stored = json.loads(json.dumps(sweep.to_json_dict(), allow_nan=False))
    again = load_sweep({**stored, "trainable": "tests.trainables:quadratic"})
    assert again.space == sweep.space
    assert again.distributions() == {name: KINDS[name]}


def test_deprecated_and_numpy_forms_are_rebuilt_as_the_stored_sweep_reads_them():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = {"u": optuna.distributions.UniformDistribution(0.0, 2.0),
               "lu": optuna.distributions.LogUniformDistribution(1e-3, 1.0),
               "du": optuna.distributions.DiscreteUniformDistribution(0.0, 1.0, 0.25),
               "iu": optuna.distributions.IntUniformDistribution(0, 8, step=2),
               "il": optuna.distributions.IntLogUniformDistribution(1, 64),
               "np": CategoricalDistribution(np.array([1, 2, 4]))}
    space = _sweep(old).space
    assert space == {"u": FloatDistribution(0.0, 2.0),
                     "lu": FloatDistribution(1e-3, 1.0, log=True),
                     "du": FloatDistribution(0.0, 1.0, step=0.25),
                     "iu": IntDistribution(0, 8, step=2),
                     "il": IntDistribution(1, 64, log=True),
                     "np": CategoricalDistribution([1, 2, 4])}
    assert all(type(d) in (FloatDistribution, IntDistribution, CategoricalDistribution)
               for d in space.values())
    assert [type(c) for c in space["np"].choices] == [int, int, int]   # JSON, not numpy


def test_a_distribution_elastune_cannot_store_is_refused_naming_the_entry():
    class Odd(optuna.distributions.BaseDistribution):
        def to_external_repr(self, v):
            return v

        def to_internal_repr(self, v):
            return v

        def single(self):
            return False

        def _contains(self, v):
            return True

    with pytest.raises(ConfigError, match=r"space\.w: Odd is not a distribution"):
        _sweep({"w": Odd()})
    # One Optuna would refuse to build (as one unpickled from elsewhere) gets the YAML checks.
    bad = FloatDistribution(1e-3, 1.0, log=True)
    bad.low = 0.0
    with pytest.raises(ConfigError, match=r"space\.lr: float low must be > 0 on a log scale"):
        _sweep({"lr": bad})


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_a_resumed_sampler_takes_up_trials_of_every_kind_from_the_stored_space(sampler):
    sweep = _sweep({**KINDS, "fixed": "x"}, sampler=sampler, seed=3)
    first = Sampler(sweep.space, sweep.sampler, "max", 3)
    asked = [(f"t{n:04d}", first.ask(f"t{n:04d}")) for n in range(1, 7)]
    for trial_id, _ in asked[:4]:
        first.report(trial_id, 0.5, 1)
        first.tell(trial_id, TrialState.COMPLETED, 0.5)
    stored = load_sweep({**json.loads(json.dumps(sweep.to_json_dict())),
                         "trainable": "tests.trainables:quadratic"})
    again = Sampler(stored.space, stored.sampler, "max", 3)
    again.restore([(tid, p, TrialState.COMPLETED if k < 4 else TrialState.PAUSED,
                    0.5 if k < 4 else None, {1: 0.5}) for k, (tid, p) in enumerate(asked)])
    restored = again.study.trials
    assert [t.params for t in restored] == [
        {k: v for k, v in p.items() if k != "fixed"} for _, p in asked]
    new = again.ask("t0007")
    assert new["fixed"] == "x"
    assert all(_contains(KINDS[k], v) for k, v in new.items() if k in KINDS)


def test_simulate_samples_every_kind_within_its_distribution():
    curves = load_curves(SAMPLE_DIR, discover(SAMPLE_DIR)[0], max_configs=27)
    space = {"config": IntDistribution(0, 26), **KINDS, "fixed": 3}
    run = simulate({"scheduler": SCHEDULER, "num_trials": 9, "sampler": "tpe",
                    "provider": {"type": "local", "workers": 3}},
                   curves, seed=0, time_budget=None, cost_budget=10.0, space=space)
    assert str(run.outcome.state) == "finished" and len(run.trials) == 9
    for row in run.store.trial_rows():
        params = json.loads(row["params"])
        assert params["fixed"] == 3
        for name, dist in KINDS.items():
            assert _contains(dist, params[name]), (name, params[name])


def test_plan_takes_every_yaml_form_of_the_optuna_kinds(tmp_path, capsys):
    sweep = tmp_path / "kinds.yaml"
    sweep.write_text("""\
name: kinds
trainable: tests.trainables:quadratic
metric: score
space:
  f: {uniform: [0.0, 1.0]}
  flog: {loguniform: [1.0e-4, 0.1]}
  fstep: {float: {low: 0.0, high: 1.0, step: 0.1}}
  i: {randint: [1, 10]}
  ilog: {int: {low: 1, high: 1024, log: true}}
  istep: {int: {low: 0, high: 100, step: 5}}
  c: {choice: [a, null, 1, 2.5, true]}
  fixed: 3
scheduler: {type: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
num_trials: 9
budget: {time: 10m, cost: 2.0}
provider: {type: local, workers: 2}
""")
    assert main(["plan", str(sweep), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_trials"] == 9


# -- export ------------------------------------------------------------------------------------

def _hand_made_store(folder):
    """An experiment with a trial in each state, written as the controller writes them."""
    store = Store(folder)
    config = _sweep({"x": FloatDistribution(0.0, 1.0), "h": CategoricalDistribution([32, 64]),
                     "fixed": "adam"}, name="hand").to_json_dict()
    store.create_experiment("hand-1", "hand", config, "score", "min", 600.0, 5.0)
    states = [TrialState.COMPLETED, TrialState.PRUNED, TrialState.FAILED, TrialState.STOPPED,
              TrialState.RUNNING, TrialState.PAUSED, TrialState.COMPLETED]
    for n, state in enumerate(states, start=1):
        tid = f"t{n:04d}"
        store.add_trial(tid, n, {"x": n / 10, "h": 64, "fixed": "adam"}, 0, 1000.0 + n)
        store.add_segment(f"{tid}-s1", tid, "i-1", 0, 3, 1, 1000.0 + n)
        store.update_segment(f"{tid}-s1", state="done", started_at=1001.0 + n,
                             finished_at=1010.0 + n)
        reports = [] if state == TrialState.FAILED else [
            (tid, f"{tid}-s1", s, n + 1 / s, "{}", 1002.0 + n + s) for s in (1, 2, 3)]
        store.add_reports(reports)
        value = None if state in (TrialState.FAILED, TrialState.RUNNING) else n + 1 / 3
        if n == 7:
            value = math.nan          # completed without the metric: Optuna's FAIL
        store.update_trial(tid, 1020.0 + n, state=state, value=value, last_step=3,
                           error="Traceback ...\nValueError: boom" if n == 3 else None)
        store.add_trial_usage(tid, 10.0 * n, 0.01 * n)
    store.close()


def test_export_writes_each_trial_with_its_state_values_and_usage(tmp_path):
    _hand_made_store(tmp_path)
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    export_optuna(tmp_path, url)
    study = optuna.load_study(study_name="hand-1", storage=url)
    assert study.direction == optuna.study.StudyDirection.MINIMIZE
    assert study.metric_names == ["score"]
    assert study.user_attrs["elastune_experiment"] == "hand-1"
    trials = study.trials
    assert [t.state for t in trials] == [Optuna.COMPLETE, Optuna.PRUNED, Optuna.FAIL,
                                         Optuna.PRUNED, Optuna.RUNNING, Optuna.RUNNING,
                                         Optuna.FAIL]
    assert [t.user_attrs["elastune_state"] for t in trials] == [
        "completed", "pruned", "failed", "stopped", "running", "paused", "completed"]
    assert [t.value for t in trials] == [1 + 1 / 3, 2 + 1 / 3, None, 4 + 1 / 3, None, None,
                                         None]
    first = trials[0]
    assert first.params == {"x": 0.1, "h": 64, "fixed": "adam"}
    assert first.distributions == {"x": FloatDistribution(0.0, 1.0),
                                   "h": CategoricalDistribution([32, 64]),
                                   "fixed": CategoricalDistribution(["adam"])}
    assert first.intermediate_values == {1: 2.0, 2: 1.5, 3: 1 + 1 / 3}
    assert first.user_attrs | {} == {"elastune_trial_id": "t0001", "elastune_state": "completed",
                                     "gpu_seconds": 10.0, "cost_usd": 0.01, "last_step": 3,
                                     "bracket": 0}
    assert trials[2].user_attrs["error"].endswith("ValueError: boom")
    assert trials[2].intermediate_values == {}
    assert first.datetime_start.timestamp() == pytest.approx(1002.0)
    assert first.datetime_complete.timestamp() == pytest.approx(1021.0)
    assert trials[4].datetime_complete is None
    assert study.best_trial.user_attrs["elastune_trial_id"] == "t0001"


def test_an_existing_study_is_refused_unless_overwritten_and_nothing_is_half_written(tmp_path):
    _hand_made_store(tmp_path)
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    export_optuna(tmp_path, url, study_name="mine")
    with pytest.raises(ConfigError, match="study_name: a study named 'mine' is already"):
        export_optuna(tmp_path, url, study_name="mine")
    assert len(optuna.load_study(study_name="mine", storage=url).trials) == 7
    export_optuna(tmp_path, url, study_name="mine", overwrite=True)
    assert optuna.get_all_study_names(url) == ["mine"]
    assert len(optuna.load_study(study_name="mine", storage=url).trials) == 7
    # A param outside the stored space's distribution: refused before anything is written.
    store = Store(tmp_path)
    store.update_trial("t0001", 2000.0, params=json.dumps({"x": 7.0, "h": 64, "fixed": "adam"}))
    store.close()
    with pytest.raises(ValueError, match="isn't contained"):
        export_optuna(tmp_path, url, study_name="other")
    assert optuna.get_all_study_names(url) == ["mine"]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"storage": "not a url"}, "storage"),
    ({"storage": 7}, "storage"),
    ({"storage": "sqlite:///x.db", "study_name": " "}, "study_name"),
    ({"storage": "sqlite:///x.db", "overwrite": "yes"}, "overwrite"),
])
def test_bad_export_arguments_name_the_argument(tmp_path, kwargs, field):
    _hand_made_store(tmp_path)
    with pytest.raises(ConfigError) as err:
        export_optuna(tmp_path, **kwargs)
    assert err.value.field == field
    with pytest.raises(ConfigError, match="experiment_dir: .* holds no experiment"):
        export_optuna(tmp_path / "nothing", "sqlite:///x.db")


def _finished_sim(folder):
    curves = load_curves(SAMPLE_DIR, discover(SAMPLE_DIR)[0], max_configs=27)
    run = simulate({"scheduler": SCHEDULER, "num_trials": 9, "sampler": "tpe",
                    "provider": {"type": "local", "workers": 3}},
                   curves, seed=0, time_budget=None, cost_budget=10.0,
                   space={"config": IntDistribution(0, 26), "lr": KINDS["flog"],
                          "k": KINDS["istep"], "c": KINDS["c"], "fixed": 3},
                   store_path=folder / "experiment.db", experiment_id="sim-1")
    run.store.close()
    return run


def test_a_simulated_sweep_reads_back_as_the_same_study(tmp_path):
    run = _finished_sim(tmp_path)
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    assert main(["export", str(tmp_path), "--optuna", url, "--study-name", "s",
                 "--json"]) == 0
    assert main(["export", str(tmp_path), "--optuna", url, "--study-name", "s"]) == 2
    assert main(["export", str(tmp_path)]) == 2                   # (--optuna is required)
    study = optuna.load_study(study_name="s", storage=url)
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE   # the curves' mode
    store = Store(tmp_path, readonly=True)
    rows, reports = store.trial_rows(), store.reports()
    store.close()
    assert len(study.trials) == len(rows) == 9
    kinds = {"completed": Optuna.COMPLETE, "pruned": Optuna.PRUNED}
    for row, trial in zip(rows, study.trials, strict=True):
        assert trial.user_attrs["elastune_trial_id"] == row["trial_id"]
        assert trial.params == json.loads(row["params"])
        assert trial.state == kinds[row["state"]]
        assert trial.value == pytest.approx(row["value"])
        assert trial.intermediate_values == {
            r["step"]: r["value"] for r in reports if r["trial_id"] == row["trial_id"]}
        assert trial.user_attrs["gpu_seconds"] == pytest.approx(row["gpu_seconds"])
    assert study.best_value == pytest.approx(run.best_value)
    assert study.trials[0].distributions["lr"] == KINDS["flog"]


@pytest.mark.slow
def test_optuna_dashboard_serves_the_exported_study(tmp_path):
    dashboard = pytest.importorskip("optuna_dashboard")
    httpx = pytest.importorskip("httpx")
    _hand_made_store(tmp_path)
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    export_optuna(tmp_path, url)
    app = dashboard.wsgi(url)
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://dash") as web:
        studies = web.get("/api/studies").json()["study_summaries"]
        assert [s["study_name"] for s in studies] == ["hand-1"]
        detail = web.get(f"/api/studies/{studies[0]['study_id']}").json()
    assert [t["state"] for t in detail["trials"]] == [
        "Complete", "Pruned", "Fail", "Pruned", "Running", "Running", "Fail"]
    assert {p["name"] for p in detail["trials"][0]["params"]} == {"x", "h", "fixed"}
    assert detail["has_intermediate_values"] is True
    assert detail["objective_names"] == ["score"]
