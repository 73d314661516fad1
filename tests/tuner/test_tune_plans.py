"""tune() and the planner: every sweep stores its plan; a sweep may follow one (elastic)."""

from __future__ import annotations

import pytest

from tuner import ConfigError, tune, uniform
from tuner._store import Store


def _sweep(**over):
    base = {
        "name": "p",
        "trainable": "tests.trainables:quadratic",
        "metric": "score",
        "mode": "max",
        "space": {"x": uniform(0.0, 1.0)},
        "scheduler": {"type": "sha", "min_resource": 1, "max_resource": 9,
                      "reduction_factor": 3},
        "num_trials": 9,
        "seed": 3,
        "provider": {"type": "local", "workers": 2},
        "profile": {"seconds_per_step": 0.05, "boot_s": 2},
    }
    base.update(over)
    return base


@pytest.mark.slow
def test_a_fixed_cluster_stores_the_prediction_for_it(tmp_path):
    result = tune(_sweep(), time_budget="2m", cost_budget=1.0, experiment_dir=tmp_path / "e")
    assert len(result.plans) == 1
    plan = result.plans[0]["plan"] if "plan" in result.plans[0] else result.plans[0]
    assert plan["planner"] == "static" and plan["num_trials"] == 9
    assert {r["workers"] for r in plan["rungs"]} == {2}


@pytest.mark.slow
def test_a_local_sweep_can_follow_the_plan(tmp_path):
    sweep = _sweep(provider={"type": "local", "workers": 3, "scaling": "plan"})
    result = tune(sweep, time_budget="3m", cost_budget=1.0, experiment_dir=tmp_path / "e")
    assert result.state == "finished" and result.budget_respected
    assert result.plans, "no plan was stored"
    first = result.plans[0]["plan"] if "plan" in result.plans[0] else result.plans[0]
    assert first["planner"] != "static" and first["num_trials"] == 9
    store = Store(tmp_path / "e", readonly=True)
    peak = max(r["workers"] for r in first["rungs"])
    assert 1 <= peak <= 3                                   # the local cap holds
    assert 1 <= len(store.instances())                      # it launched what the plan said
    assert result.trials.shape[0] == 9


@pytest.mark.slow
def test_num_trials_none_lets_the_planner_choose(tmp_path):
    sweep = _sweep(num_trials=None, provider={"type": "local", "workers": 2})
    result = tune(sweep, time_budget="40s", cost_budget=0.05, experiment_dir=tmp_path / "e")
    plan = result.plans[0]["plan"] if "plan" in result.plans[0] else result.plans[0]
    assert result.trials.shape[0] == plan["num_trials"] > 0


def test_the_planner_chooses_the_first_rung_only_when_the_sweep_leaves_it_unset():
    from budgets import JobShape, trial_counts
    from tuner._build import chosen_shape, scheduler_for
    from tuner._config import load_sweep
    from tuner._planning import plan_for, replanner_for

    def sweep(**over):
        doc = _sweep(num_trials=None, **over)
        doc["scheduler"] = {k: v for k, v in doc["scheduler"].items() if k != "min_resource"}
        doc["scheduler"]["max_resource"] = 27
        doc.update(time_budget_s=600, cost_budget_usd=0.5)
        return load_sweep(doc)

    # Synchronous halving: rung 1, the best half of the first stage going on.
    left = sweep()
    plan = plan_for(left)
    assert plan.planner == "accuracy-max" and plan.feasible
    assert [r.resource for r in plan.rungs] == [1, 3, 9, 27] and plan.num_trials >= 27
    assert plan.num_trials in trial_counts(3) and plan.inputs["first_reduction"] == 2
    assert [r.trials for r in plan.rungs] == JobShape(plan.num_trials, 1, 27, 3, 2).stage_sizes()
    # ... which the sweep then runs, and its re-planner plans.
    run = chosen_shape(left, plan)
    assert run.num_trials == plan.num_trials and run.scheduler.first_reduction == 2
    assert scheduler_for(run).sizes == JobShape(plan.num_trials, 1, 27, 3, 2).stage_sizes()
    assert replanner_for(run, plan).shape.first_reduction == 2
    # ASHA (asynchronous promotions) may start one rung up instead.
    asha = plan_for(sweep(scheduler={"type": "asha", "max_resource": 27}))
    assert [r.resource for r in asha.rungs] == [3, 9, 27] and asha.num_trials >= 9
    assert chosen_shape(sweep(scheduler={"type": "asha", "max_resource": 27}),
                        asha).scheduler.min_resource == 3
    # The user's own min_resource is kept, even when it is the default value, with 1/eta cuts.
    given = _sweep(num_trials=None)
    given["scheduler"]["max_resource"] = 27
    given.update(time_budget_s=600, cost_budget_usd=0.5)
    kept = plan_for(load_sweep(given))
    assert kept.rungs[0].resource == 1 and kept.inputs["first_reduction"] is None
    assert [r.trials for r in kept.rungs] == JobShape(kept.num_trials, 1, 27, 3).stage_sizes()
    # A fixed number of trials keeps the ladder too.
    fixed = sweep()
    fixed = fixed.model_copy(update={"num_trials": 9})
    assert plan_for(fixed).rungs[0].resource == 1
    # The planner chose the shape: the re-planner may shrink it to keep within the budget,
    # also once the sweep's num_trials holds the chosen count.
    chosen = left.model_copy(update={"num_trials": plan.num_trials})
    assert replanner_for(chosen, plan).cost_budget_usd == 0.5
    assert replanner_for(fixed, plan_for(fixed)).cost_budget_usd is None


