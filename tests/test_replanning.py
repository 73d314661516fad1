"""Online re-planning: plan_remaining, the controller's hook, FollowPlan's look-ahead."""

from __future__ import annotations

import pytest

from budgets import (
    BootLatency,
    FollowPlan,
    InstanceType,
    JobShape,
    Plan,
    Profile,
    Replanner,
    RungPlan,
    ScaleView,
    plan_remaining,
)
from tests.test_simulate import SHA, Synth
from tuner._simulate import simulate

# $3.6/h: one instance-second costs $0.001.
GPU = InstanceType("aws", "x1", "T4", 1, 4, 16, "us-east-1", 3.6)
SIM_GPU = InstanceType("local", "sim-gpu", "T4", 1, 4, 16, "local", 1.0)


def test_plan_remaining_plans_the_rest_and_existing_workers_pay_no_boot():
    # 9 trials, rungs 1/3/9: stage 1 is 3 trials x 2 steps, stage 2 is 1 trial x 6 steps, at
    # 10 s a step; boot 100 s; no billing minimum.
    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(100))
    kw = dict(from_stage=1, elapsed_s=500.0, billing_minimum_s=0)
    # 100 s left: 3 live workers run stage 1 in one 20 s wave, then 1 runs stage 2 (60 s).
    p = plan_remaining(shape, profile, GPU, 600.0, live_workers=3, **kw)
    assert p.feasible
    assert [(r.rung, r.workers, r.start_s, r.end_s) for r in p.rungs] == [
        (1, 3, 500.0, 520.0), (2, 1, 520.0, 580.0)]
    assert p.predicted_wall_s == 580.0
    assert p.predicted_cost_usd == pytest.approx(0.120)       # 3 x 20 + 60 instance-seconds
    assert p.timeline[0].t_s == 500.0 and p.timeline[-1].workers == 0
    # Two live workers: two 20 s waves, then 60 s: just in time (140 instance-seconds).
    p2 = plan_remaining(shape, profile, GPU, 600.0, live_workers=2, **kw)
    assert p2.feasible and [r.workers for r in p2.rungs] == [2, 1]
    assert p2.predicted_cost_usd == pytest.approx(0.140) and p2.predicted_wall_s == 600.0
    # One live worker: 3 waves + 60 s = 120 s; more workers first boot (100 + 20 + 60 s).
    # Infeasible, and the fastest plan is returned: the one live worker, no boot.
    q = plan_remaining(shape, profile, GPU, 600.0, live_workers=1, **kw)
    assert not q.feasible and q.reason
    assert [r.workers for r in q.rungs] == [1, 1] and q.inputs["fastest_wall_s"] == 620
    # Nothing live: every plan boots first; the fastest is 3 workers after the boot.
    z = plan_remaining(shape, profile, GPU, 600.0, live_workers=0, **kw)
    assert not z.feasible and [r.workers for r in z.rungs] == [3, 1]
    assert z.rungs[0].start_s == 600.0 and z.predicted_wall_s == 680.0
    # No deadline: holding one live worker is cheapest (no boot, 120 instance-seconds).
    r = plan_remaining(shape, profile, GPU, None, live_workers=1, **kw)
    assert [x.workers for x in r.rungs] == [1, 1] and r.predicted_cost_usd == pytest.approx(0.12)


def test_plan_remaining_from_the_start_is_plan_cost_min():
    from budgets import plan_cost_min

    shape, profile = JobShape(81, 1, 27, 3), Profile(10.0, boot=BootLatency(60, 180))
    for deadline in (None, 800.0, 1500.0):
        a = plan_cost_min(shape, profile, GPU, deadline, max_workers=81)
        b = plan_remaining(shape, profile, GPU, deadline, from_stage=0, elapsed_s=0.0,
                           live_workers=0, max_workers=81)
        assert (a.rungs, a.timeline, a.predicted_cost_usd, a.predicted_wall_s) == (
            b.rungs, b.timeline, b.predicted_cost_usd, b.predicted_wall_s)
        assert a.inputs["s_per_step"] == 10.0


def test_the_first_stage_is_planned_with_a_late_boot():
    profile = Profile(10.0, boot=BootLatency(60, 180))
    rp = Replanner(JobShape(9, 1, 9, 3), profile, GPU, None)
    assert rp.initial().inputs["boot_s"] == 168                # the 0.9 quantile, not 120


def _sweep(replan: bool, deadline: float = 900.0):
    # The planner's profile says 5 s a step; Synth's steps take 10 s.
    rp = Replanner(JobShape(81, 1, 27, 3), Profile(5.0, boot=BootLatency.fixed(60)), SIM_GPU,
                   deadline, billing_minimum_s=60, max_workers=81)
    plan = rp.initial()
    return simulate(Synth(), metric="acc", mode="max", scheduler=SHA, num_trials=81,
                    workers=plan.workers_for_rung(0), time_budget_s=deadline, seed=0,
                    boot_s=lambda rng: 60.0, scaling=FollowPlan(plan),
                    replanner=rp if replan else None)


def test_replanning_meets_a_deadline_an_optimistic_plan_misses():
    once, online = _sweep(False), _sweep(True)
    assert once.outcome.reason == "deadline"                   # cut off: the job is not done
    assert online.outcome.reason == "done" and online.wall_s <= 900.0
    plans = online.store.plans()
    assert len(plans) > 1 and len(once.store.plans()) == 1     # the initial plan is stored too
    assert plans[0]["inputs"]["s_per_step"] == 5.0
    assert any(p["inputs"]["s_per_step"] > 7.5 for p in plans[1:])   # learned ~10 s a step
    # Re-plans keep the rung indices of the job and count time from the sweep's start.
    assert plans[-1]["rungs"][-1]["rung"] == 3 and plans[-1]["inputs"]["elapsed_s"] > 0


def _growing_plan() -> Plan:
    # 9 trials, rungs 1/3/9: 1 worker for stage 0 (9 x 10 s after a 60 s boot), 3 for stage 1.
    rungs = [RungPlan(0, 9, 1, 1, 1, 60.0, 150.0), RungPlan(1, 3, 3, 1, 3, 150.0, 170.0),
             RungPlan(2, 1, 9, 1, 1, 170.0, 230.0)]
    return Plan(True, 0.0, 230.0, 9, rungs, [], inputs={"boot_s": 60})


def test_follow_plan_targets_the_next_stage_one_boot_ahead():
    policy = FollowPlan(_growing_plan())

    def view(t: float) -> ScaleView:
        return ScaleView(now=1e9 + t, live=1, busy=1, starved=False, queued=False, stage=0,
                         elapsed_s=t)

    assert policy.target(view(80.0)) == 1
    assert policy.target(view(90.0)) == 3                      # 150 - 60
    assert FollowPlan(_growing_plan(), boot_s=30.0).target(view(100.0)) == 1


def test_follow_plan_launches_for_a_larger_stage_before_it_starts():
    r = simulate(Synth(n=9), metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                 num_trials=9, workers=1, seed=0, boot_s=lambda rng: 60.0,
                 scaling=FollowPlan(_growing_plan()))
    assert r.outcome.reason == "done"
    stage1 = min(s["submitted_at"] for s in r.store.segments() if s["stop_step"] == 3)
    launches = sorted(i["launched_at"] for i in r.store.instances())
    assert len(launches) >= 3
    assert launches[1] < stage1 and launches[2] < stage1
    assert launches[2] <= stage1 - 50                          # ready (nearly) as it starts
