"""The planners: hand-checked plans, never dearer than a static cluster, fast, and the
``elastune plan`` command that spends nothing and starts nothing."""

from __future__ import annotations

import json
import math
import os
import random
import time
from pathlib import Path

import pytest

from budgets import (
    DEFAULT_MARGIN,
    LINEAR,
    RESNET50_CIFAR10,
    BootLatency,
    InstanceType,
    JobShape,
    Plan,
    Profile,
    Speedup,
    billed,
    choose_instance,
    initial_accuracy_plan,
    plan_accuracy_max,
    plan_cost_min,
    plan_static,
    stage_time,
    trial_counts,
)
from tuner.cli import main

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_KEYS = {"feasible", "predicted_cost_usd", "predicted_wall_s", "num_trials", "rungs",
                 "timeline"}
RUNG_KEYS = {"rung", "trials", "resource", "gpus_per_trial", "workers", "start_s", "end_s"}
POINT_KEYS = {"t_s", "workers", "instance_type", "spot"}


def gpu(gpus: int = 1, per_hour: float = 3.6, spot: float | None = None,
        name: str = "x1") -> InstanceType:
    return InstanceType("aws", name, "T4", gpus, 4, 16, "us-east-1", per_hour, spot)


def profile(s_per_step: float = 10.0, boot: float = 0.0, **kw) -> Profile:
    return Profile(s_per_step, boot=BootLatency.fixed(boot), **kw)


NINE = JobShape(9, 1, 9, 3)  # stages: 9 trials x 1 step, 3 x 2 steps, 1 x 6 steps


def replay_cost(plan: Plan, price_per_hour: float) -> float:
    """What the plan's instances cost, billed one by one (oldest released first)."""
    boot, minimum = plan.inputs["boot_s"], plan.inputs["billing_minimum_s"]
    alive: list[float] = []  # launch times, oldest first
    lives: list[float] = []
    previous = 0
    for r in plan.rungs:
        if r.workers > previous:
            alive += [max(r.start_s - boot, 0.0)] * (r.workers - previous)
        for _ in range(previous - r.workers):
            lives.append(r.start_s - alive.pop(0))
        previous = r.workers
    lives += [plan.predicted_wall_s - t for t in alive]
    return sum(billed(price_per_hour, life, minimum) for life in lives)


def check_consistent(plan: Plan, price_per_hour: float, max_workers: int | None = None) -> None:
    assert plan.predicted_cost_usd == pytest.approx(replay_cost(plan, price_per_hour), abs=1e-6)
    assert plan.rungs[0].start_s == plan.inputs["boot_s"]
    for a, b in zip(plan.rungs, plan.rungs[1:], strict=False):
        assert a.end_s == b.start_s
    assert plan.rungs[-1].end_s == plan.predicted_wall_s
    assert plan.timeline[0].t_s == 0 and plan.timeline[-1].workers == 0
    assert plan.timeline[-1].t_s == plan.predicted_wall_s
    if max_workers is not None:
        assert max(p.workers for p in plan.timeline) <= max_workers


# -- the timing model --------------------------------------------------------------------------

def test_job_shape_rungs_and_stage_sizes():
    shape = JobShape(1000, 1, 81, 3)
    assert shape.rungs() == [1, 3, 9, 27, 81]
    assert shape.stage_sizes() == [1000, 333, 111, 37, 12]
    assert shape.stage_steps() == [1, 2, 6, 18, 54]
    assert JobShape(2, 1, 10, 3).rungs() == [1, 3, 9, 10]
    assert JobShape(2, 1, 10, 3).stage_sizes() == [2, 1, 1, 1]
    with pytest.raises(ValueError, match="reduction_factor is 1, but must be"):
        JobShape(9, 1, 9, 1)
    with pytest.raises(ValueError, match="num_trials is 0"):
        JobShape(0, 1, 9, 3)


def test_stage_time_counts_waves_and_stragglers():
    p = profile(2.0, setup_s=5.0, restore_s=1.0, checkpoint_s=1.0)
    one = 5 + 1 + 3 * 2 + 1
    assert stage_time(8, 3, 2, 4, p) == one            # 8 trials on 2 x 4 slots: one wave
    assert stage_time(9, 3, 2, 4, p) == 2 * one        # the ninth needs a second wave
    assert stage_time(9, 3, 2, 4, p, restore=False) == 2 * (one - 1)
    assert stage_time(8, 3, 2, 4, p, straggler=0.5) == pytest.approx(1.5 * one)
    fast = Profile(2.0, speedup=RESNET50_CIFAR10)
    assert stage_time(1, 100, 1, 1, fast, gpus=4) == pytest.approx(200 / 3.42)