def test_a_sweeps_step_costs_reach_its_plan_and_re_planner():
    from tuner._config import load_sweep
    from tuner._planning import plan_for, replanner_for

    def planned(**profile):
        doc = _sweep(profile={"seconds_per_step": 10.0, "boot_s": 0, **profile})
        doc.update(time_budget_s=3600, cost_budget_usd=5.0)
        sweep = load_sweep(doc)
        plan = plan_for(sweep)
        return plan, replanner_for(sweep, plan)

    flat, _ = planned()
    warm, replanner = planned(step_costs=[4.0])
    assert replanner.profile.step_costs == (4.0,)
    # 9 trials' first step at 40 s, not 10 s: stage 0 takes 4x as long per trial; the
    # stages after it train steps past the table, at 10 s.
    span = [(r.end_s - r.start_s) * r.workers for r in (flat.rungs[0], warm.rungs[0])]
    assert span[1] == pytest.approx(4 * span[0], rel=0.05)
    assert [r.end_s - r.start_s for r in warm.rungs[1:]] == \
        [r.end_s - r.start_s for r in flat.rungs[1:]]


@pytest.mark.slow
def test_a_sweep_whose_planner_cut_its_first_rung_gently_runs_that_shape(tmp_path):
    from budgets import JobShape
    sweep = _sweep(num_trials=None, provider={"type": "local", "workers": 2})
    sweep["scheduler"] = {"type": "sha", "max_resource": 9, "reduction_factor": 3}
    result = tune(sweep, time_budget="40s", cost_budget=0.05, experiment_dir=tmp_path / "e")
    plan = result.plans[0]["plan"] if "plan" in result.plans[0] else result.plans[0]
    n = plan["num_trials"]
    assert plan["rungs"][0]["resource"] == 1 and plan["inputs"]["shape"]["first_reduction"] == 2
    assert [r["trials"] for r in plan["rungs"]] == JobShape(n, 1, 9, 3, 2).stage_sizes()
    assert result.trials.shape[0] == n > 0
    store = Store(tmp_path / "e", readonly=True)
    assert store.experiment()["config"]["scheduler"]["first_reduction"] == 2
    # No more than the best half of the first stage trained on to rung 3.
    second = {s["trial_id"] for s in store.segments() if s["start_step"] == 1}
    assert len(second) <= n // 2


@pytest.mark.slow
def test_a_sweep_whose_planner_raised_min_resource_runs_from_that_rung(tmp_path):
    sweep = _sweep(num_trials=None, provider={"type": "local", "workers": 2})
    sweep["scheduler"] = {"type": "asha", "max_resource": 9, "reduction_factor": 3}
    # (No cost budget: with one, this fixed cluster would also admit trials while a worker
    # idles, until the budgets end the sweep; tests/tuner/test_fill_idle.py tests that.)
    result = tune(sweep, time_budget="40s", cost_budget=None, experiment_dir=tmp_path / "e")
    plan = result.plans[0]["plan"] if "plan" in result.plans[0] else result.plans[0]
    assert plan["rungs"][0]["resource"] == 3
    assert result.trials.shape[0] == plan["num_trials"] > 0
    store = Store(tmp_path / "e", readonly=True)
    assert store.experiment()["config"]["scheduler"]["min_resource"] == 3
    # every trial's first segment trained 3 steps, not 1
    first = [s for s in store.segments() if s["start_step"] == 0]
    assert first and all(s["stop_step"] == 3 for s in first)


