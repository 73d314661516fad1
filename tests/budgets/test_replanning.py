"""Online re-planning: plan_remaining, the controller's hook, FollowPlan's look-ahead."""

from __future__ import annotations

import pytest

from budgets import (
    BootLatency,
    FollowPlan,
    JobShape,
    Plan,
    Profile,
    Replanner,
    ReplanView,
    RungPlan,
    ScaleView,
    StageWorkers,
    Static,
    fit_segment_times,
    plan_cost_min,
    plan_remaining,
)
from budgets import _replan as replan_module
from tests._sims import GPU, SHA, SIM_GPU, Synth
from tuner.sim import simulate_wired, uniform_boot

# Re-planners whose figures are worked out by hand below keep ``margin=0.1`` (10 % free) as
# their comments do; sweeps use DEFAULT_MARGIN.


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


def test_live_workers_go_on_training_while_added_ones_boot():
    # 9 trials, rungs 1/3/9 (1, 2, 6 steps at 10 s), boot 30 s, no billing minimum; one live
    # worker as stage 0 starts. Adding workers: the live one trains 3 first segments during
    # the boot, so on 3 workers the 6 left take two 10 s waves (stage 0 ends at 50 s, not
    # 60 s as if it had waited idle), then 20 s and 60 s: 130 s. Billed: 30 s of the live one
    # and 2 boots, 3 x 20 s, then 60 s and 60 s: 270 instance-seconds.
    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30))
    kw = dict(from_stage=0, elapsed_s=0.0, live_workers=1, billing_minimum_s=0)
    p = plan_remaining(shape, profile, GPU, 130.0, **kw)
    assert p.feasible and [(r.workers, r.end_s) for r in p.rungs] == [
        (3, 50.0), (3, 70.0), (1, 130.0)]
    assert p.predicted_cost_usd == pytest.approx(0.270)
    # 10 s sooner: the 6 left in one wave, on 9 (30 + 8 x 30 + 9 x 10 + 60 + 60).
    q = plan_remaining(shape, profile, GPU, 120.0, **kw)
    assert [(r.workers, r.end_s) for r in q.rungs][0] == (9, 40.0)
    assert q.predicted_cost_usd == pytest.approx(0.480)
    # The live one alone: 90 s of stage 0, no boot.
    r = plan_remaining(shape, profile, GPU, None, **kw)
    assert [x.workers for x in r.rungs] == [1, 1, 1] and r.rungs[0].end_s == 90.0


def test_a_late_plan_does_not_queue_trials_the_model_thinks_are_quick():
    # The last stage: 3 trials x 18 steps at 10 s a step (180 s), 2 live workers, boot 30 s.
    # Paces say
    # two trials are quick (mean 0.5, slowest 0.97): by the mean, queueing the quick two on
    # one worker (2 x 0.5) is as fast as the slowest alone, so booting a third looks like a
    # loss. Past the deadline the plan takes every trial as slow as the slowest: 2 x 0.97 of
    # a stage queued against 30 s of boot plus 0.97: it boots the third.
    shape, profile = JobShape(81, 1, 27, 3), Profile(10.0, boot=BootLatency.fixed(30))
    kw = dict(from_stage=3, elapsed_s=1000.0, billing_minimum_s=0, live_workers=2,
              paces=[(0.5, 0.97)])
    late = plan_remaining(shape, profile, GPU, 1100.0, **kw)
    assert not late.feasible and [r.workers for r in late.rungs] == [3]
    # On time, the model's cheapest plan may queue them (2 workers: 0.5 + 0.97 of 180 s,
    # 265 s, as the slowest may go out second; 1 worker would take 355 s).
    ok = plan_remaining(shape, profile, GPU, 1300.0, **kw)
    assert ok.feasible and [r.workers for r in ok.rungs] == [2]
    # Trials of one pace: queueing is slower in the model too; a boot longer than a trial's
    # segment keeps the live workers (the fastest way, queued or not).
    slow_boot = Profile(10.0, boot=BootLatency.fixed(1000))
    same = plan_remaining(shape, slow_boot, GPU, 1100.0, **{**kw, "paces": [(1.0, 1.0)]})
    assert not same.feasible and [r.workers for r in same.rungs] == [2]


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
    # The planner's profile says 4 s a step; Synth's steps take 10 s.
    rp = Replanner(JobShape(81, 1, 27, 3), Profile(4.0, boot=BootLatency.fixed(60)), SIM_GPU,
                   deadline, billing_minimum_s=60, max_workers=81)
    plan = rp.initial()
    return simulate_wired(Synth(), metric="acc", mode="max", scheduler=SHA, num_trials=81,
                    workers=plan.workers_for_rung(0), time_budget_s=deadline, seed=0,
                    boot_s=lambda rng: 60.0, scaling=FollowPlan(plan),
                    replanner=rp if replan else None)


def test_replanning_meets_a_deadline_an_optimistic_plan_misses():
    once, online = _sweep(False), _sweep(True)
    assert once.outcome.reason == "deadline"                   # cut off: the job is not done
    assert online.outcome.reason == "done" and online.wall_s <= 900.0
    plans = online.store.plans()
    assert len(plans) > 1 and len(once.store.plans()) == 1     # the initial plan is stored too
    assert plans[0]["inputs"]["s_per_step"] == 4.0
    assert any(p["inputs"]["s_per_step"] > 7.5 for p in plans[1:])   # learned ~10 s a step
    # Re-plans keep the rung indices of the job and count time from the sweep's start.
    assert plans[-1]["rungs"][-1]["rung"] == 3 and plans[-1]["inputs"]["elapsed_s"] > 0


