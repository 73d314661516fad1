"""Search that learns across fidelities: BOHB's sampler (TPE on the highest rung with enough
results), PASHA's progressive top rung, and the recorded hyperparameter space simulations
sample from."""

from __future__ import annotations

import json
from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from tests.tuner.test_config import base, raises
from tuner import load_sweep, uniform
from tuner._multifidelity import MultiFidelityTPESampler, model_rung, rung_view
from tuner._sampling import Sampler
from tuner.schedulers import PASHA, TrialStatus, make_scheduler
from tuner.schedulers._pasha import noise_epsilon, rankings_agree
from tuner.sim import (
    SAMPLE_DIR,
    NearestConfig,
    discover,
    hyperparameters,
    load_curves,
    recorded_space,
    simulate,
)

X = {"x": FloatDistribution(0.0, 1.0)}


def _trial(x: float, values: dict[int, float], state: TrialState = TrialState.RUNNING):
    return create_trial(state=state, params={"x": x}, distributions=X,
                        intermediate_values=values,
                        value=None if state == TrialState.RUNNING else 0.0)


# -- the model's data ------------------------------------------------------------------------
def test_the_model_is_fitted_on_the_highest_rung_with_enough_results():
    trials = [_trial(0.1, {1: 0.1, 3: 0.2, 9: 0.3}), _trial(0.2, {1: 0.2, 3: 0.1}),
              _trial(0.3, {1: 0.5, 3: 0.4}), _trial(0.4, {1: 0.0}, TrialState.PRUNED)]
    assert model_rung(trials, 3) == 3           # rung 9 has one result, rung 3 three
    assert model_rung(trials, 4) == 1
    assert model_rung(trials, 5) is None        # no rung has enough: draw at random
    assert model_rung(trials, 1) == 9
    assert model_rung(trials, 1, levels=[1, 3]) == 3   # 9 is no rung of this sweep
    view = rung_view(trials, 3)
    assert [(t.params["x"], t.value, t.state) for t in view] == [
        (0.1, 0.2, TrialState.COMPLETE), (0.2, 0.1, TrialState.COMPLETE),
        (0.3, 0.4, TrialState.COMPLETE)]


def test_the_sampler_learns_from_rung_results_before_any_trial_ends():
    # Every trial is still open (paused at a rung, as under ASHA): TPE alone has nothing
    # finished to learn from, the multi-fidelity sampler has the rung values.
    def mean_distance(sampler: optuna.samplers.BaseSampler) -> float:
        study = optuna.create_study(direction="maximize", sampler=sampler)
        late = []
        for i in range(40):
            t = study.ask()
            x = t.suggest_float("x", 0.0, 1.0)
            t.report(-((x - 0.8) ** 2), 1)
            if i >= 20:
                late.append(abs(x - 0.8))
        return sum(late) / len(late)

    for seed in range(2):
        bohb = mean_distance(MultiFidelityTPESampler(seed=seed, levels=[1, 3]))
        tpe = mean_distance(optuna.samplers.TPESampler(seed=seed))
        assert bohb < 0.75 * tpe, (seed, bohb, tpe)


def test_bad_sampler_arguments_are_named():
    with pytest.raises(ValueError, match="min_results is 0"):
        MultiFidelityTPESampler(min_results=0)
    with pytest.raises(ValueError, match="random_fraction is 2"):
        MultiFidelityTPESampler(random_fraction=2)


# -- resume ----------------------------------------------------------------------------------
def _history(sampler: Sampler, n: int) -> list[tuple[str, dict, str, float | None, dict]]:
    """``n`` trials as the controller hands them to ``restore``: all reach rung 1, every
    third rung 3 (reporting step 2 on the way), every ninth completes at rung 9; the others
    stay paused (open)."""
    out = []
    for i in range(n):
        tid = f"t{i + 1:04d}"
        params = sampler.ask(tid)
        reports = {1: params["x"] / 3}
        if i % 3 == 0:
            reports[3] = params["x"] / 2
        for step, value in reports.items():
            sampler.report(tid, value, step)
        state, value = "paused", None
        if i % 9 == 0:
            reports[9] = value = params["x"]
            sampler.report(tid, value, 9)
            state = "completed"
            sampler.tell(tid, state, value)
        # The store holds every step's report; the live sampler was told the rung steps only
        # (and a trial on its way to rung 3 when the sweep stopped reported step 2 alone).
        stored = {**reports, 2: params["x"] / 2.5} if i % 3 in (0, 1) else reports
        out.append((tid, params, state, value, stored))
    return out


def _model(sampler: Sampler) -> tuple[int | None, list[tuple[Any, float | None]]]:
    inner = sampler.study.sampler
    assert isinstance(inner, MultiFidelityTPESampler)
    rung, data = inner.model_data(sampler.study)
    return rung, [(json.dumps(t.params, sort_keys=True), t.value) for t in data]


