"""tune() and the planner: every sweep stores its plan; a sweep may follow one (elastic)."""

from __future__ import annotations

import pytest

from tuner import tune, uniform
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