def test_a_stage_is_not_shrunk_on_its_first_and_quickest_segments():
    # The profile says 20 s a step; Synth's steps take 10 s, and boots take 60-180 s, so the
    # first segments end while most instances still boot. A re-plan within a stage on a
    # quicker rate waits until a segment has ended per instance up.
    rp = Replanner(JobShape(81, 1, 27, 3), Profile(20.0, boot=BootLatency(60, 180)), SIM_GPU,
                   3000.0, billing_minimum_s=60, max_workers=81)
    plan = rp.initial()
    r = simulate_wired(Synth(), metric="acc", mode="max", scheduler=SHA, num_trials=81,
                 workers=plan.workers_for_rung(0), time_budget_s=3000.0, seed=1,
                 boot_s=uniform_boot(60, 180), scaling=FollowPlan(plan), replanner=rp)
    assert r.outcome.reason == "done"
    quicker = [p for p in r.store.plans()[1:]
               if p["inputs"]["from_stage"] == 0 and p["inputs"]["s_per_step"] < 20.0]
    assert quicker, "no re-plan on the quicker rate in stage 0"
    for p in quicker:
        assert p["inputs"]["done_in_stage"] >= p["inputs"]["live_workers"], p["inputs"]


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


def test_follow_plan_lets_idle_workers_go_in_the_last_stage():
    # Stage 1 of a 2-stage plan (3 workers): two trials have ended, the third still runs.
    rungs = [RungPlan(0, 9, 1, 1, 3, 60.0, 150.0), RungPlan(1, 3, 3, 1, 3, 150.0, 250.0)]
    policy = FollowPlan(Plan(True, 0.0, 250.0, 9, rungs, [], inputs={"boot_s": 60}))

    def view(stage: int, starved: bool) -> ScaleView:
        return ScaleView(now=200.0, live=3, busy=1, starved=starved, queued=False,
                         stage=stage, elapsed_s=200.0)

    assert policy.target(view(1, starved=True)) == 1     # nothing is to come after it
    assert policy.target(view(1, starved=False)) == 3    # a job may still need them
    assert policy.target(view(0, starved=True)) == 3     # stage 1 will need three


def test_follow_plan_lets_no_worker_go_while_jobs_wait_unless_the_stage_may_be_cut():
    # Stage 0 re-planned down to 1 worker while 5 are live and jobs still wait for a slot.
    policy = FollowPlan(_growing_plan())

    def view(queued: bool, cuts_stages: bool = False) -> ScaleView:
        return ScaleView(now=100.0, live=5, busy=5, starved=False, queued=queued, stage=0,
                         elapsed_s=80.0, cuts_stages=cuts_stages)

    assert policy.target(view(queued=True)) == 5       # their boots are paid: none goes
    assert policy.target(view(queued=False)) == 1      # no job waits: the plan's count
    assert policy.target(view(queued=True, cuts_stages=True)) == 1
    # (it never grows the cluster by itself)
    assert policy.target(ScaleView(now=100.0, live=0, busy=0, starved=False, queued=True,
                                   stage=0, elapsed_s=80.0)) == 1


def test_follow_plan_lets_the_next_stages_workers_go_while_its_work_is_far_off():
    rungs = [RungPlan(0, 9, 1, 1, 3, 30.0, 150.0), RungPlan(1, 3, 3, 1, 3, 150.0, 250.0)]
    policy = FollowPlan(Plan(True, 0.0, 250.0, 9, rungs, [], inputs={"boot_s": 40}))

    def view(next_work_s: float | None, live: int = 3) -> ScaleView:
        return ScaleView(now=100.0, live=live, busy=1, starved=True, queued=False, stage=0,
                         elapsed_s=100.0, next_work_s=next_work_s)

    assert policy.target(view(None)) == 3           # not known: kept for the next stage
    assert policy.target(view(100.0 + 101)) == 1    # > 2.5 boots off: the idle ones go
    assert policy.target(view(100.0 + 99)) == 3     # between: none go ...
    assert policy.target(view(100.0 + 99, live=1)) == 1   # ... and none is launched yet
    assert policy.target(view(100.0 + 59, live=1)) == 3   # 1.5 boots ahead: launched again


def test_follow_plan_lets_the_next_stages_workers_go_when_a_re_plan_holds_fewer():
    # A re-plan near stage 0's end plans it for the trial still running (1 worker); stage 1
    # (3 workers) is planned to start at 300 s. Workers idle now go, though its work is near,
    # and are launched again one boot ahead of the planned start (keeping them regardless
    # was measured dearer, see FollowPlan).
    rungs = [RungPlan(0, 1, 1, 1, 1, 0.0, 300.0), RungPlan(1, 3, 3, 1, 3, 300.0, 400.0)]
    policy = FollowPlan(Plan(True, 0.0, 400.0, 9, rungs, [], inputs={"boot_s": 40}))

    def view(elapsed_s: float, live: int) -> ScaleView:
        return ScaleView(now=elapsed_s, live=live, busy=1, starved=True, queued=False,
                         stage=0, elapsed_s=elapsed_s, next_work_s=elapsed_s + 50.0)

    assert policy.target(view(100.0, live=3)) == 1    # the re-plan's count for the stage
    assert policy.target(view(259.0, live=1)) == 1
    assert policy.target(view(261.0, live=1)) == 3    # 300 - 40: launched for stage 1


class _Straggler:
    """27 configs at 10 s a step, but the best one (c26) takes 300 s a step."""

    name = "straggler"

    def config_ids(self) -> list[str]:
        return [f"c{i}" for i in range(27)]

    def value(self, c: str, s: int) -> float:
        return (0.5 + int(c[1:]) / 54) * (1 - 0.5 ** s)

    def cost_s(self, c: str, a: int, b: int) -> float:
        return (300.0 if c == "c26" else 10.0) * (b - a)

    def last_step(self, c: str) -> int:
        return 9

    def diverged(self, c: str) -> bool:
        return False