def test_a_resumed_sweep_rebuilds_the_model_from_the_store():
    # A resumed sweep draws on a continued seed (Sampler.restore), so its next params are not
    # the uninterrupted run's; what must match is the model they are drawn from: the same
    # rung and the same (params, value) data, rebuilt from the replayed reports.
    space = {"x": uniform(0.0, 1.0)}
    first = Sampler(space, "bohb", "max", 0, levels=[1, 3, 9])
    history = _history(first, 14)
    resumed = Sampler(space, "bohb", "max", 0, levels=[1, 3, 9])
    resumed.restore(history)
    assert _model(resumed) == _model(first)
    # one parameter: two results make a model; trials 1 and 10 reached rung 9
    assert _model(first)[0] == 9 and len(_model(first)[1]) == 2
    # The same seed and history give the same continuation.
    again = Sampler(space, "bohb", "max", 0, levels=[1, 3, 9])
    again.restore(history)
    assert [again.ask(f"n{i}") for i in range(5)] == [resumed.ask(f"n{i}") for i in range(5)]


def test_an_instance_without_rungs_takes_the_sweeps_so_a_resume_refits_the_same_model():
    # Six results needed: rung 9 has 2, rung 3 has 5, step 2 (no rung) 10 in the store.
    space = {"x": uniform(0.0, 1.0)}
    given = MultiFidelityTPESampler(seed=0, min_results=6)
    first = Sampler(space, given, "max", 0, levels=[1, 3, 9])
    assert given.levels == [1, 3, 9]
    history = _history(first, 14)
    resumed = Sampler(space, MultiFidelityTPESampler(seed=0, min_results=6), "max", 0,
                      levels=[1, 3, 9])
    resumed.restore(history)
    assert _model(resumed) == _model(first) and _model(first)[0] == 1
    unaware = Sampler(space, MultiFidelityTPESampler(seed=0, min_results=6, levels=None),
                      "max", 0)
    unaware.restore(history)
    assert _model(unaware)[0] == 2      # what a resume would fit on without the rungs


def test_a_custom_optuna_sampler_runs_a_simulated_sweep():
    class Halves(optuna.samplers.BaseSampler):
        """Always the middle of the range: a sampler of the user's own."""

        def infer_relative_search_space(self, study, trial):
            return {}

        def sample_relative(self, study, trial, search_space):
            return {}

        def sample_independent(self, study, trial, name, dist):
            if isinstance(dist, optuna.distributions.CategoricalDistribution):
                return dist.choices[0]
            mid = (dist.low + dist.high) / 2
            return int(mid) if isinstance(dist, optuna.distributions.IntDistribution) else mid

    curves = _sample_curves()
    sampler = Halves()
    assert load_sweep(base(sampler=sampler)).sampler is sampler
    r = simulate({**_SWEEP, "sampler": sampler}, curves, seed=0, time_budget=None,
                 cost_budget=50.0, trial_params="hyperparameters")
    params = [json.loads(t["params"]) for t in r.store.trial_rows()]
    assert len(params) == 9 and all(p == params[0] for p in params)


# -- through simulate: asynchronous and synchronous halving, a chosen count -----------------
_SWEEP: dict[str, Any] = {
    "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9},
    "num_trials": 9, "provider": {"type": "local", "workers": 3}}


def _sample_curves():
    name = next(n for n in discover(SAMPLE_DIR) if n.startswith("yahpo"))
    return load_curves(SAMPLE_DIR, name, max_configs=27)


@pytest.mark.parametrize("scheduler", [
    {"type": "asha", "min_resource": 1, "max_resource": 9},
    {"type": "sha", "min_resource": 1, "max_resource": 9},
    {"type": "asha", "min_resource": 1, "max_resource": 9, "pasha": True},
])
def test_bohb_runs_sync_and_async_halving_in_simulation(scheduler):
    curves = _sample_curves()
    sweep = {**_SWEEP, "scheduler": scheduler, "num_trials": 27, "sampler": "bohb"}
    runs = [simulate(sweep, curves, seed=1, time_budget=None, cost_budget=50.0,
                     trial_params="hyperparameters") for _ in range(2)]
    a, b = runs
    assert str(a.outcome.state) == "finished" and len(a.trials) == 27
    rows = [json.loads(t["params"]) for t in a.store.trial_rows()]
    assert set(rows[0]) == set(recorded_space(curves))       # the curves' hyperparameters
    assert rows == [json.loads(t["params"]) for t in b.store.trial_rows()]   # seeded
    assert a.best_value == b.best_value


@pytest.mark.parametrize("scheduler", [{"type": "asha"}, {"type": "sha"},
                                       {"type": "asha", "pasha": True}])
def test_bohb_in_a_sweep_whose_count_the_planner_chooses(scheduler):
    curves = _sample_curves()
    sweep = {"scheduler": {**scheduler, "max_resource": 9}, "sampler": "bohb",
             "provider": {"type": "aws", "instance_types": ["g4dn.xlarge"]},
             "profile": {"seconds_per_step": 30.0}}
    r = simulate(sweep, curves, seed=2, time_budget=None, cost_budget=0.1,
                 trial_params="hyperparameters")
    assert str(r.outcome.state) == "finished" and r.budget_respected
    chosen = r.store.plans()[0]["num_trials"]
    assert 1 < chosen < len(r.trials)     # the planner's count, then more brackets


