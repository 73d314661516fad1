"""HyperSched's deadline policy: its two decisions by hand, the journal, and the real controller
in simulation (admission closes, the best trials get more GPUs, the deadline's best is no worse
than plain ASHA's)."""

from __future__ import annotations

import pytest

from budgets import LINEAR, RESNET50_CIFAR10, Reallocation, Speedup, Static
from tests._sims import Synth
from tuner._journal import replay
from tuner._store import Store
from tuner.schedulers import ASHA
from tuner.sim import SimInstanceType, simulate_wired

HALF = Speedup({1: 1.0, 2: 1.5, 4: 2.0})   # s(2) = 1.5, s(4) = 2: easy fractions


def test_admission_needs_the_top_rung_in_time_on_the_widest_allocation():
    policy = Reallocation(HALF, max_gpus_per_trial=4)
    # 100 steps of 10 s on 1 GPU = 1000 s; on 4 GPUs 500 s.
    assert policy.admit(time_left_s=500.0, s_per_step=10.0, steps=100)
    assert not policy.admit(time_left_s=499.0, s_per_step=10.0, steps=100)
    narrow = Reallocation(HALF, max_gpus_per_trial=1)
    assert not narrow.admit(time_left_s=999.0, s_per_step=10.0, steps=100)
    assert policy.admit(time_left_s=float("inf"), s_per_step=10.0, steps=10**9)


def test_width_saves_more_than_the_restart_cost_or_stays():
    policy = Reallocation(HALF, max_gpus_per_trial=4, restart_s=100.0)
    # 30 steps of 10 s: on 2 GPUs 300 * (1 - 1/1.5) = 100 s saved (not more than 100);
    # on 4 GPUs 300 * (1 - 1/2) = 150 s saved.
    assert policy.saved_s(2, 30, 10.0) == pytest.approx(100.0)
    assert policy.saved_s(4, 30, 10.0) == pytest.approx(150.0)
    assert policy.width(free_gpus=4, steps_left=30, s_per_step=10.0) == 4
    assert policy.width(free_gpus=2, steps_left=30, s_per_step=10.0) == 1
    assert policy.width(free_gpus=2, steps_left=31, s_per_step=10.0) == 2
    assert policy.width(free_gpus=8, steps_left=30, s_per_step=10.0) == 4   # capped
    assert policy.width(free_gpus=1, steps_left=10**6, s_per_step=10.0) == 1


def test_width_from_a_wider_start_counts_only_the_extra_gain():
    policy = Reallocation(HALF, max_gpus_per_trial=4, restart_s=40.0)
    # From 2 GPUs to 4: 120 s * (1/1.5 - 1/2) = 20 s saved, below the restart cost.
    assert policy.width(free_gpus=4, steps_left=12, s_per_step=10.0, current=2) == 2
    assert policy.width(free_gpus=4, steps_left=30, s_per_step=10.0, current=2) == 4


def test_among_equal_savings_the_fewest_gpus():
    held = Speedup({1: 1.0, 2: 2.0})        # s(g) = 2 for every g >= 2
    assert Reallocation(held, 8).width(free_gpus=8, steps_left=10, s_per_step=1.0) == 2
    assert Reallocation(LINEAR, 8).width(free_gpus=8, steps_left=10, s_per_step=1.0) == 8


def test_bad_arguments_are_all_named():
    with pytest.raises(ValueError, match="max_gpus_per_trial is 0.*restart_s is -1"):
        Reallocation(HALF, max_gpus_per_trial=0, restart_s=-1)


def test_a_journal_with_admission_closed_replays(tmp_path):
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "m", "max", None, None)
    original = ASHA(1, 9, 3, "max", 30)
    for i in range(4):
        job = original.next_job(f"t{i}")
        store.journal_add("job", job.trial_id, job.to_step, bracket=job.bracket, flag=job.new)
        store.journal_add("rung", job.trial_id, job.to_step, i / 10)
        original.on_rung(job.trial_id, job.to_step, i / 10)
    store.journal_add("close", "*")
    original.close_admission()
    job = original.next_job("t4")
    store.journal_add("job", job.trial_id, job.to_step, bracket=job.bracket, flag=job.new)
    rebuilt = ASHA(1, 9, 3, "max", 30)
    assert replay(rebuilt, store.journal()) == len(store.journal())
    assert rebuilt.next_job("t5") == original.next_job("t5")
    ids = {e["trial_id"] for e in store.journal()} - {"*"}
    assert {t: rebuilt.status(t) for t in ids} == {t: original.status(t) for t in ids}