def test_workers_idle_behind_a_straggler_go_come_back_for_its_expected_end_and_go_again():
    # 27 trials, rungs 1/3/9 on 3 workers throughout. In stage 1 the straggler's segment
    # (2 steps, 600 s) runs long after the other 8 (20 s each) have ended; from its first
    # step's pace it is expected to take about 290 s.
    rungs = [RungPlan(0, 27, 1, 1, 3, 30.0, 400.0), RungPlan(1, 9, 3, 1, 3, 400.0, 1100.0),
             RungPlan(2, 3, 9, 1, 3, 1100.0, 3000.0)]
    plan = Plan(True, 0.0, 3000.0, 27, rungs, [], inputs={"boot_s": 30})
    r = simulate_wired(_Straggler(), metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                 num_trials=27, workers=3, seed=0, boot_s=lambda rng: 30.0,
                 scaling=FollowPlan(plan), billing_minimum_s=0.0)
    assert r.outcome.reason == "done"
    segs = r.store.segments()
    slow = next(s for s in segs if s["start_step"] == 1 and s["finished_at"] - s["started_at"]
                > 500)
    expected_end = slow["started_at"] + 290.0
    stage2 = min(s["started_at"] for s in segs if s["start_step"] == 3)
    instances = r.store.instances()
    during = [i for i in instances if i["terminated_at"] is not None
              and slow["started_at"] < i["terminated_at"] < slow["finished_at"] - 100]
    back = [i for i in instances if slow["started_at"] < i["launched_at"] < slow["finished_at"]]
    # The two idle workers went; two were booted again to be up by the expected end ...
    assert len(back) == 2
    assert all(expected_end - 60 <= i["launched_at"] <= expected_end - 30 for i in back)
    # ... and went once it overran (expected to run half its age again: > 2.5 boots), not
    # held idle for the 300 s it still ran: four went while it ran.
    assert len(during) == 4
    assert all(i["terminated_at"] <= expected_end + 5 for i in back)
    # The next stage starts as the straggler ends, its other two trials one boot later.
    assert stage2 - slow["finished_at"] < 5
    assert max(s["started_at"] for s in segs if s["start_step"] == 3) - stage2 <= 30 + 5


class _FirstStageStraggler(_Straggler):
    """9 configs at 10 s a step, but c8's first step takes 600 s (a first segment, so no
    pace of its own is known while it runs)."""

    def config_ids(self) -> list[str]:
        return [f"c{i}" for i in range(9)]

    def cost_s(self, c: str, a: int, b: int) -> float:
        return 10.0 * (b - a) + (590.0 if c == "c8" and a == 0 else 0.0)


def test_workers_idle_behind_a_first_stage_straggler_go_while_it_overruns():
    # 9 trials, rungs 1/3/9 on 3 workers. Stage 0's other segments end in seconds; c8's runs
    # 600 s, far past the 10 s the fit expects. Counted as ending "now", it would hold the
    # next stage's two idle workers for all that time; expected to run half its age again,
    # they go once that is more than 2.5 boots off.
    rungs = [RungPlan(0, 9, 1, 1, 3, 30.0, 100.0), RungPlan(1, 3, 3, 1, 3, 100.0, 200.0),
             RungPlan(2, 1, 9, 1, 1, 200.0, 400.0)]
    plan = Plan(True, 0.0, 400.0, 9, rungs, [], inputs={"boot_s": 30})
    r = simulate_wired(_FirstStageStraggler(), metric="acc", mode="max",
                 scheduler={**SHA, "max_resource": 9}, num_trials=9, workers=3, seed=0,
                 boot_s=lambda rng: 30.0, scaling=FollowPlan(plan), billing_minimum_s=0.0)
    assert r.outcome.reason == "done"
    slow = next(s for s in r.store.segments() if s["start_step"] == 0
                and s["finished_at"] - s["started_at"] > 500)
    gone = [i for i in r.store.instances() if i["terminated_at"] is not None
            and slow["started_at"] < i["terminated_at"] < slow["started_at"] + 200]
    assert len(gone) == 2


def test_follow_plan_launches_for_a_larger_stage_before_it_starts():
    r = simulate_wired(Synth(n=9), metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                 num_trials=9, workers=1, seed=0, boot_s=lambda rng: 60.0,
                 scaling=FollowPlan(_growing_plan()))
    assert r.outcome.reason == "done"
    stage1 = min(s["submitted_at"] for s in r.store.segments() if s["stop_step"] == 3)
    launches = sorted(i["launched_at"] for i in r.store.instances())
    assert len(launches) >= 3
    assert launches[1] < stage1 and launches[2] < stage1
    assert launches[2] <= stage1 - 50                          # ready (nearly) as it starts


# -- (a) progress within the current stage ----------------------------------------------------

def test_plan_remaining_does_not_replan_trials_the_stage_has_done():
    # Stage 0: 9 trials x 1 step x 10 s; 6 are done, so 3 are left: one 10 s wave on 3 live.
    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(100))
    kw = dict(from_stage=0, elapsed_s=50.0, live_workers=3, billing_minimum_s=0)
    fresh = plan_remaining(shape, profile, GPU, None, **kw)
    done = plan_remaining(shape, profile, GPU, None, done_in_stage=6, **kw)
    assert done.rungs[0].trials == 3 and fresh.rungs[0].trials == 9
    assert done.predicted_cost_usd < fresh.predicted_cost_usd
    # All done (stragglers still running): one trial's worth is kept for the stage.
    assert plan_remaining(shape, profile, GPU, None, done_in_stage=9, **kw).rungs[0].trials == 1


def test_replanner_passes_the_stage_progress_on():
    rp = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60)), GPU,
                   deadline_s=None, billing_minimum_s=0)
    view = ReplanView(now=0.0, elapsed_s=100.0, stage=0, live=3, observed_s_per_step=10.0,
                      observations=6, spent_usd=0.0, stage_done=6)
    plan = rp(view)
    assert plan.inputs["done_in_stage"] == 6 and plan.rungs[0].trials == 3