# -- the recorded space ----------------------------------------------------------------------
def test_the_recorded_space_comes_from_the_configurations():
    curves = _sample_curves()
    hps = {h.name: h for h in hyperparameters(curves)}
    assert hps and all(h.kind in ("int", "float", "categorical") for h in hps.values())
    # learning rates are drawn log-uniformly in these sets; momentum is not
    assert hps["learning_rate"].log and not hps["momentum"].log
    nearest = NearestConfig(curves)
    for c in curves.config_ids()[:10]:           # a recorded config is its own nearest
        assert nearest(curves.params(c)) == c
    with pytest.raises(ValueError, match="trial_params"):
        simulate(_SWEEP, curves, time_budget=None, cost_budget=1.0, trial_params="names")


# -- PASHA -----------------------------------------------------------------------------------
def test_pasha_soft_ranking_on_hand_made_rankings():
    # Same order at both rungs: the top rung stays.
    assert rankings_agree({"a": 0.9, "b": 0.7, "c": 0.5}, {"a": 0.6, "b": 0.5, "c": 0.4},
                          "max")
    # b overtakes a: the top rung grows, unless their values a rung below are within eps.
    swapped = ({"a": 0.7, "b": 0.9}, {"a": 0.6, "b": 0.55})
    assert not rankings_agree(*swapped, "max")
    assert rankings_agree(*swapped, "max", epsilon=0.05)
    assert not rankings_agree(*swapped, "max", epsilon=0.04)
    # Lower is better: the same values mean the opposite order.
    assert not rankings_agree({"a": 0.1, "b": 0.2}, {"a": 0.2, "b": 0.1}, "min")
    assert rankings_agree({"a": 0.1, "b": 0.2}, {"a": 0.1, "b": 0.2}, "min")
    # Trials only a rung below (not promoted) do not count; one trial at the top agrees.
    assert rankings_agree({"a": 0.9}, {"a": 0.1, "b": 0.9}, "max")
    # Noise: a pair that flipped and flipped back at lower rungs sets the tolerance.
    assert noise_epsilon({"a": [0.3, 0.1, 0.5], "b": [0.2, 0.2, 0.4]}, "max") == \
        pytest.approx(0.1)
    assert noise_epsilon({"a": [0.1, 0.3], "b": [0.2, 0.4]}, "max") == 0.0


def _run(p: PASHA, value) -> None:
    """Run every job to its rung at once; trial ``t<i>`` reports ``value(i, rung index)``."""
    started = 0
    while (job := p.next_job(f"t{started}")) is not None:
        started += job.new
        p.on_rung(job.trial_id, job.to_step,
                  value(int(job.trial_id[1:]), p.rungs.index(job.to_step)))


def test_pasha_stops_growing_while_the_top_rungs_agree():
    # Values keep their order at every rung: the top rung stays at the second rung.
    p = PASHA(1, 27, 3, "max", num_trials=27)
    _run(p, lambda i, k: i / 27 + k)
    assert p.current_max_resource == 3 and p.is_finished()
    p.finalize()
    at_top = [t for t in (f"t{i}" for i in range(27)) if p.status(t) is TrialStatus.COMPLETED]
    assert at_top and all(p._trials[t].step == 3 for t in at_top)


def test_pasha_grows_while_the_rankings_change():
    p = PASHA(1, 27, 3, "max", num_trials=27)
    # The order flips at every rung: what ranks well at one rung ranks badly at the next.
    _run(p, lambda i, k: (i * 7 % 27) / 27 if k % 2 else 1 - (i * 7 % 27) / 27)
    assert p.current_max_resource == 27
    assert any(p._trials[t].step == 27 for t in p._trials)


def test_pasha_is_asynchronous_halving_only():
    with raises("scheduler.pasha", "type: asha", "'sha'"):
        load_sweep(base(scheduler={"type": "sha", "max_resource": 9, "pasha": True}))
    with raises("scheduler.pasha"):
        load_sweep(base(scheduler={"type": "asha", "max_resource": 9, "pasha": "yes"}))
    assert load_sweep(base(scheduler={"type": "asha", "max_resource": 9, "pasha": True})
                      ).scheduler.pasha
    assert isinstance(make_scheduler("asha", 1, 9, 3, "max", 9, pasha=True), PASHA)
    with pytest.raises(ValueError, match="pasha"):
        make_scheduler("hyperband", 1, 9, 3, "max", pasha=True)


def test_the_bohb_sampler_is_a_sweep_setting():
    assert load_sweep(base(sampler="BOHB")).sampler == "bohb"
    with raises("sampler", "bohb"):
        load_sweep(base(sampler="hyperopt"))