# -- the real controller in simulation --------------------------------------------------------
ASHA_27 = {"type": "asha", "min_resource": 1, "max_resource": 27, "reduction_factor": 3}
FOUR_GPUS = SimInstanceType("sim-4gpu", slots=4, on_demand_per_hour=4.0, spot_per_hour=1.0)


def _run(seed, reallocation):
    # 2 instances x 4 GPUs, 81 configs of 27 steps of 10 s: plain ASHA cannot finish by 400 s.
    return simulate_wired(Synth(), metric="acc", mode="max", scheduler=ASHA_27, num_trials=81,
                    workers=2, instance_type=FOUR_GPUS, scaling=Static(2), time_budget_s=400.0,
                    speedup=RESNET50_CIFAR10, setup_s=10.0, seed=seed,
                    reallocation=reallocation)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_near_a_deadline_the_policy_widens_top_trials_and_stops_exploring(seed):
    plain = _run(seed, None)
    hyper = _run(seed, Reallocation(RESNET50_CIFAR10, max_gpus_per_trial=4, restart_s=20.0))
    assert plain.deadline_met and hyper.deadline_met
    assert all(s["gpus"] == 1 for s in plain.store.segments())
    wide = [s for s in hyper.store.segments() if s["gpus"] > 1]
    assert wide and max(s["gpus"] for s in wide) <= 4
    # Admission closed (once, journaled): fewer trials than plain ASHA.
    assert [e["kind"] for e in hyper.store.journal()].count("close") == 1
    assert len(hyper.trials) < len(plain.trials)
    assert hyper.best_value >= plain.best_value
    # Each multi-GPU segment ran whole on one instance, never over its slots.
    for s in wide:
        overlapping = [o for o in hyper.store.segments()
                       if o["instance_id"] == s["instance_id"] and o["started_at"] is not None
                       and o["started_at"] <= s["started_at"]
                       and (o["finished_at"] is None or o["finished_at"] > s["started_at"])]
        assert sum(o["gpus"] for o in overlapping) <= 4


def test_without_a_policy_the_sweep_is_unchanged():
    a, b = _run(5, None), _run(5, None)
    assert a.wall_s == b.wall_s and a.best_value == b.best_value
    assert "close" not in {e["kind"] for e in a.store.journal()}


@pytest.mark.slow
def test_the_sweep_config_turns_the_policy_on_for_a_fixed_cluster_only(tmp_path):
    from tuner import ConfigError, load_sweep, tune, uniform

    base = {"name": "hs", "trainable": "tests.trainables:quadratic", "metric": "score",
            "mode": "max", "space": {"x": uniform(0.0, 1.0), "sleep": 0.02},
            "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                          "reduction_factor": 3, "deadline_policy": "hypersched"},
            "num_trials": 9, "seed": 0, "provider": {"type": "local", "workers": 1, "slots": 2}}
    with pytest.raises(ConfigError) as err:                       # no deadline to race
        load_sweep({**base, "budget": {"cost": 1.0}})
    assert err.value.field == "scheduler.deadline_policy"
    with pytest.raises(ConfigError) as err:                       # an elastic cluster
        load_sweep({**base, "budget": {"time": 60},
                    "provider": {"type": "local", "workers": 1, "scaling": "plan"}})
    assert err.value.field == "scheduler.deadline_policy"
    with pytest.raises(ConfigError) as err:
        load_sweep({**base, "budget": {"time": 60},
                    "scheduler": {**base["scheduler"], "deadline_policy": "greedy"}})
    assert err.value.field == "scheduler.deadline_policy"
    result = tune(base, time_budget="1m", cost_budget=None, experiment_dir=tmp_path / "exp")
    assert result.state == "finished" and len(result.trials) == 9