# -- (b) a trial's first segment is dearer than its steps --------------------------------------

def test_fit_segment_times_separates_the_first_segment_cost():
    # 10 s a step; a trial's first segment pays 10 s more.
    segs = [(1, 20.0, True)] * 9 + [(2, 20.0, False)] * 3 + [(6, 60.0, False)]
    rate, first = fit_segment_times(segs, min_resumed=2)
    assert rate == pytest.approx(10.0) and first == pytest.approx(10.0)
    # Too few resumed segments to trust (the quickest of a wave end first): all as steps.
    assert fit_segment_times(segs[:11], min_resumed=3) == (220.0 / 13, 0.0)
    # Only fresh segments: the two cannot be told apart; all is counted as steps.
    assert fit_segment_times([(1, 20.0, True), (1, 22.0, True)]) == (21.0, 0.0)
    # Resumed segments dearer per step than fresh ones: no negative first-segment cost.
    rate, first = fit_segment_times([(1, 5.0, True), (2, 20.0, False)], min_resumed=1)
    assert first == 0.0 and rate > 0
    assert fit_segment_times([]) is None


def test_fit_segment_times_counts_segments_timed_at_zero():
    # Two trials' later segments took no time (a coarse clock; a replayed curve whose recorded
    # time stops growing): their steps still count. Least squares over the resumed rows alone
    # (the fresh ones fix first_s): 4 (2r - 20) + 12 (6r - 60) + 16 (2r) = 0, r = 800 / 112.
    segs = [(1, 20.0, True)] * 2 + [(2, 20.0, False), (6, 60.0, False)] + [(2, 0.0, False)] * 4
    rate, first = fit_segment_times(segs, min_resumed=2)
    assert rate == pytest.approx(800 / 112) and first == pytest.approx(20 - 800 / 112)
    # Dropping them (as before) fitted the later steps at 10 s.
    assert fit_segment_times([x for x in segs if x[1] > 0], min_resumed=2) == \
        pytest.approx((10.0, 10.0))
    # Only zeros among the resumed: a zero rate plans nothing; they are left out then.
    zeros = [(1, 20.0, True)] * 2 + [(2, 0.0, False)] * 4
    assert fit_segment_times(zeros, min_resumed=2) == (20.0, 0.0)
    assert fit_segment_times([(2, 0.0, False)] * 3) is None


def test_profile_charges_the_first_segment_cost_to_fresh_segments_only():
    p = Profile(10.0, first_segment_s=7.0, restore_s=1.0)
    assert p.segment_seconds(2, restore=False) == 27.0
    assert p.segment_seconds(2, restore=True) == 21.0
    with pytest.raises(ValueError, match="first_segment_s"):
        Profile(10.0, first_segment_s=-1.0)


def test_replanner_applies_the_fitted_rate_to_later_stages():
    rp = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60)), GPU,
                   deadline_s=None, billing_minimum_s=0)
    view = ReplanView(now=0.0, elapsed_s=300.0, stage=1, live=1, observed_s_per_step=10.0,
                      observations=12, spent_usd=0.0, observed_first_s=10.0)
    plan = rp(view)
    assert plan.inputs["s_per_step"] == pytest.approx(10.0)
    # Stage 1 (resumed: 3 trials x 2 steps) and stage 2 (1 x 6): no first-segment cost.
    assert [(r.start_s, r.end_s) for r in plan.rungs] == [(300.0, 360.0), (360.0, 420.0)]


def test_sweep_with_a_dear_first_epoch_learns_the_later_rate():
    # Synth's steps take 10 s; the replanner sees fresh and resumed segments alike.
    result = _sweep(True, deadline=1500.0)
    assert result.outcome.reason == "done"
    last = result.store.plans()[-1]["inputs"]["s_per_step"]
    assert last == pytest.approx(10.0, rel=0.3)


# -- (b') a profile that knows a run's first steps cost more ----------------------------------

def test_profile_step_costs_weigh_a_runs_first_steps():
    p = Profile(10.0, step_costs=(3.0, 2.0))
    assert [p.step_weight(0, 1), p.step_weight(0, 3), p.step_weight(1, 4), p.step_weight(5, 9)] \
        == [3.0, 6.0, 4.0, 4.0]
    assert p.segment_seconds(2, restore=False) == 50.0           # steps 1-2: 30 + 20 s
    assert p.segment_seconds(2, restore=False, start=2) == 20.0  # steps 3-4: past the table
    assert Profile(10.0).step_weight(2, 5) == 3.0                 # no table: every step is 1
    for bad in ((0.0,), (float("nan"),), ("x",), 3.0):
        with pytest.raises(ValueError, match="step_costs"):
            Profile(10.0, step_costs=bad)


def test_the_planner_times_each_stage_at_what_its_steps_cost():
    flat = Profile(10.0, boot=BootLatency.fixed(0))
    warm = Profile(10.0, boot=BootLatency.fixed(0), step_costs=(4.0,))
    shape = JobShape(9, 1, 9, 3)
    a, b = (plan_cost_min(shape, p, GPU, deadline_s=None) for p in (flat, warm))
    assert [(r.start_s, r.end_s) for r in a.rungs] == [(0, 90), (90, 150), (150, 210)]
    # The first step of each of the 9 trials costs 40 s; steps 2-9 cost 10 s as before.
    assert [(r.start_s, r.end_s) for r in b.rungs] == [(0, 360), (360, 420), (420, 480)]
    assert b.predicted_cost_usd == pytest.approx(0.48)


class _WarmFirstStep(Synth):
    """Synth whose first step takes 40 s (10 s of training and 30 s of warm-up)."""

    def cost_s(self, c, a, b):
        return 10.0 * (b - a) + (30.0 if a == 0 else 0.0)