@pytest.mark.slow
def test_a_resumed_sweep_keeps_the_planners_choice_of_num_trials(tmp_path, monkeypatch):
    import tuner._build as build_module
    from tuner import resume
    from tuner._tune import SHAPE_CHOSEN

    made = []

    def recording(*args, **kwargs):
        replanner = replanner_for(*args, **kwargs)
        made.append(replanner)
        return replanner

    from tuner._planning import replanner_for
    monkeypatch.setattr(build_module, "replanner_for", recording)
    exp = tmp_path / "e"
    sweep = _sweep(num_trials=None, provider={"type": "local", "workers": 2, "scaling": "plan"})
    first = tune(sweep, time_budget="10s", cost_budget=0.05, experiment_dir=exp)
    store = Store(exp, readonly=True)
    assert store.meta(SHAPE_CHOSEN) == "1"
    # The stored config holds the first bracket's chosen count; with time and budget left,
    # the sweep ran more brackets after it, none larger (the last may be cut by the deadline:
    # these trials take milliseconds, and what a segment costs around its steps is not in the
    # model).
    chosen = store.experiment()["config"]["num_trials"]
    brackets = [e["step"] for e in store.journal() if e["kind"] == "bracket"]
    assert brackets and max(brackets) <= chosen
    assert chosen + sum(brackets[:-1]) < first.trials.shape[0] <= chosen + sum(brackets)
    assert first.budget_respected
    store.close()
    assert made[-1].cost_budget_usd == 0.05
    # The resumed re-planner may still shrink the bracket under way to keep within the (new)
    # cost budget, and start more with what it adds.
    # (The first run used its whole 10 s and its stop grace: the budget must leave more.)
    second = resume(exp, time_budget="20s", cost_budget=0.08)
    assert made[-1].cost_budget_usd == 0.08
    # A count the user sets on resume is theirs: it is planned as given. (Here every trial of
    # that count has ended, so the resume has nothing to do: it starts and bills nothing.)
    made.clear()
    third = resume(exp, time_budget="30s", cost_budget=0.1, num_trials=chosen)
    ran = bool(made)      # (scaling_for below makes a re-planner too)
    if ran:    # the second run left work (its deadline came first)
        assert made[-1].cost_budget_usd is None
    else:      # nothing to do: nothing is written, the planner's choice stands
        assert third.spend_usd == second.spend_usd
        assert Store(exp, readonly=True).meta(SHAPE_CHOSEN) == "1"
    from tuner._build import scaling_for
    from tuner._config import load_sweep
    from tuner._planning import plan_for

    given = load_sweep({**Store(exp, readonly=True).experiment()["config"],
                        "trainable": "tests.trainables:quadratic"},
                       time_budget="30s", cost_budget=0.1, num_trials=chosen)
    assert scaling_for(given, plan_for(given), chosen=False)[1].cost_budget_usd is None
    if ran:
        assert Store(exp, readonly=True).meta(SHAPE_CHOSEN) == "0"


@pytest.mark.slow
def test_a_sweep_late_only_on_its_profiles_estimate_runs_the_fastest_plan(tmp_path, caplog):
    # The profile says 5 s a step: 9 trials to 9 steps cannot end in 20 s on 3 workers (57 s
    # at the fastest). The steps really take milliseconds: the sweep runs and ends on time.
    sweep = _sweep(provider={"type": "local", "workers": 3, "scaling": "plan"},
                   profile={"seconds_per_step": 5.0, "boot_s": 2})
    with caplog.at_level("WARNING", logger="tuner._tune"):
        result = tune(sweep, time_budget="20s", cost_budget=1.0,
                      experiment_dir=tmp_path / "e")
    first = result.plans[0]["plan"] if "plan" in result.plans[0] else result.plans[0]
    assert not first["feasible"] and "deadline" in first["reason"]
    assert "following the fastest plan" in caplog.text
    assert result.state == "finished" and result.deadline_met and result.budget_respected
    assert result.trials.shape[0] == 9