# -- hand-checked plans --------------------------------------------------------------------------

def test_no_deadline_one_worker_costs_the_gpu_seconds():
    plan = plan_cost_min(NINE, profile(), gpu(), None)
    # 9 x 10 s + 3 x 20 s + 1 x 60 s = 210 GPU-seconds at 0.001 USD/s.
    assert plan.feasible and plan.reason == ""
    assert plan.predicted_cost_usd == pytest.approx(0.21)
    assert plan.predicted_wall_s == 210
    assert [(r.trials, r.resource, r.workers) for r in plan.rungs] == [(9, 1, 1), (3, 3, 1),
                                                                        (1, 9, 1)]
    assert [(p.t_s, p.workers) for p in plan.timeline] == [(0, 1), (210, 0)]
    check_consistent(plan, 3.6)


def test_tight_deadline_adds_workers_to_rung_0():
    plan = plan_cost_min(NINE, profile(), gpu(), 150)
    # Two workers for rung 0 (5 waves, 50 s), a third for rung 1 (20 s), one for rung 2 (60 s).
    # The two oldest go at 70 s (70 s each); the third, inside its 60 s minimum, stays on until
    # 130 s (80 s): 220 s = 0.22 USD. Every other plan that ends by 150 s costs more.
    assert plan.feasible and plan.predicted_wall_s == 130 <= 150
    assert [r.workers for r in plan.rungs] == [2, 3, 1]
    assert plan.predicted_cost_usd == pytest.approx(0.22)
    assert [(p.t_s, p.workers) for p in plan.timeline] == [(0, 2), (50, 3), (70, 1), (130, 0)]
    check_consistent(plan, 3.6)
    # Without a billing minimum the same work costs what one worker would: 210 GPU-seconds.
    free = plan_cost_min(NINE, profile(), gpu(), 150, billing_minimum_s=0)
    assert free.predicted_cost_usd == pytest.approx(0.21) and free.rungs[0].workers > 1
    assert free.predicted_wall_s <= 150


def test_impossible_deadline_is_infeasible_with_the_fastest_plans_figures():
    plan = plan_cost_min(NINE, profile(), gpu(), 80)  # fastest: 10 + 20 + 60 = 90 s
    assert not plan.feasible
    assert "deadline" in plan.reason and "90" in plan.reason
    assert plan.predicted_wall_s == 90
    assert [r.workers for r in plan.rungs] == [9, 3, 1]
    check_consistent(plan, 3.6)


def test_boot_is_billed_and_scale_ups_launch_ahead():
    plan = plan_cost_min(NINE, profile(boot=100), gpu(), 100 + 30 + 20 + 60)
    assert plan.predicted_wall_s <= 210 and plan.rungs[0].start_s == 100
    check_consistent(plan, 3.6)
    slow = plan_cost_min(JobShape(3, 1, 3, 3), profile(boot=100), gpu(), None)
    # One instance: 100 s booting, then 3 x 10 s and 1 x 20 s.
    assert slow.predicted_wall_s == 150 and slow.predicted_cost_usd == pytest.approx(0.15)


def test_local_cap_on_workers_holds_in_the_timeline():
    p = profile(1.0, boot=2.0)
    plan = plan_cost_min(JobShape(27, 1, 27, 3), p, gpu(), 60, max_workers=2)
    assert all(r.workers <= 2 for r in plan.rungs)
    check_consistent(plan, 3.6, max_workers=2)


# -- never loses to a static cluster ---------------------------------------------------------------