def _warm_sweep(step_costs: tuple[float, ...]):
    rp = Replanner(JobShape(81, 1, 27, 3),
                   Profile(10.0, boot=BootLatency.fixed(60), step_costs=step_costs), SIM_GPU,
                   1500.0, billing_minimum_s=60, max_workers=81)
    plan = rp.initial()
    return simulate_wired(_WarmFirstStep(), metric="acc", mode="max", scheduler=SHA, num_trials=81,
                    workers=plan.workers_for_rung(0), time_budget_s=1500.0, seed=0,
                    boot_s=lambda rng: 60.0, scaling=FollowPlan(plan), replanner=rp)


def test_a_sweep_reads_its_dear_first_steps_through_the_profiles_step_costs():
    flat, warm = _warm_sweep(()), _warm_sweep((4.0,))
    assert flat.outcome.reason == warm.outcome.reason == "done"
    assert flat.wall_s <= 1500.0 and warm.wall_s <= 1500.0
    first_stage = [p["inputs"]["s_per_step"] for p in warm.store.plans()
                   if p["inputs"]["from_stage"] == 0]
    # Seen as 40 s a step, the first steps are read as the profile's 4 x 10 s ...
    assert first_stage and all(v == pytest.approx(10.0, rel=0.05) for v in first_stage)
    # ... where a profile without step costs takes every later step at ~40 s, rushes the
    # first stage onto more instances and ends far before the deadline, at more cost.
    assert max(p["inputs"]["s_per_step"] for p in flat.store.plans()) > 30.0
    assert warm.spend_usd < 0.85 * flat.spend_usd and warm.wall_s > flat.wall_s


# -- (c) the cheapest feasible plan, not the fastest --------------------------------------------

def test_plan_remaining_is_the_cheapest_feasible_of_all_worker_choices():
    import itertools

    from budgets._planner import _evaluate, _job

    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30))
    for live, left in ((2, 200.0), (3, 120.0), (9, 400.0), (1, 1000.0)):
        p = plan_remaining(shape, profile, GPU, 100.0 + left, from_stage=1, elapsed_s=100.0,
                           live_workers=live, billing_minimum_s=60)
        full = _job(shape, profile, GPU, 1, None, 0.0, None, 60, None)
        job = type(full)(**{**full.__dict__, "sizes": full.sizes[1:], "steps": full.steps[1:],
                            "segment": full.segment[1:], "_durations": {}})
        costs = [cost for ws in itertools.product(range(1, 10), repeat=2)
                 for wall, cost, _ in [_evaluate(job, [(w, 1) for w in ws], live)]
                 if wall <= left]
        assert p.feasible
        assert p.predicted_cost_usd == pytest.approx(min(costs) / 1000.0)


def test_replanner_keeps_the_deadline_when_the_margin_cannot_be_kept():
    # 100 s left (deadline 200 s), 2 live workers: they run stage 1 (3 trials x 20 s) in two
    # waves, then stage 2 (60 s): 100 s, 140 instance-seconds, just in time. A third worker
    # (16 s boot) makes it 96 s but dearer (168). Neither keeps the 10 % margin (90 s); the
    # plan is then the cheapest that ends by the deadline, not the fastest.
    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(16))
    kw = dict(from_stage=1, elapsed_s=100.0, live_workers=2, billing_minimum_s=0)
    fastest = plan_remaining(shape, profile, GPU, 195.0, **kw)
    assert not fastest.feasible and [r.workers for r in fastest.rungs] == [3, 1]
    rp = Replanner(shape, profile, GPU, deadline_s=200.0, billing_minimum_s=0, margin=0.1)
    view = ReplanView(now=0.0, elapsed_s=100.0, stage=1, live=2, observed_s_per_step=10.0,
                      observations=9, spent_usd=0.0)
    plan = rp(view)
    assert plan.feasible and [r.workers for r in plan.rungs] == [2, 1]
    assert plan.predicted_cost_usd == pytest.approx(0.140) and plan.predicted_wall_s == 200.0


def test_a_first_stage_late_or_all_at_once_on_its_first_segments_rate_plans_at_the_middle():
    # Prior 10 s a step; nine first segments seen at 40 s: fitted (10 + 9 * 40) / 10 = 37 s.
    # On that rate for every step the rest takes 37 + 74 + 222 = 333 s on the 9 live workers:
    # 100 s in, it ends at 433 s, past the 400 s deadline whatever it rents. At the geometric
    # middle, sqrt(10 * 37) s a step for the later steps (the first segments keep their 37 s),
    # it ends at 100 + 37 + 39 + 116 = 292 s, within the margin (400 - 0.1 * 300 = 370 s).
    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60))

    def view(fresh_only):
        return ReplanView(now=100.0, elapsed_s=100.0, stage=0, live=9,
                          observed_s_per_step=40.0, observations=9, spent_usd=0.0,
                          fresh_only=fresh_only)

    rp = Replanner(shape, profile, GPU, deadline_s=400.0, billing_minimum_s=0, margin=0.1)
    plan = rp(view(True))
    assert plan.feasible and plan.predicted_wall_s <= 370.0
    assert plan.inputs["s_per_step"] == pytest.approx(370.0 ** 0.5)
    stage_0 = plan.rungs[0]
    assert stage_0.end_s - stage_0.start_s >= 37.0      # its own segments at the rate seen
    # A later step seen (a resumed segment): the fitted rate stands, late as it is.
    fitted = rp(view(False))
    assert not fitted.feasible and fitted.inputs["s_per_step"] == pytest.approx(37.0)
    assert [r.workers for r in fitted.rungs] == [9, 3, 1]
    # With 490 s, the fitted rate is on time (433 s, margin 451 s) only with all nine trials
    # at once (on eight, stage 0 takes two waves: 470 s): the middle's plan again.
    edge = Replanner(shape, profile, GPU, deadline_s=490.0, billing_minimum_s=0, margin=0.1)
    assert edge(view(False)).feasible and [r.workers for r in edge(view(False)).rungs][0] == 9
    hedged = edge(view(True))
    assert hedged.feasible and hedged.inputs["s_per_step"] == pytest.approx(370.0 ** 0.5)
    # The middle cannot keep the margin either (250 s: 292 > 235): the fitted rate's fastest.
    tight = Replanner(shape, profile, GPU, deadline_s=250.0, billing_minimum_s=0,
                      margin=0.1)(view(True))
    assert not tight.feasible and tight.inputs["s_per_step"] == pytest.approx(37.0)