@pytest.mark.slow
def test_a_sweep_over_its_cost_budget_is_still_refused(tmp_path):
    late = {"provider": {"type": "local", "workers": 3, "scaling": "plan"},
            "profile": {"seconds_per_step": 5.0, "boot_s": 2}}
    # The fastest plan bills 3 workers' 60 s minimum (0.05 USD): over a 0.04 USD budget.
    with pytest.raises(ConfigError, match="budget") as over:
        tune(_sweep(**late), time_budget="20s", cost_budget=0.04,
             experiment_dir=tmp_path / "a")
    assert "no plan fits the budgets" in str(over.value)
    # The planner was to choose the number of trials: at 10 s a step one trial's fastest
    # plan runs 92 s (0.0256 USD at 1 USD/h), over a 0.02 USD budget. Its step times are not
    # rescaled to the deadline: the budget, not only the profile's estimate, rules it out.
    slow = {**late, "profile": {"seconds_per_step": 10.0, "boot_s": 2}}
    with pytest.raises(ConfigError, match="budget") as chosen:
        tune(_sweep(num_trials=None, **slow), time_budget="20s", cost_budget=0.02,
             experiment_dir=tmp_path / "b")
    assert "no plan fits the budgets" in str(chosen.value)
    assert "do not fit" in str(chosen.value) and "times its step times" not in str(chosen.value)


@pytest.mark.slow
def test_a_sweep_whose_count_is_chosen_runs_when_only_its_profile_is_late(tmp_path, caplog):
    # The profile says 5 s a step: not even one trial to 9 steps ends in 20 s. The planner
    # chooses the count at the step times under which one would (0.3 of them, with the
    # margin kept), the re-planner learns the real ones (milliseconds), and the sweep ends on
    # time within its budget.
    late = {"provider": {"type": "local", "workers": 3, "scaling": "plan"},
            "profile": {"seconds_per_step": 5.0, "boot_s": 2}}
    with caplog.at_level("WARNING", logger="tuner._tune"):
        result = tune(_sweep(num_trials=None, **late), time_budget="20s", cost_budget=1.0,
                      experiment_dir=tmp_path / "e")
    assert "no trial is on time at the profile's 5 s per step" in caplog.text
    assert "following it" in caplog.text
    first = result.plans[0]["plan"] if "plan" in result.plans[0] else result.plans[0]
    assert 0.25 < first["inputs"]["step_scale"] < 0.35
    assert first["planner"] == "cost-min" and first["num_trials"] >= 3
    assert result.state == "finished" and result.deadline_met and result.budget_respected
    assert result.trials.shape[0] >= first["num_trials"]
    assert (result.trials["state"] == "completed").any()


def test_a_planner_chosen_count_never_exceeds_the_spaces_parameter_sets():
    from tuner import choice, randint
    from tuner._config import load_sweep
    from tuner._planning import plan_for, replanner_for, space_size

    finite = load_sweep(_sweep(num_trials=None, space={"a": choice([1, 2, 3]),
                                                       "b": randint(0, 3), "c": 0.5},
                               provider={"type": "local", "workers": 8, "scaling": "plan"}),
                        time_budget="2h", cost_budget=50.0)
    assert space_size(finite) == 12
    plan = plan_for(finite)
    assert 1 <= plan.num_trials <= 12     # ample budgets: the space, not the money, decides
    assert replanner_for(finite, plan).max_trials == 12
    unbounded = load_sweep(_sweep(num_trials=None), time_budget="2h", cost_budget=50.0)
    assert space_size(unbounded) is None and plan_for(unbounded).num_trials > 12


def test_release_idle_scaling_is_a_sweep_setting():
    from budgets import ReleaseIdle
    from tuner._build import scaling_for
    from tuner._config import load_sweep
    from tuner._errors import ConfigError
    from tuner._planning import plan_for

    sweep = load_sweep(_sweep(provider={"type": "local", "workers": 4,
                                        "scaling": "release-idle"}),
                       time_budget="10m", cost_budget=1.0)
    policy, replanner = scaling_for(sweep, plan_for(sweep))
    assert isinstance(policy, ReleaseIdle) and policy.max_workers == 4 and replanner is None
    with pytest.raises(ConfigError, match="provider.scaling"):
        load_sweep(_sweep(provider={"type": "local", "scaling": "idle"}),
                   time_budget="10m", cost_budget=1.0)