def test_cost_min_never_loses_to_any_static_plan_and_meets_the_deadline():
    rng = random.Random(20261202)
    for _ in range(150):
        eta = rng.choice([2, 3, 4])
        shape = JobShape(rng.randint(1, 200), rng.choice([1, 2]), rng.choice([8, 27, 64, 81]),
                         eta)
        inst = gpu(rng.choice([1, 2, 4, 8]), rng.choice([0.5, 3.6, 12.0]))
        p = Profile(rng.choice([0.1, 1.0, 5.0]), setup_s=rng.choice([0.0, 10.0]),
                    restore_s=rng.choice([0.0, 3.0]), checkpoint_s=rng.choice([0.0, 2.0]),
                    boot=BootLatency.fixed(rng.choice([0, 2, 45, 120])),
                    speedup=rng.choice([LINEAR, RESNET50_CIFAR10]))
        minimum = rng.choice([0, 60, 300])
        g = rng.choice([g for g in (1, 2) if g <= inst.gpus])
        fastest = plan_cost_min(shape, p, inst, 1e-9, gpus_per_trial=g,
                                billing_minimum_s=minimum).predicted_wall_s
        deadline = fastest * rng.choice([1.0, 1.25, 1.5, 3.0, 6.0])
        plan = plan_cost_min(shape, p, inst, deadline, gpus_per_trial=g,
                             billing_minimum_s=minimum)
        assert plan.feasible and plan.predicted_wall_s <= deadline
        check_consistent(plan, inst.on_demand_per_hour)
        slots = inst.gpus // g
        for workers in range(1, -(-shape.num_trials // slots) + 2):
            static = plan_static(shape, p, inst, workers, gpus_per_trial=g,
                                 billing_minimum_s=minimum, deadline_s=deadline)
            if static.feasible:
                assert plan.predicted_cost_usd <= static.predicted_cost_usd + 1e-9, (
                    shape, workers, plan.rungs, static.predicted_cost_usd)


def test_static_plan_is_the_same_model_with_a_fixed_cluster():
    static = plan_static(NINE, profile(), gpu(), 3, deadline_s=110)
    assert [r.workers for r in static.rungs] == [3, 3, 3]
    assert static.predicted_wall_s == 30 + 20 + 60 and static.feasible
    assert static.predicted_cost_usd == pytest.approx(3 * 110 * 0.001)
    assert static.planner == "static"
    late = plan_static(NINE, profile(), gpu(), 1, deadline_s=100)
    assert not late.feasible and "deadline" in late.reason


# -- packing and instance choice ---------------------------------------------------------------

def test_multi_gpu_instances_pack_trials():
    shape = JobShape(8, 1, 1, 3)  # one stage of 8 one-step trials
    p = Profile(10.0, boot=BootLatency.fixed(0), speedup=Speedup({1: 1.0}))  # no gain from g
    four = plan_cost_min(shape, p, gpu(4, 14.4), deadline_s=10)
    assert four.rungs[0].workers == 2 and four.predicted_wall_s == 10  # 4 trials per instance
    two_each = plan_cost_min(shape, p, gpu(4, 14.4), deadline_s=10, gpus_per_trial=2)
    assert two_each.rungs[0].workers == 4 and two_each.rungs[0].gpus_per_trial == 2
    with pytest.raises(ValueError, match="does not fit"):
        plan_cost_min(shape, p, gpu(1), 10, gpus_per_trial=2)


def test_choose_instance_keeps_the_cheapest_feasible_type():
    shape = JobShape(81, 1, 27, 3)
    p = profile(2.0, boot=60)
    cheap, dear = gpu(1, 1.0, name="cheap"), gpu(1, 2.0, name="dear")
    packed = gpu(4, 2.0, name="packed")  # 0.5 USD per GPU-hour
    plan = choose_instance(shape, p, [dear, cheap, packed], 3600)
    assert plan.feasible and plan.inputs["instance_type"] == "packed"
    assert set(plan.inputs["compared"]) == {"cheap", "dear", "packed"}
    alone = plan_cost_min(shape, p, packed, 3600)
    assert plan.predicted_cost_usd == alone.predicted_cost_usd
    # Spot: only types with a spot price compete.
    spot = choose_instance(shape, p, [dear, gpu(1, 2.0, 0.5, name="spotty")], 3600, spot=True)
    assert spot.inputs["instance_type"] == "spotty" and spot.timeline[0].spot
    with pytest.raises(ValueError, match="no instance type"):
        choose_instance(shape, p, [dear], 3600, spot=True)


def test_wider_trials_for_survivors_only():
    """SEER: many narrow trials early; the few survivors get the GPUs that would sit idle."""
    shape = JobShape(64, 1, 64, 4)
    p = Profile(1.0, boot=BootLatency.fixed(0), speedup=RESNET50_CIFAR10)
    inst = gpu(8, 8.0)
    options = [1, 2, 4, 8]
    narrow = plan_cost_min(shape, p, inst, None)
    wide = plan_cost_min(shape, p, inst, None, gpu_options=options)
    assert [r.gpus_per_trial for r in narrow.rungs] == [1, 1, 1, 1]
    assert wide.rungs[0].gpus_per_trial == 1 and wide.rungs[-1].gpus_per_trial == 8
    assert wide.predicted_cost_usd < narrow.predicted_cost_usd
    check_consistent(wide, 8.0)
    # Under a deadline one GPU per trial cannot meet, widening can.
    fastest_narrow = plan_cost_min(shape, p, inst, 1e-9).predicted_wall_s
    assert not plan_cost_min(shape, p, inst, fastest_narrow - 1).feasible
    tight = plan_cost_min(shape, p, inst, fastest_narrow - 1, gpu_options=options)
    assert tight.feasible and tight.predicted_wall_s < fastest_narrow
    assert tight.rungs[0].gpus_per_trial == 1 and tight.rungs[-1].gpus_per_trial > 1


# -- accuracy-max ------------------------------------------------------------------------------

def test_accuracy_max_buys_more_trials_with_more_money_and_stays_in_budget():
    p = profile(10.0, boot=30)
    counts = []
    for budget in (0.15, 0.5, 1.0, 5.0, 25.0):
        plan = plan_accuracy_max(1, 9, 3, p, gpu(), 3600, budget)
        assert plan.feasible and plan.planner == "accuracy-max"
        assert plan.predicted_cost_usd <= budget and plan.predicted_wall_s <= 3600
        following = [n for n in trial_counts(3) if n > plan.num_trials][:1]
        for n in following:  # the next count up would break a budget
            bigger = plan_cost_min(JobShape(n, 1, 9, 3), p, gpu(), 3600)
            assert not bigger.feasible or bigger.predicted_cost_usd > budget
        counts.append(plan.num_trials)
    assert counts == sorted(counts) and counts[-1] > counts[0]


def test_accuracy_max_reports_when_nothing_fits():
    plan = plan_accuracy_max(1, 9, 3, profile(), gpu(), 3600, 0.001)
    assert not plan.feasible and "do not fit" in plan.reason and plan.num_trials == 1
    tight = plan_accuracy_max(1, 9, 3, profile(), gpu(), 10, None)
    assert not tight.feasible and "deadline" in tight.reason


def test_accuracy_max_rescales_a_profile_the_deadline_refutes():
    # One trial to 9 steps at 10 s a step takes 90 s: nothing ends in 45 s on the profile.
    p = profile(10.0)
    refused = plan_accuracy_max(1, 9, 3, p, gpu(), 45, 1.0, billing_minimum_s=0)
    assert not refused.feasible and "do not fit" in refused.reason
    assert "step_scale" not in refused.inputs
    plan = plan_accuracy_max(1, 9, 3, p, gpu(), 45, 1.0, billing_minimum_s=0,
                             rescale_late=True)
    scale = plan.inputs["step_scale"]
    # Steps at half their time (5 s) let one trial end by 45 s; a little slower does not.
    assert 0.499 <= scale <= 0.5
    one = JobShape(1, 1, 9, 3)
    assert plan_cost_min(one, p.scaled(scale), gpu(), 45, billing_minimum_s=0).feasible
    assert not plan_cost_min(one, p.scaled(scale * 1.01), gpu(), 45,
                             billing_minimum_s=0).feasible
    # The count is the one chosen on the scaled profile, still marked as not on the prior.
    again = plan_accuracy_max(1, 9, 3, p.scaled(scale), gpu(), 45, 1.0, billing_minimum_s=0)
    assert again.feasible and plan.num_trials == again.num_trials > 1
    assert not plan.feasible and "times its step times" in plan.reason
    assert plan.predicted_wall_s <= 45 and plan.predicted_cost_usd <= 1.0
    # Over the cost budget even at its fastest, or late on boots alone: still refused.
    for over in (plan_accuracy_max(1, 9, 3, p, gpu(), 45, 0.01, billing_minimum_s=0,
                                   rescale_late=True),
                 plan_accuracy_max(1, 9, 3, profile(10.0, boot=60), gpu(), 45, 1.0,
                                   billing_minimum_s=0, rescale_late=True)):
        assert not over.feasible and "do not fit" in over.reason
        assert "step_scale" not in over.inputs


def test_initial_accuracy_plan_chooses_at_the_deadline_then_rescales_at_the_margin():
    """The first plan of a sweep whose count the planner chooses, one sequence for `elastune
    run` and the benchmark: the most trials at the deadline itself (the count is a ceiling
    the re-planner's admission trims), the step times rescaled when nothing is on time, and
    nothing else."""
    p = profile(10.0, boot=60)
    plan = initial_accuracy_plan(1, 9, 3, p, gpu(), 300.0, 0.5)
    same = plan_accuracy_max(1, 9, 3, p, gpu(), 300.0, 0.5)
    assert plan.feasible and (plan.num_trials, plan.predicted_cost_usd) == (
        same.num_trials, same.predicted_cost_usd)
    assert plan.num_trials == 15 and plan.predicted_wall_s <= 300 and plan.predicted_cost_usd <= 0.5
    # Keeping the re-planner's margin would have chosen fewer: 12.
    kept = plan_accuracy_max(1, 9, 3, p, gpu(), 300.0 * (1 - DEFAULT_MARGIN), 0.5)
    assert kept.num_trials == 12
    # The first stage booted at the profile's mean boot unless told: 120 s for U(60, 180).
    slow = Profile(10.0, boot=BootLatency(60, 180))
    assert initial_accuracy_plan(1, 9, 3, slow, gpu(), 600.0, 0.5).inputs["boot_s"] == 120.0
    told = initial_accuracy_plan(1, 9, 3, slow, gpu(), 600.0, 0.5, boot_s=168.0)
    assert told.inputs["boot_s"] == 168.0
    # Nothing on time on the profile (one trial: 90 s of steps, 45 s): the count at the step
    # times the deadline less the margin allows, as `plan_accuracy_max(rescale_late=True)`.
    late = initial_accuracy_plan(1, 9, 3, profile(10.0), gpu(), 45.0, 1.0, billing_minimum_s=0)
    again = plan_accuracy_max(1, 9, 3, profile(10.0), gpu(), 45 * (1 - DEFAULT_MARGIN), 1.0,
                              billing_minimum_s=0, rescale_late=True)
    assert not late.feasible and late.num_trials == again.num_trials > 1
    assert late.inputs["step_scale"] == again.inputs["step_scale"] < 0.5
    assert late.predicted_wall_s <= 45 * (1 - DEFAULT_MARGIN)
    # Over the budget even so: the deadline's refusal, with no fraction.
    over = initial_accuracy_plan(1, 9, 3, profile(10.0), gpu(), 45.0, 0.01, billing_minimum_s=0)
    assert not over.feasible and "step_scale" not in over.inputs and "do not fit" in over.reason
    # No deadline: the one plan.
    free = initial_accuracy_plan(1, 9, 3, p, gpu(), None, 0.5)
    assert free.feasible and free.num_trials == plan_accuracy_max(1, 9, 3, p, gpu(), None,
                                                                  0.5).num_trials
    with pytest.raises(ValueError, match="margin"):
        initial_accuracy_plan(1, 9, 3, p, gpu(), 300.0, 0.5, margin=1.0)


def test_profile_scaled_is_a_fresh_profile_with_shorter_steps():
    p = profile(10.0, setup_s=3.0, first_segment_s=8.0)
    p.observe(steps=2, seconds=100.0)
    half = p.scaled(0.5)
    assert half.observations == 0 and half.seconds_per_step() == 5.0
    assert half.first_segment_s == 4.0 and half.setup_s == 3.0 and half.boot == p.boot
    with pytest.raises(ValueError, match="factor"):
        p.scaled(0.0)


def test_accuracy_max_picks_among_instance_types_and_user_candidates():
    plan = plan_accuracy_max(1, 27, 3, profile(5.0, boot=60), [gpu(1, 1.0, name="a"),
                                                               gpu(1, 3.0, name="b")],
                             1800, 2.0, candidates=[27, 81, 243, 100])
    assert plan.feasible and plan.num_trials in (27, 81, 100, 243)
    assert plan.inputs["instance_type"] == "a"


def test_accuracy_max_with_a_gentler_first_cut():
    p = profile(10.0, boot=30)   # $3.6/h: a second of one instance is $0.001
    for budget in (1.0, 5.0):
        plain = plan_accuracy_max(1, 27, 3, p, gpu(), 3600, budget)
        gentle = plan_accuracy_max(1, 27, 3, p, gpu(), 3600, budget, first_reduction=2)
        assert gentle.feasible and gentle.predicted_cost_usd <= budget
        n = gentle.num_trials
        assert [r.resource for r in gentle.rungs] == [1, 3, 9, 27]
        assert [r.trials for r in gentle.rungs] == JobShape(n, 1, 27, 3, 2).stage_sizes()
        assert gentle.inputs["first_reduction"] == 2 and plain.inputs["first_reduction"] is None
        assert gentle.inputs["shape"]["first_reduction"] == 2
        # the most trials that fit with that cut: the next count up does not
        up = [k for k in trial_counts(3) if k > n][0]
        over = plan_cost_min(JobShape(up, 1, 27, 3, 2), p, gpu(), 3600)
        assert not over.feasible or over.predicted_cost_usd > budget
        # half of the first stage trains on rather than a third: fewer trials fit
        assert n <= plain.num_trials
    with pytest.raises(ValueError, match="first_reduction"):
        JobShape(9, 1, 9, 3, first_reduction=1)


def test_accuracy_max_may_start_one_rung_up_when_a_whole_ladder_fits_there():
    p = profile(10.0, boot=30)   # $3.6/h: a second of one instance is $0.001
    # R = 27, eta = 3. From r = 3 a ladder is 3 rungs (3, 9, 27), so it needs 9 trials:
    # 9 x 3 + 3 x 6 + 1 x 18 = 63 steps, 630 s of training, over $0.63.
    for budget in (1.0, 5.0):
        fixed = plan_accuracy_max(1, 27, 3, p, gpu(), 3600, budget)
        raised = plan_accuracy_max(1, 27, 3, p, gpu(), 3600, budget, raise_min_resource=True)
        assert fixed.rungs[0].resource == 1
        assert raised.feasible and [r.resource for r in raised.rungs] == [3, 9, 27]
        assert raised.inputs["shape"]["min_resource"] == 3 and raised.num_trials >= 9
        assert raised.predicted_cost_usd <= budget
        # the most trials that fit from r = 3: the next count up does not
        up = [n for n in trial_counts(3) if n > raised.num_trials][0]
        over = plan_cost_min(JobShape(up, 3, 27, 3), p, gpu(), 3600)
        assert not over.feasible or over.predicted_cost_usd > budget
        # a trial from r = 3 trains more steps, so fewer of them fit
        assert raised.num_trials < fixed.num_trials
    # Too poor for 9 trials from r = 3: it keeps r = 1 and the most trials that fit there.
    poor = plan_accuracy_max(1, 27, 3, p, gpu(), 3600, 0.4, raise_min_resource=True)
    assert poor.feasible and poor.rungs[0].resource == 1
    assert poor.num_trials == plan_accuracy_max(1, 27, 3, p, gpu(), 3600, 0.4).num_trials
    # No rung to raise to: r * eta must stay below R, so at least two rungs remain.
    assert plan_accuracy_max(3, 9, 3, p, gpu(), 3600, 5.0,
                             raise_min_resource=True).rungs[0].resource == 3


# -- speed -------------------------------------------------------------------------------------

def test_a_thousand_trial_job_plans_at_every_deadline():
    # The solve-time target (1 s for a 1,000-trial job) is measured and printed by
    # benchmarks/planner.py (plan_solve_s_p95); here: every deadline from the fastest plan's
    # wall on has a feasible plan, a later deadline never costs more, and no solve hangs (10 s
    # is a guard, not the target).
    shape = JobShape(1000, 1, 81, 3)
    p = Profile(2.0, setup_s=20, restore_s=5, checkpoint_s=5, speedup=RESNET50_CIFAR10)
    times = []
    for inst in (gpu(1, 1.0), gpu(4, 4.0)):
        fastest = plan_cost_min(shape, p, inst, 1e-9).predicted_wall_s
        costs = []
        for factor in (1.0, 1.25, 1.5, 3.0, 6.0, None):
            deadline = None if factor is None else fastest * factor
            start = time.perf_counter()
            plan = plan_cost_min(shape, p, inst, deadline)
            times.append(time.perf_counter() - start)
            assert plan.feasible
            assert deadline is None or plan.predicted_wall_s <= deadline + 1e-6
            costs.append(plan.predicted_cost_usd)
        assert costs == sorted(costs, reverse=True), costs
    assert max(times) < 10.0, times


# -- elastune plan -----------------------------------------------------------------------------

def test_plan_command_prints_one_json_object_and_starts_nothing(capsys, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a Redis folder would go
    code = main(["plan", str(ROOT / "examples" / "digits.yaml"), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip().count("\n") == 0
    doc = json.loads(out)
    assert set(doc) >= CONTRACT_KEYS
    assert doc["feasible"] is True and doc["num_trials"] == 27
    assert doc["predicted_wall_s"] <= 180 and 0 < doc["predicted_cost_usd"] <= 1.0
    assert [r["trials"] for r in doc["rungs"]] == [27, 9, 3, 1]
    assert all(set(r) == RUNG_KEYS for r in doc["rungs"])
    assert all(set(p) == POINT_KEYS for p in doc["timeline"])
    assert max(p["workers"] for p in doc["timeline"]) <= 2  # provider.workers
    assert doc["timeline"][0]["instance_type"] == "local"
    assert not [n for n in os.listdir(tmp_path) if n.startswith("elastune-redis")]


def test_plan_command_takes_budget_flags_and_plans_trials_when_the_sweep_does_not(tmp_path,
                                                                                 capsys):
    # (Following the plan: a fixed cluster's preview is that cluster's plan, as it runs.)
    text = (ROOT / "examples" / "digits.yaml").read_text().replace("num_trials: 27\n", "")
    text = text.replace("price_per_hour: 1.0}", "price_per_hour: 1.0, scaling: plan}")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text + "profile: {seconds_per_step: 0.5, boot_s: [1, 3]}\n")
    assert main(["plan", str(sweep), "--json", "--cost-budget", "0.05"]) == 0
    small = json.loads(capsys.readouterr().out)
    assert main(["plan", str(sweep), "--json", "--cost-budget", "0.5"]) == 0
    large = json.loads(capsys.readouterr().out)
    assert small["planner"] == "accuracy-max" and small["feasible"]
    assert small["predicted_cost_usd"] <= 0.05 and large["predicted_cost_usd"] <= 0.5
    assert large["num_trials"] >= small["num_trials"]
    assert main(["plan", str(sweep)]) == 0  # the human form
    assert "predicted cost" in capsys.readouterr().out


def test_plan_command_chooses_the_count_with_the_function_the_benchmark_calls(tmp_path, capsys):
    # A sweep with num_trials left out: the count is budgets.initial_accuracy_plan's on the
    # sweep's own profile, type and shape (the planner benchmark's accuracy sweeps call it),
    # at the time budget itself with the mean boot: more than keeping the margin would.
    from tuner._config import load_sweep
    from tuner._planning import instance_types_for, profile_for, shape_choice

    # (Following the plan: a fixed cluster's preview is that cluster's plan, as it runs.)
    text = (ROOT / "examples" / "digits.yaml").read_text().replace("num_trials: 27\n", "")
    text = text.replace("price_per_hour: 1.0}", "price_per_hour: 1.0, scaling: plan}")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text + "profile: {seconds_per_step: 2.0, boot_s: [10, 30]}\n")
    assert main(["plan", str(sweep), "--json", "--time-budget", "150s",
                 "--cost-budget", "0.5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    spec = load_sweep(str(sweep), time_budget="150s", cost_budget=0.5)
    s, types = spec.scheduler, instance_types_for(spec)
    args = (s.min_resource, s.max_resource, s.reduction_factor, profile_for(spec), types[0])
    kw = dict(max_workers=spec.provider.workers, billing_minimum_s=spec.provider.billing_minimum_s,
              **shape_choice(spec))
    same = initial_accuracy_plan(*args, 150.0, 0.5, **kw)
    assert doc["feasible"] and doc["num_trials"] == same.num_trials
    assert doc["predicted_cost_usd"] == pytest.approx(same.predicted_cost_usd)
    assert doc["inputs"]["boot_s"] == pytest.approx(20.0)   # the mean of U(10, 30)
    kept = plan_accuracy_max(*args, 150.0 * (1 - DEFAULT_MARGIN), 0.5, **kw,
                             boot_s=profile_for(spec).boot.quantile(0.9))
    assert kept.feasible and doc["num_trials"] == 36 > kept.num_trials == 18


def test_plan_command_marks_a_plan_over_the_cost_budget_infeasible(capsys, tmp_path,
                                                                    monkeypatch):
    # In an empty folder: `plan` reads the step times of earlier runs under ./experiments,
    # and after the README's first command (a digits sweep of a few seconds) the clone's own
    # folder has one whose plan fits even this budget.
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(ROOT / "examples" / "digits.yaml"), "--json",
                 "--cost-budget", "0.001", "--time-budget", "30s"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] is False and doc["reason"]


def test_plan_command_bad_profile_exits_2_naming_the_field(tmp_path, capsys):
    text = (ROOT / "examples" / "digits.yaml").read_text()
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text + "profile: {seconds_per_step: 0}\n")
    assert main(["plan", str(sweep), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "profile.seconds_per_step" in err
    sweep.write_text(text + "profile: {speedup: quadratic}\n")
    assert main(["plan", str(sweep)]) == 2
    assert "profile.speedup" in capsys.readouterr().err


def test_plan_command_prices_cloud_instance_types(tmp_path, capsys):
    text = (ROOT / "examples" / "digits.yaml").read_text().replace(
        "provider: {type: local, workers: 2, slots: 1, price_per_hour: 1.0}",
        "provider: {type: aws, region: us-east-1, instance_types: [g5.xlarge, g4dn.xlarge], "
        "spot: true}")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text.replace("budget: {time: 3m, cost: 1.0}", "budget: {time: 1h}"))
    assert main(["plan", str(sweep), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] and doc["timeline"][0]["instance_type"] == "g4dn.xlarge"
    assert doc["timeline"][0]["spot"] is True
    sweep.write_text(text.replace("g5.xlarge", "g9.xlarge"))
    assert main(["plan", str(sweep), "--json"]) == 2
    assert "provider.instance_types" in capsys.readouterr().err


def test_infinite_deadline_is_written_as_null():
    plan = plan_cost_min(NINE, profile(), gpu(), None)
    doc = json.loads(json.dumps(plan.to_json(), allow_nan=False))
    assert doc["inputs"]["deadline_s"] is None
    assert math.isclose(doc["predicted_cost_usd"], 0.21)


@pytest.mark.timeout(10)
def test_trial_counts_are_bounded_by_the_cap_not_by_eta():
    # A huge reduction factor (a fuzzed sweep found it) must not cost 2 * eta steps.
    assert trial_counts(10**12, 100) == list(range(1, 101))
    assert trial_counts(2, 20) == [1, 2, 3, 4, 6, 8, 12, 16]


@pytest.mark.parametrize("eta", [2, 3, 4])
@pytest.mark.parametrize("first", [None, 2, 5])
def test_the_planners_job_shape_runs_the_stages_the_scheduler_runs(eta, first):
    # The planner (budgets) does not import the schedulers (tuner): its JobShape keeps its own
    # rungs and stage sizes, which must be the ones SuccessiveHalving runs.
    from tuner.schedulers import SuccessiveHalving
    for n in (1, 2, 7, 27, 81, 100, 1000):
        for r, big_r in ((1, 9), (1, 27), (2, 50), (3, 3), (1, 100)):
            shape = JobShape(n, r, big_r, eta, first)
            sha = SuccessiveHalving(r, big_r, eta, num_trials=n, first_reduction=first)
            assert shape.rungs() == sha.rungs
            assert shape.stage_sizes() == sha.sizes


def test_plan_command_says_whether_run_would_follow_a_late_plan_or_refuse_it(tmp_path, capsys):
    # 9 trials at 5 s a step by the profile cannot end in 20 s on 3 workers (57 s).
    sweep = tmp_path / "late.yaml"
    sweep.write_text(
        "name: late\ntrainable: tests.trainables:quadratic\nmetric: score\nmode: max\n"
        "space: {x: {uniform: [0.0, 1.0]}}\nnum_trials: 9\n"
        "scheduler: {type: sha, min_resource: 1, max_resource: 9, reduction_factor: 3}\n"
        "provider: {type: local, workers: 3, scaling: plan}\n"
        "profile: {seconds_per_step: 5.0, boot_s: 2}\n")
    assert main(["plan", str(sweep), "--time-budget", "20s", "--cost-budget", "1"]) == 0
    out = capsys.readouterr().out
    assert "infeasible" in out and "run follows this fastest plan" in out
    assert main(["plan", str(sweep), "--time-budget", "20s", "--cost-budget", "0.04"]) == 0
    assert "run refuses this sweep" in capsys.readouterr().out
    assert main(["plan", str(sweep), "--time-budget", "2m", "--cost-budget", "1"]) == 0
    out = capsys.readouterr().out
    assert "infeasible" not in out and "elastune run" not in out
    # With the count left to the planner, not even one trial is on time at 5 s a step: the
    # plan is made at the step times that let one (0.3 of them, 14 % of 20 s kept free).
    sweep.write_text(sweep.read_text().replace("num_trials: 9\n", ""))
    assert main(["plan", str(sweep), "--time-budget", "20s", "--cost-budget", "1",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not doc["feasible"] and 0.29 < doc["inputs"]["step_scale"] <= 0.3
    assert doc["predicted_wall_s"] <= 20 * (1 - 0.14) + 1e-6 and doc["num_trials"] >= 3
    assert main(["plan", str(sweep), "--time-budget", "20s", "--cost-budget", "1"]) == 0
    assert "run follows this plan (made at 0.3 times" in capsys.readouterr().out