def test_first_segments_cheaper_than_the_prior_plan_the_later_steps_at_the_middle():
    # Prior 10 s a step; nine first segments seen at 2.5 s: fitted (10 + 9 * 2.5) / 10 = 3.25 s.
    # 30 s in, 3 of stage 0's 9 trials done, 3 live workers, deadline 100 s (margin: 93 s).
    # On the fitted rate one worker does it all: 6 x 3.25 (20 s), 3 x 6.5 (20 s), 6 x 3.25
    # (20 s): 90 s. The later steps may cost the prior's rate (a run's first steps may be its
    # cheapest): at the middle, sqrt(10 * 3.25) = 5.70 s a step, one worker would end at 135 s;
    # the three live ones end at 30 + 12 + 12 + 35 = 89 s.
    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60))

    def view(fresh_only):
        return ReplanView(now=30.0, elapsed_s=30.0, stage=0, live=3, observed_s_per_step=2.5,
                          observations=9, spent_usd=0.0, fresh_only=fresh_only, stage_done=3)

    rp = Replanner(shape, profile, GPU, deadline_s=100.0, billing_minimum_s=0, margin=0.1)
    hedged = rp(view(True))
    assert hedged.inputs["s_per_step"] == pytest.approx(32.5 ** 0.5)
    assert hedged.feasible and [r.workers for r in hedged.rungs] == [3, 3, 1]
    assert hedged.predicted_wall_s == 89.0
    # A later step seen (a resumed segment): the fitted rate stands.
    fitted = rp(view(False))
    assert fitted.inputs["s_per_step"] == pytest.approx(3.25)
    assert [r.workers for r in fitted.rungs] == [1, 1, 1] and fitted.predicted_wall_s == 90.0
    # A sweep with a cost budget plans on the fitted rate (it judges its budget at the
    # middle, and its accuracy comparisons were measured so).
    budgeted = Replanner(shape, profile, GPU, deadline_s=100.0, billing_minimum_s=0,
                         cost_budget_usd=10.0, margin=0.1)
    assert budgeted(view(True)).inputs["s_per_step"] == pytest.approx(3.25)


def test_a_second_stage_fitted_on_first_segments_plans_at_the_middle_rate_with_a_wide_margin():
    # Stage 1, 200 s in, 3 live workers; the fit is still first segments' (two resumed
    # segments are too few to tell them apart): (10 + 12 * 40) / 13 = 37.7 s a step. On it
    # the rest (3 x 2 steps at once, then 6 steps) ends at 200 + 76 + 227 = 503 s. At the
    # middle, sqrt(10 * 37.7) = 19.4 s: 200 + 39 + 117 = 356 s.
    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60))
    fitted, middle = 490.0 / 13, (10.0 * 490.0 / 13) ** 0.5

    def plan(deadline, resumed):
        rp = Replanner(shape, profile, GPU, deadline_s=deadline, billing_minimum_s=0, margin=0.1)
        return rp(ReplanView(now=200.0, elapsed_s=200.0, stage=1, live=3,
                             observed_s_per_step=40.0, observations=12, spent_usd=0.0,
                             resumed=resumed))

    hedged = plan(480.0, 2)      # late on the fitted rate; the middle keeps 0.4 of 280 s free
    assert hedged.feasible and hedged.inputs["s_per_step"] == pytest.approx(middle)
    assert hedged.predicted_wall_s <= 480.0 - 0.4 * 280.0
    # With 400 s the middle's 356 s keeps 0.1 of the time left free but not 0.4: as late
    # as it is, the fitted rate stands (from the second stage on, less time is left to
    # make up for a rate too low).
    assert plan(400.0, 2).inputs["s_per_step"] == pytest.approx(fitted)
    # Five resumed segments: the fit tells first segments apart, its rate stands.
    five = plan(480.0, 5)
    assert not five.feasible and five.inputs["s_per_step"] == pytest.approx(fitted)


def _straggler_sweep(cost_budget_usd):
    # 27 trials, rungs 1/3/9, 10 s a step but the best config takes 300 s a step: its stage-1
    # segment (600 s) would end long after the 700 s deadline.
    rp = Replanner(JobShape(27, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30)), SIM_GPU,
                   700.0, cost_budget_usd=cost_budget_usd, billing_minimum_s=0)
    plan = rp.initial()
    return simulate_wired(_Straggler(), metric="acc", mode="max",
                    scheduler={**SHA, "max_resource": 9}, num_trials=27,
                    workers=max(1, plan.workers_for_rung(0)), seed=0,
                    boot_s=lambda rng: 30.0, scaling=FollowPlan(plan), replanner=rp,
                    time_budget_s=700.0, billing_minimum_s=0.0)


def test_a_sweep_whose_shape_the_planner_chose_decides_a_stage_without_its_straggler():
    r = _straggler_sweep(cost_budget_usd=50.0)
    assert r.outcome.reason == "done" and r.wall_s <= 700.0
    assert [e["kind"] for e in r.store.journal()].count("decide") == 1
    states = {row["trial_id"]: row["state"] for row in r.store.query("SELECT * FROM trials")}
    # The straggler's segment was not waited for (its stop takes effect at a step's end, one
    # after the sweep's): it is pruned, and nothing else of stage 1 was cut.
    cut = [s for s in r.store.segments() if s["start_step"] == 1 and s["state"] != "done"]
    assert len(cut) == 1 and states[cut[0]["trial_id"]] == "pruned"
    assert cut[0]["finished_at"] - cut[0]["started_at"] < 600
    # The next stage went on with the others: three trials trained to the top rung.
    assert sum(1 for s in r.store.segments() if s["stop_step"] == 9
               and s["state"] == "done") == 3


def test_a_sweep_of_a_given_shape_waits_for_its_straggler():
    r = _straggler_sweep(cost_budget_usd=None)
    assert "decide" not in [e["kind"] for e in r.store.journal()]
    assert r.outcome.reason == "deadline"


def test_a_replans_solve_time_is_its_whole_call(monkeypatch):
    # A cost-budget re-plan in the first stage searches admission (several plans) to return
    # one: the plan's solve_s is the whole call, not only its own plan_remaining.
    import itertools
    import time

    ticks = itertools.count()
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)))
    rp = Replanner(JobShape(27, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60)), GPU,
                   deadline_s=2000.0, cost_budget_usd=0.2, billing_minimum_s=0)
    before = next(ticks)
    plan = rp(ReplanView(now=100.0, elapsed_s=100.0, stage=0, live=3,
                         observed_s_per_step=30.0, observations=3, spent_usd=0.05,
                         started=6, fresh_only=True))
    after = next(ticks)
    assert plan is not None
    # The call's first reading is before + 1 and its last after - 1.
    assert plan.inputs["solve_s"] == after - before - 2
    # Its own plan_remaining took two readings; the call solved several plans.
    assert plan.inputs["solve_s"] > 4
    first = next(ticks)
    initial = Replanner(JobShape(27, 1, 9, 3), Profile(10.0), GPU, deadline_s=2000.0).initial()
    assert initial.inputs["solve_s"] == next(ticks) - first - 2


def test_a_shape_with_its_own_first_cut_is_judged_nearer_the_fitted_rate(monkeypatch):
    # Stage 0, only first segments seen, at 30 s a step (over a million of them: the fit is
    # what was seen). Budget judgements for a 1/eta shape sit at the geometric middle of the
    # prior and the fit, so a cheaper prior admits more; a shape whose first cut is its own
    # (half going on) is judged three quarters of the way to the fit: a cheaper prior admits
    # more than the fit alone would, and fewer than the middle.
    view = ReplanView(now=100.0, elapsed_s=100.0, stage=0, live=3, observed_s_per_step=30.0,
                      observations=10**6, spent_usd=0.05, started=3, fresh_only=True)

    def admitted(prior: float, first_reduction: int | None) -> int:
        rp = Replanner(JobShape(243, 1, 9, 3, first_reduction),
                       Profile(prior, boot=BootLatency.fixed(60)), GPU, deadline_s=20000.0,
                       cost_budget_usd=4.0, billing_minimum_s=0, margin=0.1)
        plan = rp(view)
        assert plan is not None and plan.feasible
        return plan.num_trials

    assert replan_module.FIRST_CUT_WEIGHT == 0.75
    assert admitted(10.0, None) > admitted(30.0, None)
    gentle = admitted(10.0, 2)
    at_fit = admitted(30.0, 2)          # the prior is the fit: no weight changes it
    monkeypatch.setattr(replan_module, "FIRST_CUT_WEIGHT", 1.0)
    assert admitted(10.0, 2) == at_fit
    monkeypatch.setattr(replan_module, "FIRST_CUT_WEIGHT", 0.5)
    at_middle = admitted(10.0, 2)
    assert 3 <= at_fit < gentle < at_middle < 243


class _HeldPlan(Replanner):
    """Re-plans to the plan it was given (the release rule under test is the controller's)."""

    def __init__(self, plan: Plan, cost_budget_usd: float | None) -> None:
        super().__init__(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30)),
                         SIM_GPU, 3000.0, cost_budget_usd=cost_budget_usd)
        self.plan = plan

    def initial(self) -> Plan:
        return self.plan

    def __call__(self, view: ReplanView) -> Plan:
        return self.plan


def _first_stage_straggler_sweep(cost_budget_usd):
    rungs = [RungPlan(0, 9, 1, 1, 3, 30.0, 100.0), RungPlan(1, 3, 3, 1, 3, 100.0, 200.0),
             RungPlan(2, 1, 9, 1, 1, 200.0, 400.0)]
    plan = Plan(True, 0.0, 400.0, 9, rungs, [], inputs={"boot_s": 30})
    r = simulate_wired(_FirstStageStraggler(), metric="acc", mode="max",
                 scheduler={**SHA, "max_resource": 9}, num_trials=9, workers=3, seed=0,
                 boot_s=lambda rng: 30.0, scaling=FollowPlan(plan),
                 replanner=_HeldPlan(plan, cost_budget_usd), time_budget_s=3000.0,
                 billing_minimum_s=0.0)
    assert r.outcome.reason == "done"
    slow = next(s for s in r.store.segments() if s["start_step"] == 0
                and s["finished_at"] - s["started_at"] > 500)
    gone = [i["terminated_at"] - slow["started_at"] for i in r.store.instances()
            if i["terminated_at"] is not None
            and slow["started_at"] < i["terminated_at"] < slow["finished_at"]]
    return r, gone


def test_a_sweep_with_a_cost_budget_lets_workers_idle_behind_a_straggler_go_sooner():
    # c8's first segment runs 600 s, far past the 10 s the fit expects. A sweep with a cost
    # budget expects it to run twice its age again (without one: half its age), so the
    # workers idle behind it go once that is more than 2.5 boots (75 s) off: at about 38 s of
    # its age rather than 150 s.
    without, gone_without = _first_stage_straggler_sweep(None)
    budgeted, gone_budgeted = _first_stage_straggler_sweep(50.0)
    assert len(gone_without) == len(gone_budgeted) == 2
    assert min(gone_budgeted) < min(gone_without) - 100
    assert budgeted.spend_usd < without.spend_usd


@pytest.mark.parametrize("replanned", [False, True])
def test_early_promotion_runs_the_same_sweep_for_less(replanned):
    # The straggler (the best trial, 30x slower per step) holds every stage it is in; with
    # early promotion the trials certain to go on train their next rung meanwhile.
    def run(early: bool):
        rp = None
        plan = Plan(True, 0.0, 0.0, 27, [RungPlan(0, 27, 1, 1, 9, 0.0, 0.0),
                                         RungPlan(1, 9, 3, 1, 9, 0.0, 0.0),
                                         RungPlan(2, 3, 9, 1, 3, 0.0, 0.0)], [])
        if replanned:   # the re-planner and FollowPlan on the controller's stages
            rp = Replanner(JobShape(27, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30)),
                           SIM_GPU, 4000.0, billing_minimum_s=0, max_workers=27)
            plan = rp.initial()
        return simulate_wired(_Straggler(), metric="acc", mode="max",
                        scheduler={**SHA, "max_resource": 9, "early_promotion": early},
                        num_trials=27, workers=max(1, plan.workers_for_rung(0)), seed=0,
                        boot_s=lambda rng: 30.0, scaling=FollowPlan(plan), replanner=rp,
                        time_budget_s=4000.0, billing_minimum_s=0.0)

    plain, early = run(False), run(True)
    assert plain.outcome.reason == early.outcome.reason == "done"
    assert early.best_value == plain.best_value
    def steps(r):
        return dict(zip(r.trials["params.config"], r.trials["last_step"], strict=True))

    assert steps(early) == steps(plain)        # every trial trained as far as before
    # (The straggler's own chain of segments is the sweep's wall time either way.)
    assert early.wall_s <= plain.wall_s and early.spend_usd < plain.spend_usd
    # A next rung's segment started while the rung before still had one running.
    segs = sorted(early.store.segments(), key=lambda s: s["started_at"])
    assert any(s["start_step"] == 1 and any(o["stop_step"] == 1 and o["finished_at"] >
                                            s["started_at"] for o in segs) for s in segs)


def test_early_promotion_refuses_a_re_planner_that_may_cut_a_stage():
    rp = Replanner(JobShape(27, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30)), SIM_GPU,
                   20_000.0, cost_budget_usd=5.0, billing_minimum_s=0)
    with pytest.raises(ValueError, match="early_promotion"):
        simulate_wired(_Straggler(), metric="acc", mode="max",
                 scheduler={**SHA, "max_resource": 9, "early_promotion": True}, num_trials=27,
                 workers=1, seed=0, scaling=FollowPlan(rp.initial()), replanner=rp,
                 time_budget_s=20_000.0, cost_budget_usd=5.0)


def test_stage_workers_hold_each_stages_count_and_keep_or_let_go_behind_stragglers():
    keep, let_go = (StageWorkers([6, 3, 1], boot_s=40.0, keep=k) for k in (True, False))

    def view(stage: int, *, starved: bool = False, queued: bool = False, live: int = 6,
             busy: int = 6, next_work_s: float | None = None) -> ScaleView:
        return ScaleView(now=100.0, live=live, busy=busy, starved=starved, queued=queued,
                         stage=stage, elapsed_s=100.0, next_work_s=next_work_s)

    assert keep.target(view(0)) == 6 and keep.target(view(1)) == 3
    assert keep.target(view(2)) == 1 and keep.target(view(5)) == 1   # past the last: its count
    assert keep.target(view(1, queued=True, live=5)) == 5            # jobs wait: none goes
    # Stage 0 waits for 2 stragglers: kept down to stage 1's 3 workers, or to the busy ones
    # until stage 1's work is 1.5 boots off, then its 3 are held again.
    assert keep.target(view(0, starved=True, busy=2)) == 3
    assert let_go.target(view(0, starved=True, busy=2)) == 2
    assert let_go.target(view(0, starved=True, busy=2, next_work_s=100.0 + 61)) == 2
    assert let_go.target(view(0, starved=True, busy=2, next_work_s=100.0 + 59)) == 3
    assert keep.target(view(2, starved=True, busy=1)) == 1            # nothing is to come
    with pytest.raises(ValueError, match="workers"):
        StageWorkers([2, 0], boot_s=1.0)
    with pytest.raises(ValueError, match="boot_s"):
        StageWorkers([2], boot_s=-1.0)


def test_a_stage_workers_cluster_lets_the_workers_of_pruned_trials_go():
    # 27 trials, rungs 1/3/9: 9 workers for stage 0, 3 for stage 1, 1 for the last.
    r = simulate_wired(Synth(), metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                 num_trials=27, workers=9, seed=3, boot_s=uniform_boot(60, 180),
                 scaling=StageWorkers([9, 3, 1], boot_s=120.0))
    assert r.outcome.reason == "done"
    fixed = simulate_wired(Synth(), metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                     num_trials=27, workers=9, seed=3, boot_s=uniform_boot(60, 180),
                     scaling=Static(9))
    assert fixed.outcome.reason == "done"
    assert r.spend_usd < fixed.spend_usd
    # Idle workers went behind stage 0's stragglers, down to stage 1's three; none goes while
    # jobs wait for a slot, so the last stage runs on those three.
    for rung in (3, 9):
        assert len({s["instance_id"] for s in r.store.segments() if s["stop_step"] == rung}) <= 3
