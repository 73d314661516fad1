"""Trials of different paces: per-trial paces, plans that wait for the slowest trial, and a
re-planner that shrinks a job whose budget it no longer fits."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from budgets import (
    BootLatency,
    FollowPlan,
    JobShape,
    Profile,
    Replanner,
    ReplanView,
    TrialPaces,
    list_makespan,
    plan_cost_min,
    plan_remaining,
    plan_static,
    slowest_first,
    stage_paces,
)
from tests._sims import GPU, SHA, SIM_GPU, Synth
from tuner.sim import SIM_SETTINGS, simulate_wired

# Re-planners whose figures are worked out by hand below keep ``margin=0.1`` (10 % free) as
# their comments do; sweeps use DEFAULT_MARGIN.


def test_a_trial_pace_comes_from_its_resumed_segments_else_from_its_first():
    tp = TrialPaces()
    tp.observe("a", steps=1, seconds=30.0, fresh=True)
    tp.observe("b", steps=1, seconds=10.0, fresh=True)
    # Only first segments: each against all first segments' mean (20 s a step).
    assert tp.pace("a", s_per_step=10.0) == pytest.approx(1.5)
    assert tp.pace("b", s_per_step=10.0) == pytest.approx(0.5)
    # A resumed segment replaces that: a's steps against the fitted rate.
    tp.observe("a", steps=2, seconds=24.0, fresh=False)
    assert tp.pace("a", s_per_step=10.0) == pytest.approx(1.2)
    assert tp.pace("c", s_per_step=10.0) is None
    tp.observe("c", steps=0, seconds=5.0, fresh=False)           # nothing trained: ignored
    assert tp.pace("c", s_per_step=10.0) is None


def test_stage_paces_take_the_pending_trials_now_and_the_best_ranked_later():
    ranked = [2.0, 1.0, None, 0.5, 3.0]          # best first; None: not measured (1.0)
    pending = [False, True, True, True, False]
    assert stage_paces(ranked, pending, [5, 2, 1]) == [
        # the three still to train; the one not measured may be as slow as the measured
        # ones' 1/2 quantile (the slowest of 1 unknown), 2.0
        (round(2.5 / 3, 4), 2.0),
        (1.5, 2.0),                               # the best two
        (2.0, 2.0)]                               # the best one
    assert stage_paces([], [], [3]) == [(1.0, 1.0)]


def test_later_stages_expect_a_slow_survivor_the_ranking_did_not_pick():
    # The best-ranked trials are all fast, but which trials survive is a guess: a later
    # stage of m trials is taken to be at least as slow as the m / (m + 1) quantile of the
    # pool (where the slowest of m trials drawn regardless of pace lies).
    ranked = [0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 2.0, 3.0, 4.0]
    got = stage_paces(ranked, [True] * 9, [9, 3, 1])
    assert got[0] == (round(13.5 / 9, 4), 4.0)
    assert got[1] == (0.5, 2.0)       # 3 of 9: the pool's 7th slowest-last, 2.0
    assert got[2] == (0.5, 1.0)       # 1 of 9: the median


def test_a_stage_lasts_as_long_as_its_slowest_trial():
    # 9 trials, rungs 1/3/9: stage 1 is 3 trials x 2 steps (a 20 s segment), stage 2 one trial
    # x 6 steps (60 s); 3 live workers, no billing minimum, deadline 600 s, 500 s in.
    shape, profile = JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(100))
    kw = dict(from_stage=1, elapsed_s=500.0, live_workers=3, billing_minimum_s=0)
    same = plan_remaining(shape, profile, GPU, 600.0, **kw)
    assert [(r.workers, r.end_s) for r in same.rungs] == [(3, 520.0), (1, 580.0)]
    # One of stage 1's trials is twice as slow (mean pace 1, slowest 2): it sets the end of
    # the stage on 3 workers (40 s). On 2 workers it may go out second (jobs go out in rank
    # order), after a trial of the mean pace: 20 + 40 s, and stage 2 would end at 620 s.
    slow = plan_remaining(shape, profile, GPU, 600.0, paces=[(1.0, 2.0)], **kw)
    assert slow.feasible and slow.inputs["paces"] == [[1.0, 2.0], [1.0, 1.0]]
    assert [(r.workers, r.start_s, r.end_s) for r in slow.rungs] == [
        (3, 500.0, 540.0), (1, 540.0, 600.0)]
    # Billed: 3 x 20 s of mean waves, then only the slowest's instance, which goes on to
    # stage 2 (the other two are let go): 60 + 20 + 60 instance-seconds.
    assert slow.predicted_cost_usd == pytest.approx(0.140)
    # The finalist 1.5x slower: 90 s for stage 2, which no cluster can shorten.
    late = plan_remaining(shape, profile, GPU, 600.0, paces=[(1.0, 1.0), (1.5, 1.5)], **kw)
    assert not late.feasible and late.predicted_wall_s == 610.0
    with pytest.raises(ValueError, match=r"paces\[0\]"):
        plan_remaining(shape, profile, GPU, 600.0, paces=[(2.0, 1.0)], **kw)
    with pytest.raises(ValueError, match=r"paces\[1\]"):
        plan_remaining(shape, profile, GPU, 600.0, paces=[(1.0, 1.0), (0.0, 1.0)], **kw)


def test_a_wide_pace_spread_times_stages_by_the_slowest_but_bills_the_mean():
    # A carried profile whose slowest of 9 trials trains 3x the mean and of 3 trials 2.25x:
    # rungs 1/3/9 (segments of 10, 20 and 60 s at the mean pace), no boot, no billing minimum,
    # a deadline only the widest plan meets (9, 3 and 1 instances).
    shape = JobShape(9, 1, 9, 3)
    spread = Profile(10.0, boot=BootLatency.fixed(0), pace_quantiles=((0.5, 1.0), (0.9, 3.0)))
    plan = plan_cost_min(shape, spread, GPU, 135.0, billing_minimum_s=0)
    assert plan.feasible
    # Each stage lasts until its slowest trial ends: 3 x 10, 2.25 x 20 and 60 s ...
    assert [(r.workers, r.end_s - r.start_s) for r in plan.rungs] == [
        (9, 30.0), (3, 45.0), (1, 60.0)]
    # ... but the other trials end at the mean pace and their instances go (the next stage's
    # boot again, at no cost here): the mean-pace work, 9 x 10 + 3 x 20 + 60 instance-seconds,
    # and the slowest's excess on its one instance, 20 + 25. Billing every instance until the
    # slowest ended made it 9 x 30 + 3 x 45 + 60 = 465.
    assert plan.predicted_cost_usd == pytest.approx((210 + 45) * GPU.on_demand_per_hour / 3600)
    assert [(p.t_s, p.workers) for p in plan.timeline] == [
        (0.0, 9), (10.0, 1), (30.0, 3), (50.0, 1), (135.0, 0)]
    # With a 100 s boot, a tail shorter than 2.5 boots holds the next stage's instances: 3
    # of stage 0's 9 wait 20 s for its slowest (boots 9 x 100 instance-seconds).
    booted = replace(spread, boot=BootLatency.fixed(100))
    plan = plan_cost_min(shape, booted, GPU, 235.0, billing_minimum_s=0)
    assert plan.feasible and [r.workers for r in plan.rungs] == [9, 3, 1]
    assert plan.predicted_cost_usd == pytest.approx(
        (900 + 90 + 3 * 20 + 60 + 25 + 60) * GPU.on_demand_per_hour / 3600)
    assert [(p.t_s, p.workers) for p in plan.timeline] == [
        (0.0, 9), (110.0, 3), (150.0, 1), (235.0, 0)]
    # A fixed cluster holds all of its instances through every stage's end.
    fixed = plan_static(shape, spread, GPU, 9, billing_minimum_s=0)
    assert fixed.predicted_wall_s == 135.0
    assert fixed.predicted_cost_usd == pytest.approx(9 * 135 * GPU.on_demand_per_hour / 3600)
    assert [(p.t_s, p.workers) for p in fixed.timeline] == [(0.0, 9), (135.0, 0)]


def test_slowest_first_only_where_it_ends_the_stage_sooner():
    assert slowest_first([1.0, 1.0, 2.0], slots=2) == [2, 0, 1]
    assert slowest_first([2.0, 1.0, 1.0], slots=2) is None      # already so
    assert slowest_first([1.0, 1.0, 2.0], slots=3) is None      # all at once
    assert slowest_first([1.0, 1.0, 1.0, 1.0], slots=2) is None  # no difference
    assert list_makespan([], 3) == 0.0
    with pytest.raises(ValueError, match="slots"):
        list_makespan([1.0], 0)


class _SlowThird(Synth):
    """9 configs, c8 best; c6, the third best, takes 40 s a step, the others 10 s."""

    def __init__(self) -> None:
        super().__init__(9)
        self.q = {f"c{i}": 0.5 + i / 20 for i in range(9)}

    def cost_s(self, c, a, b):
        return (40.0 if c == "c6" else 10.0) * (b - a)


def test_a_fixed_cluster_starts_a_stage_with_its_slowest_trial_and_a_resume_replays_it(tmp_path):
    # Rungs 1/3/9, 9 trials on 2 workers: stage 1 runs c8, c7 (20 s each) and c6 (80 s).
    # In rank order c6 starts when a slot frees at 20 s, and the stage lasts 100 s; slowest
    # first it starts at once, and the stage lasts 80 s.
    from tuner._journal import RestoreError, replay
    from tuner.schedulers import SuccessiveHalving
    from tuner.sim import simulate

    sweep = {"metric": "acc", "mode": "max", "scheduler": {**SHA, "max_resource": 9},
             "num_trials": 9, "provider": {"type": "local", "workers": 2}}
    r = simulate(sweep, _SlowThird(), seed=0, time_budget=None, cost_budget=10.0,
                 store_path=tmp_path / "s.db")
    assert r.outcome.reason == "done"
    journal = r.store.journal()
    firsts = [e["trial_id"] for e in journal if e["kind"] == "first"]
    ids = _SlowThird().config_ids()
    params = {row["trial_id"]: ids[json.loads(row["params"])["config"]]
              for row in r.store.query("SELECT trial_id, params FROM trials")}
    assert firsts and params[firsts[-1]] == "c6"   # the last one moved leads
    stage1 = [s for s in r.store.segments() if s["stop_step"] == 3]
    start, end = min(s["started_at"] for s in stage1), max(s["finished_at"] for s in stage1)
    slow = next(s for s in stage1 if params[s["trial_id"]] == "c6")
    assert slow["started_at"] == start and end - start == pytest.approx(80.0, abs=1.0)
    # A resumed sweep replays the order: the journal replays into a fresh scheduler.
    fresh = SuccessiveHalving(1, 9, 3, mode="max", num_trials=9)
    assert replay(fresh, journal) == len(journal) and fresh.is_finished()
    # A scheduler of another size has no such promotion queued: the journal does not
    # replay into it (a resume that changes num_trials is refused, not crashed).
    with pytest.raises(RestoreError, match="refuses .first."):
        replay(SuccessiveHalving(1, 9, 3, mode="max", num_trials=27), journal)


def test_the_replanner_plans_later_stages_with_the_likely_survivors_paces():
    rp = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(100)), GPU,
                   deadline_s=None, billing_minimum_s=0)
    view = ReplanView(now=0.0, elapsed_s=500.0, stage=1, live=3, observed_s_per_step=10.0,
                      observations=9, spent_usd=0.0, paces=(2.0, 1.0, 0.5),
                      pending=(True, True, True))
    plan = rp(view)
    assert plan.inputs["paces"] == [[round(3.5 / 3, 4), 2.0], [2.0, 2.0]]
    assert plan.rungs[-1].end_s - plan.rungs[-1].start_s == 120.0   # the best one, 2x slower


class _Spy(Replanner):
    """A re-planner that keeps every view it is shown (in ``seen``)."""

    def __init__(self, *args, seen: list[ReplanView], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen = seen

    def __call__(self, view: ReplanView):
        self.seen.append(view)
        return super().__call__(view)


class SlowWinners(Synth):
    """Synth, but a config's steps cost more the better it is (10 s to 20 s)."""

    def cost_s(self, c, a, b):
        return 10.0 * (1.0 + 2.0 * (self.q[c] - 0.5)) * (b - a)


def _spied_sweep(curves, shape: JobShape, workers: int = 9):
    """A simulated SHA sweep of ``shape`` with a re-planner, started on ``workers`` workers;
    every view it was shown."""
    seen: list[ReplanView] = []
    rp = _Spy(shape, Profile(10.0, boot=BootLatency.fixed(60)), SIM_GPU, None,
              billing_minimum_s=60, max_workers=shape.num_trials, seen=seen)
    r = simulate_wired(curves, metric="acc", mode="max",
                 scheduler={**SHA, "min_resource": shape.min_resource},
                 num_trials=shape.num_trials, workers=workers, seed=0, boot_s=lambda rng: 60.0,
                 scaling=FollowPlan(rp.initial()), replanner=rp)
    return r, seen


def test_the_controller_ranks_the_stage_and_measures_each_trial():
    r, seen = _spied_sweep(SlowWinners(), JobShape(81, 1, 27, 3))
    assert r.outcome.reason == "done"
    later = [v for v in seen if v.stage >= 1]
    assert later and all(len(v.paces) == len(v.pending) for v in later)
    stage1 = next(v for v in later if v.stage == 1)
    assert len(stage1.paces) == 27 and stage1.started == 81
    # Stage 1's trials are the best third, ranked best first: the slowest ones lead.
    assert all(p is not None for p in stage1.paces)
    assert stage1.paces[0] > stage1.paces[-1] and stage1.paces[0] > 1.0
    # Before any trial has resumed, the fit has first segments only; later it has both.
    assert all(v.fresh_only for v in seen if v.stage == 0) and not seen[-1].fresh_only
    # ... and it counts the segments that resumed a trial.
    assert all(v.resumed == 0 for v in seen if v.fresh_only) and seen[-1].resumed > 0
    assert [v.resumed for v in seen] == sorted(v.resumed for v in seen)
    plan = next(p for p in r.store.plans()[1:] if p["inputs"].get("from_stage") == 1)
    mean, slowest = plan["inputs"]["paces"][-1]                  # the final 3 trials
    assert slowest > 1.1 and mean <= slowest


BUDGET = 0.45


def _budget_sweep(replanner: bool, budget: float = BUDGET):
    # The planner believes 5 s a step; Synth's steps take 10 s. 81 trials would cost more
    # than the budget; the re-planner, once it sees the real pace, admits fewer. (It judges
    # admission at the geometric middle of 5 and 10 s: 81 trials then need 243 steps at
    # 7.07 s, $0.477, more than the budget less the margin.)
    shape = JobShape(81, 1, 27, 3)
    rp = Replanner(shape, Profile(5.0, boot=BootLatency.fixed(60)), SIM_GPU, 3000.0,
                   cost_budget_usd=budget, billing_minimum_s=60, margin=0.1)
    plan = rp.initial()
    return simulate_wired(Synth(), metric="acc", mode="max", scheduler=SHA, num_trials=81,
                    workers=max(1, plan.workers_for_rung(0)), time_budget_s=3000.0,
                    cost_budget_usd=budget, seed=0, boot_s=lambda rng: 60.0,
                    scaling=FollowPlan(plan), replanner=rp if replanner else None), rp


def test_a_sweep_that_no_longer_fits_its_budget_admits_fewer_trials():
    blind, _ = _budget_sweep(False)
    online, rp = _budget_sweep(True)
    # 81 trials at 10 s a step are 243 steps, 2430 GPU-seconds: $0.675 at $1/h, more than
    # the $0.45 budget before any boot is paid.
    assert blind.outcome.reason == "budget"
    assert online.outcome.reason == "done" and online.budget_respected
    assert online.spend_usd <= BUDGET
    started = len(online.trials)
    assert started < 81 and rp.shape.num_trials == started
    journal = online.store.journal()
    assert [e["kind"] for e in journal].count("close") == 1
    assert math.isfinite(online.best_value) and online.best_value > blind.best_value
    # The stages were sized from the trials admitted, and the last ones cut further when the
    # real pace of the resumed segments showed the budget short: one trial reached the top.
    promoted = {e["bracket"]: e["step"] for e in journal if e["kind"] == "promote"}
    assert promoted and max(promoted) == 2 and promoted[2] < started // 9
    finals = [s for s in online.store.segments() if s["stop_step"] == 27]
    assert len(finals) == max(1, promoted[2] // 3) == 1


def test_the_second_stage_is_judged_between_prior_and_seen_until_one_of_its_segments_ends():
    # Rungs 1/3/9, 27 trials, the prior 10 s a step, the first stage seen at 40 s (a first
    # epoch is often a run's dearest); $0.90 to spend at $3.6/h. Until a stage-1 segment
    # ends, the steps to come are judged at the geometric middle, 20 s: stage 1 costs $0.36
    # and each trial promoted into stage 2 $0.12, so 4 go on. Once one has ended, the fit is
    # the later steps' own: at 40 s stage 1 alone costs $0.72 (less the one done), and a
    # single trial goes on.
    def replan(stage_done: int) -> list[int]:
        rp = Replanner(JobShape(27, 1, 9, 3),
                       Profile(10.0, prior_weight=0, boot=BootLatency.fixed(0)), GPU, None,
                       cost_budget_usd=1.0, billing_minimum_s=0)
        plan = rp(ReplanView(now=0.0, elapsed_s=300.0, stage=1, live=1,
                             observed_s_per_step=40.0, observations=27, spent_usd=0.0,
                             started=27, stage_sizes=(27, 9, 3), stage_done=stage_done))
        return [r.trials for r in plan.rungs]

    assert replan(0) == [9, 4]
    assert replan(1) == [8, 1]


def _spare_budget_sweep(budget: float):
    # The planner's 10 s a step is Synth's: 27 trials to 27 steps (rungs 1/3/9/27) are 81
    # steps of halving, $0.225 at $1/h before boots.
    rp = Replanner(JobShape(27, 1, 27, 3), Profile(10.0, boot=BootLatency.fixed(60)),
                   SIM_GPU, 3000.0, cost_budget_usd=budget, billing_minimum_s=60)
    plan = rp.initial()
    return simulate_wired(Synth(), metric="acc", mode="max", scheduler=SHA, num_trials=27,
                    workers=max(1, plan.workers_for_rung(0)), time_budget_s=3000.0,
                    cost_budget_usd=budget, seed=0, boot_s=lambda rng: 60.0,
                    scaling=FollowPlan(plan), replanner=rp)


def test_a_sweep_with_budget_to_spare_promotes_more_trials():
    # With budget to spare the re-plan made as the first stage's last jobs are handed out
    # promotes more than a third of its trials (journaled), and the sweep still ends, within
    # the budget; with more budget, more trials go on.
    promoted = {}
    for budget in (0.4, 0.6):
        r = _spare_budget_sweep(budget)
        assert r.outcome.reason == "done" and r.budget_respected and r.spend_usd <= budget
        widened = {e["bracket"]: e["step"] for e in r.store.journal() if e["kind"] == "widen"}
        resumed = [s for s in r.store.segments() if s["stop_step"] == 3 and s["state"] == "done"]
        assert widened.get(1, 0) > 9 and len(resumed) == widened[1]
        promoted[budget] = len(resumed)
    assert promoted[0.4] < promoted[0.6]


def test_the_replanner_shrinks_no_lower_than_the_trials_started():
    shape = JobShape(81, 1, 27, 3)
    rp = Replanner(shape, Profile(10.0, boot=BootLatency.fixed(60)), SIM_GPU, None,
                   cost_budget_usd=0.2, billing_minimum_s=0, margin=0.1)
    view = ReplanView(now=0.0, elapsed_s=100.0, stage=0, live=4, observed_s_per_step=10.0,
                      observations=4, spent_usd=0.1, started=30)
    plan = rp(view)
    # 0.1 USD left, less the margin, buys 324 GPU-seconds; even the 30 trials already started
    # need 86 steps (860 s): nothing fits. Admission closes at the 30, and they promote as
    # few as can be: the best one, to the top.
    assert plan.num_trials == 30 and rp.shape.num_trials == 30
    assert [r.trials for r in plan.rungs] == [30, 1, 1, 1]
    generous = Replanner(shape, Profile(10.0, boot=BootLatency.fixed(60)), SIM_GPU, None,
                         cost_budget_usd=1.0, billing_minimum_s=0, margin=0.1)
    p = generous(ReplanView(now=0.0, elapsed_s=100.0, stage=0, live=4,
                            observed_s_per_step=10.0, observations=4, spent_usd=0.5,
                            started=30))
    # 0.5 USD left, less the 10 % margin: 1620 GPU-seconds; 81 trials need 2430 s. The most
    # that fit, of the counts c * 3**k and the 30 started: 54 (1620 s).
    assert p.num_trials == 54 and generous.shape.num_trials == 54
    assert p.predicted_cost_usd <= 0.5 * 0.90 + 1e-9
    with pytest.raises(ValueError, match="cost_budget_usd"):
        Replanner(shape, Profile(10.0), SIM_GPU, None, cost_budget_usd=0)


def test_admission_is_judged_between_the_prior_and_the_first_segments_seen():
    # The prior says 5 s a step; the first segments took 10 s. Judged at the geometric
    # middle (7.07 s) for the steps to come, the 81 trials need 81 x 10 s + 162 x 7.07 s =
    # 1955.5 GPU-seconds, within 0.9 x $2.5; at 10 s they would need 2430 s and be cut.
    shape = JobShape(81, 1, 27, 3)
    profile = Profile(5.0, prior_weight=0, boot=BootLatency.fixed(0))
    view = ReplanView(now=0.0, elapsed_s=10.0, stage=0, live=9, observed_s_per_step=10.0,
                      observations=9, spent_usd=0.0, started=9, stage_sizes=(81, 27, 9, 3))
    rp = Replanner(shape, profile, GPU, None, cost_budget_usd=2.5, billing_minimum_s=0, margin=0.1)
    plan = rp(view)
    assert plan.num_trials == 81 and rp.shape.num_trials == 81
    # The plan followed is the one on what was seen.
    assert plan.predicted_cost_usd == pytest.approx(2.43)
    tight = Replanner(shape, profile, GPU, None, cost_budget_usd=1.6, billing_minimum_s=0,
                      margin=0.1)
    # 0.9 x $1.6 buys 1440 s: 54 trials need 540 + 108 x 7.07 = 1304 s (at 10 s: 1620 s,
    # and 45 would be admitted).
    assert tight(view).num_trials == 54


def test_admission_cut_on_dear_first_segments_is_given_back_while_it_is_open():
    shape = JobShape(81, 1, 27, 3)
    rp = Replanner(shape, Profile(10.0, prior_weight=0, boot=BootLatency.fixed(0)), GPU, None,
                   cost_budget_usd=1.6, billing_minimum_s=0, margin=0.1)

    def view(rate: float) -> ReplanView:
        return ReplanView(now=0.0, elapsed_s=10.0, stage=0, live=9, observed_s_per_step=rate,
                          observations=9, spent_usd=0.0, started=9, stage_sizes=(81, 27, 9, 3))

    # 0.9 x $1.6 buys 1440 s. First segments of 20 s (later steps judged at 14.14 s): 27
    # trials need 540 + 54 x 14.14 = 1304 s, 36 need 1653 s.
    assert rp(view(20.0)).num_trials == 27 and rp.shape.num_trials == 27
    # Then 10 s, as the prior said: 45 trials need 450 + 78 x 10 = 1230 s, 54 need 1620 s.
    assert rp(view(10.0)).num_trials == 45 and rp.shape.num_trials == 45
    # A resumed sweep's re-planner, restricted to its earlier run's count, gives none back.
    resumed = Replanner(shape, Profile(10.0, prior_weight=0, boot=BootLatency.fixed(0)), GPU,
                        None, cost_budget_usd=1.6, billing_minimum_s=0, margin=0.1)
    resumed.restrict(27)
    assert resumed(view(10.0)).num_trials == 27 and resumed.shape.num_trials == 27
    # Once the trials admitted reach the count, admission is closed: nothing is given back.
    closed = ReplanView(now=0.0, elapsed_s=10.0, stage=0, live=9, observed_s_per_step=1.0,
                        observations=45, spent_usd=0.0, started=45,
                        stage_sizes=(45, 15, 5, 1))
    assert rp(closed).num_trials == 45


def test_a_later_stage_short_of_budget_promotes_fewer_trials():
    # Rungs 1/3/9, 27 trials, 10 s a step, no deadline, nothing booted or billed beyond the
    # work: stage 1 (9 trials x 2 steps) and stage 2 (3 x 6) need 180 + 180 GPU-seconds.
    shape = JobShape(27, 1, 9, 3)
    profile = Profile(10.0, boot=BootLatency.fixed(0))

    def replan(spent: float) -> list[int]:
        rp = Replanner(shape, profile, GPU, None, cost_budget_usd=1.0, billing_minimum_s=0,
                       margin=0.1)
        plan = rp(ReplanView(now=0.0, elapsed_s=300.0, stage=1, live=1,
                             observed_s_per_step=10.0, observations=27, spent_usd=spent,
                             started=27, stage_sizes=(27, 9, 3)))
        assert plan.num_trials == 27 and rp.shape.num_trials == 27
        return [r.trials for r in plan.rungs]

    # Judged on the budget left less half the margin (5 %): that plan bills nothing idle.
    assert replan(0.6) == [9, 3]        # $0.4 left less 5 %: $0.38, all of it fits
    assert replan(0.615) == [9, 3]      # $0.366 (less the whole margin, $0.347, cut to 2)
    assert replan(0.65) == [9, 2]       # $0.3325: 180 s + 2 x 60 s
    assert replan(0.8) == [9, 1]        # $0.19: none fits; the best one still goes on
    # A stage already cut is planned as the scheduler runs it ($0.27 left less the margin:
    # one more promotion would cost $0.30).
    rp = Replanner(shape, profile, GPU, None, cost_budget_usd=1.0, billing_minimum_s=0, margin=0.1)
    plan = rp(ReplanView(now=0.0, elapsed_s=300.0, stage=1, live=1, observed_s_per_step=10.0,
                         observations=27, spent_usd=0.7, started=27, stage_sizes=(27, 9, 1)))
    assert [r.trials for r in plan.rungs] == [9, 1]
    assert plan.predicted_cost_usd == pytest.approx(0.24)


def test_a_later_stage_with_budget_to_spare_promotes_more_trials():
    # Rungs 1/3/9, 27 trials, 10 s a step ($0.01 a step at $3.6/h), no boot or billing
    # minimum: stage 1 (9 trials x 2 steps) costs $0.18, each trial promoted into stage 2
    # (6 steps) $0.06.
    shape = JobShape(27, 1, 9, 3)
    profile = Profile(10.0, boot=BootLatency.fixed(0))

    def replan(spent: float, deadline_s: float | None = None, **kw: int) -> list[int]:
        rp = Replanner(shape, profile, GPU, deadline_s, cost_budget_usd=1.0,
                       billing_minimum_s=0, **kw, margin=0.1)
        plan = rp(ReplanView(now=0.0, elapsed_s=300.0, stage=1, live=1,
                             observed_s_per_step=10.0, observations=27, spent_usd=spent,
                             started=27, stage_sizes=(27, 9, 3)))
        assert plan.num_trials == 27 and rp.shape.num_trials == 27
        return [r.trials for r in plan.rungs]

    assert replan(0.6) == [9, 3]        # $0.36 to spend: 3 promoted ($0.36), as halving does
    assert replan(0.5) == [9, 4]        # $0.45: 4 ($0.42)
    assert replan(0.3) == [9, 7]        # $0.63: 7 ($0.60)
    assert replan(0.0) == [9, 9]        # $0.90: all of stage 1 ($0.72)
    # Only as many as also end on time: on 3 workers stage 1 takes 3 waves of 20 s and
    # stage 2 a 60 s wave per 3 trials; with 200 s left, less 10 % kept free, 2 waves fit.
    assert replan(0.0, deadline_s=500.0, max_workers=3) == [9, 6]
    assert replan(0.0, deadline_s=600.0, max_workers=3) == [9, 9]


def test_first_segments_alone_scale_the_prior_rate_and_first_cost_together():
    # The prior: 10 s a step and 30 s more for a trial's first segment (rung 0 is 1 step, so
    # a first segment is 40 s). First segments seen at 80 s (observed 80 s a step over their
    # one step): twice the prior, so 20 s a step and 60 s of first cost, not 80 s a step.
    shape = JobShape(9, 1, 9, 3)
    profile = Profile(10.0, first_segment_s=30.0, boot=BootLatency.fixed(0))
    rp = Replanner(shape, profile, GPU, None, billing_minimum_s=0)
    view = ReplanView(now=0.0, elapsed_s=100.0, stage=0, live=1, observed_s_per_step=80.0,
                      observations=3, spent_usd=0.0, fresh_only=True)
    assert rp(view).inputs["s_per_step"] == pytest.approx(20.0)
    # Once resumed segments are in the fit, its rate is taken as it is.
    mixed = rp(ReplanView(now=0.0, elapsed_s=100.0, stage=0, live=1, observed_s_per_step=80.0,
                          observations=3, spent_usd=0.0, fresh_only=False))
    assert mixed.inputs["s_per_step"] > 60.0
    # Without a first cost in the prior there is nothing to split: all of it is steps.
    flat = Replanner(shape, Profile(10.0, boot=BootLatency.fixed(0)), GPU, None,
                     billing_minimum_s=0)
    assert flat(view).inputs["s_per_step"] > 60.0


def test_a_stage_that_ran_late_stretches_the_plans_of_the_stages_after_it():
    # 9 trials, rungs 1/3/9 at 10 s a step, no boot, no minimum, no deadline: one worker;
    # stage 0 is planned to end at 90 s.
    rp = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(0)), GPU, None,
                   billing_minimum_s=0)
    assert rp.initial().rungs[0].end_s == 90.0

    def at(stage: int, elapsed: float):
        return rp(ReplanView(now=0.0, elapsed_s=elapsed, stage=stage, live=1,
                             observed_s_per_step=10.0, observations=9, spent_usd=0.0))

    # Stage 0 took 117 s, 1.3x its plan: stage 1 (3 trials x 2 steps) is planned 1.3x too.
    p = at(1, 117.0)
    assert p.inputs["straggler"] == pytest.approx(0.3)
    assert p.rungs[0].end_s - p.rungs[0].start_s == pytest.approx(78.0)
    # A second re-plan in the same stage does not count the stage again.
    assert at(1, 150.0).inputs["straggler"] == pytest.approx(0.3)
    # Stage 1 on time (planned 117 + 78 = 195 s): the worst stage so far still counts.
    assert at(2, 195.0).inputs["straggler"] == pytest.approx(0.3)
    # A stage far later than its plan counts as 1.5x at most.
    fresh = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(0)), GPU,
                      None, billing_minimum_s=0)
    fresh.initial()
    late = fresh(ReplanView(now=0.0, elapsed_s=900.0, stage=1, live=1,
                            observed_s_per_step=10.0, observations=9, spent_usd=0.0))
    assert late.inputs["straggler"] == pytest.approx(0.5)


def test_a_new_replanner_takes_up_what_an_earlier_one_learnt_of_the_stages():
    # As above: stage 0 ends at 117 s against a plan of 90 s (1.3x). A new re-planner given
    # the first one's calibration (as a resumed sweep's is) judges stage 1 against the first
    # one's plan for it, as the first one does; without it, stage 1's plan is unknown to it
    # and stage 2 is planned with no allowance for late stages.
    def make() -> Replanner:
        return Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(0)), GPU,
                         None, billing_minimum_s=0)

    def view(stage: int, elapsed: float) -> ReplanView:
        return ReplanView(now=0.0, elapsed_s=elapsed, stage=stage, live=1,
                          observed_s_per_step=10.0, observations=9, spent_usd=0.0)

    rp = make()
    rp.initial()
    rp(view(1, 117.0))
    kept = rp.calibration()
    assert kept == {"bracket": 0, "late": pytest.approx(1.3),
                    "stages": {"0": [0.0, 90.0], "1": [117.0, 195.0]}}
    resumed, afresh = make(), make()
    assert resumed.recalibrate(json.loads(json.dumps(kept)))
    # Stage 1 ran to 260 s against 195 s planned: 1.83x, counted as 1.5x at most.
    assert resumed(view(2, 260.0)).inputs["straggler"] == pytest.approx(0.5)
    assert rp(view(2, 260.0)).inputs["straggler"] == pytest.approx(0.5)
    assert afresh(view(2, 260.0)).inputs["straggler"] == pytest.approx(0.0)
    # Taken in another bracket: how late stages ran is kept, not the stages' plans.
    other = make()
    other.begin_bracket(9)
    assert not other.recalibrate(kept)
    assert other.calibration() == {"bracket": 1, "late": pytest.approx(1.3), "stages": {}}
    for bad in ({}, {"bracket": 0, "late": 0.5, "stages": {}},
                {"bracket": 0, "late": 1.0, "stages": {"0": [1.0]}}):
        with pytest.raises(ValueError, match="calibration"):
            make().recalibrate(bad)


class SlowTail(Synth):
    """Synth with 9 configs, three of which train ten times slower (100 s a step)."""

    def __init__(self) -> None:
        super().__init__(n=9)

    def cost_s(self, c, a, b):
        return (100.0 if c in ("c6", "c7", "c8") else 10.0) * (b - a)


def test_segments_still_running_past_the_fit_count_in_it():
    # The quick first segments end first; a fit on them alone says 10 s a step while three
    # segments have been running for longer. Counted as ending now (a lower bound), they
    # raise the fit, and the drift makes the controller re-plan in stage 0, again as they
    # keep running (they are looked at every 20 ticks between segment ends).
    seen: list[ReplanView] = []
    # A deadline the prior cannot meet: the plan is the fastest, 9 workers for 9 trials.
    rp = _Spy(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60)), SIM_GPU,
              155.0, billing_minimum_s=60, max_workers=9, seen=seen)
    assert rp.initial().rungs[0].workers == 9

    r = simulate_wired(SlowTail(), metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                 num_trials=9, workers=9, seed=0, boot_s=lambda rng: 60.0,
                 scaling=FollowPlan(rp.initial()), replanner=rp)
    assert r.outcome.reason == "done"
    slow_ends = sorted(s["finished_at"] for s in r.store.segments()
                       if s["stop_step"] == 1 and s["trial_id"] in {
                           t for t, c in zip(r.trials["trial_id"], r.trials["params.config"],
                                             strict=True) if c in (6, 7, 8)})
    early = [v for v in seen if v.stage == 0 and v.now < slow_ends[0]]
    assert early, "no re-plan while the slow first segments were running"
    # Re-checked between segment ends: by the time the slow ones end, the fit has risen
    # most of the way to the 40 s a step it is once they are in.
    assert max(v.observed_s_per_step for v in early) > 30.0
    assert len(early) >= 3


def test_a_resumed_sweep_keeps_the_smaller_number_of_trials_a_replan_chose():
    from optuna.distributions import IntDistribution

    from budgets import Ledger, SimClock
    from tuner._controller import Controller, RunSpec
    from tuner._sampling import PermutationSampler, Sampler
    from tuner.schedulers import make_scheduler
    from tuner.sim import SIM_SETTINGS, SimExecutor, SimProvider

    online, rp = _budget_sweep(True)
    limits = [e["step"] for e in online.store.journal() if e["kind"] == "limit"]
    assert limits and limits[-1] == rp.shape.num_trials < 81
    # A new controller on the same store (as after a crash): the limit comes back, and the
    # fresh re-planner is told, so it does not plan the original 81 trials again.
    clock = SimClock()
    provider = SimProvider(clock)
    curves = Synth()
    fresh = Replanner(JobShape(81, 1, 27, 3), Profile(5.0, boot=BootLatency.fixed(60)),
                      SIM_GPU, 3000.0, cost_budget_usd=BUDGET, billing_minimum_s=60)
    spec = RunSpec(experiment_id="sim", trainable="simulated", metric="acc", mode="max",
                   workers=1, gpus_per_trial=1, time_budget_s=3000.0, cost_budget_usd=BUDGET,
                   checkpoint_root="/nonexistent", instance_type="sim-gpu")
    space = {"config": IntDistribution(0, len(curves.config_ids()) - 1)}
    controller = Controller(
        spec, scheduler=make_scheduler("sha", 1, 27, 3, "max", 81),
        sampler=Sampler(space, PermutationSampler(0), "max", 0),
        executor=SimExecutor(clock, provider, curves, metric="acc",
                             config_ids=curves.config_ids()),
        provider=provider, ledger=Ledger(BUDGET, 60.0), store=online.store, clock=clock,
        settings=SIM_SETTINGS, replanner=fresh)
    assert controller.restore() == len(online.trials)
    assert controller.state.admit_limit == limits[-1]
    assert fresh.shape.num_trials == limits[-1]
    with pytest.raises(ValueError, match="num_trials"):
        fresh.restrict(0)


class DearFirstStep(Synth):
    """Synth, but a trial's first step costs 100 s more (set-up, warm-up)."""

    def cost_s(self, c, a, b):
        return 10.0 * (b - a) + (100.0 if a == 0 and b > 0 else 0.0)


def test_first_segments_of_several_steps_tell_the_first_steps_cost_from_the_rest():
    # Rungs 3/9/27: every first segment trains 3 steps, 130 s in all. One worker (the plan's,
    # with no deadline), so they end one by one: on 9 they would end in waves of 9, and the
    # first wave would already tell the two apart (no re-plan: nothing drifted).
    r, seen = _spied_sweep(DearFirstStep(n=27), JobShape(27, 3, 27, 3), workers=1)
    assert r.outcome.reason == "done"
    first_stage = [v for v in seen if v.stage == 0]
    # The first re-plans see 130 s per 3 steps; then, still in the first stage (first
    # segments only), the fit has 10 s a step and the first step's 100 s extra apart (and,
    # on the prior's 10 s, re-plans no more), rather than 43 s a step.
    assert first_stage and first_stage[0].observed_s_per_step > 40
    view = first_stage[-1]
    assert view.observations < 27
    assert view.observed_s_per_step == pytest.approx(10.0, rel=0.01)
    assert view.observed_first_s == pytest.approx(100.0, rel=0.01)
    assert not view.fresh_only


def test_the_controller_follows_an_admission_limit_down_and_back_up():
    # A re-planner that first cuts admission to 9 trials, then gives it back to 27: while
    # admission is open, the controller follows both, journaled, and admits all 27. (The
    # plans assume 5 s a step; Synth takes 10 s, so the first segment to end re-plans.)
    plans = {n: Replanner(JobShape(n, 1, 9, 3), Profile(5.0, boot=BootLatency.fixed(30)),
                          SIM_GPU, None, billing_minimum_s=0).initial() for n in (9, 27)}
    seen: list[ReplanView] = []

    class Scripted(Replanner):
        def __call__(self, view: ReplanView):
            seen.append(view)
            return plans[9] if len(seen) == 1 else plans[27]

    replanner = Scripted(JobShape(27, 1, 9, 3), Profile(5.0, boot=BootLatency.fixed(30)),
                         SIM_GPU, None, billing_minimum_s=0)

    r = simulate_wired(Synth(n=27), metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                 num_trials=27, workers=1, seed=0, boot_s=lambda rng: 30.0,
                 scaling=FollowPlan(plans[27]), replanner=replanner, billing_minimum_s=0.0)
    journal = r.store.journal()
    assert [e["step"] for e in journal if e["kind"] == "limit"] == [9, 27]
    assert seen[1].started < 9
    # Stage 1's promotions followed each plan: 9 // 3, then 27 // 3.
    assert [e["step"] for e in journal if e["kind"] == "promote"] == [3, 9]
    assert r.outcome.reason == "done" and len(r.trials) == 27
    assert sum(1 for s in r.store.segments() if s["stop_step"] == 9) == 3
    # The views carried the stage sizes the scheduler runs.
    assert seen[0].stage_sizes == (27, 9, 3)


class _DearFirstStepThenStop(DearFirstStep):
    """DearFirstStep that asks the sweep to stop (its stop file) once a third trial has
    reported its ninth step: the second stage (rungs 3/9/27) is under way."""

    def __init__(self, stop_file) -> None:
        super().__init__(n=27)
        self.stop_file, self.at_nine = stop_file, set()

    def value(self, c, s):
        if s == 9:
            self.at_nine.add(c)
            if len(self.at_nine) >= 3:
                self.stop_file.touch()
        return super().value(c, s)


def _sim_controller(store, curves, stop_file, elapsed_before_s: float = 0.0):
    """A controller on simulated parts over ``store``: a 27-trial SHA sweep (rungs 3/9/27)
    on one worker, re-planned, as ``elastune run`` and ``elastune resume`` build it."""
    from dataclasses import replace

    from optuna.distributions import IntDistribution

    from budgets import Ledger, SimClock
    from tuner._controller import Controller, RunSpec
    from tuner._sampling import PermutationSampler, Sampler
    from tuner.schedulers import make_scheduler
    from tuner.sim import SimExecutor, SimProvider

    clock = SimClock()
    provider = SimProvider(clock, boot_s=lambda rng: 60.0)
    seen: list[ReplanView] = []
    rp = _Spy(JobShape(27, 3, 27, 3), Profile(10.0, boot=BootLatency.fixed(60)),
              SIM_GPU, None, billing_minimum_s=60, max_workers=27, seen=seen)
    spec = RunSpec(experiment_id="sim", trainable="simulated", metric="acc", mode="max",
                   workers=1, gpus_per_trial=1, time_budget_s=None, cost_budget_usd=None,
                   checkpoint_root="/nonexistent", instance_type="sim-gpu",
                   elapsed_before_s=elapsed_before_s)
    controller = Controller(
        spec, scheduler=make_scheduler("sha", 3, 27, 3, "max", 27),
        sampler=Sampler({"config": IntDistribution(0, 26)}, PermutationSampler(0), "max", 0),
        executor=SimExecutor(clock, provider, curves, metric="acc",
                             config_ids=curves.config_ids()),
        provider=provider, ledger=Ledger(None, 60.0), store=store, clock=clock,
        settings=replace(SIM_SETTINGS, stop_file=stop_file), replanner=rp)
    return controller, seen, rp


def test_a_resumed_controller_fits_the_step_times_the_earlier_run_measured(tmp_path):
    # Stopped in the second stage, then taken up by a new controller over the same store (as
    # after a crash): the segments the first run finished come back into its step-time fit,
    # its trials' paces and the stage's count of segments done, as the first run had them,
    # so its first re-plan sees 10 s a step and a first step 100 s dearer (DearFirstStep),
    # not the profile's prior alone; and its re-planner, how late the stages ran.
    from tuner._store import Store

    stop_file = tmp_path / "STOP"
    store = Store(tmp_path / "sweep")
    store.create_experiment("sim", "sim", {"simulated": "synth"}, "acc", "max", None, None)
    first, _, first_rp = _sim_controller(store, _DearFirstStepThenStop(stop_file), stop_file)
    outcome = first.run()
    assert outcome.reason == "requested"
    done = [s for s in store.segments() if s["state"] == "done"]
    assert any(s["start_step"] > 0 for s in done), "stopped before the second stage"
    stop_file.unlink()

    second, seen, second_rp = _sim_controller(
        store, DearFirstStep(n=27), stop_file,
        elapsed_before_s=outcome.finished_at - outcome.started_at)
    second.restore()
    # What the first re-planner learnt of its stages' timing comes back too.
    assert "1" in first_rp.calibration()["stages"]
    assert second_rp.calibration() == first_rp.calibration()
    assert len(second.timings.step_times) == len(done)
    assert sorted(second.timings.step_times) == sorted(first.timings.step_times)
    assert sorted(second.timings.segment_times) == sorted(first.timings.segment_times)
    assert second.timings.resumed_segments == first.timings.resumed_segments > 0
    assert second.timings.done_at_rung == first.timings.done_at_rung
    assert second.timings.done_at_rung[0] == 27
    for trial_id in first.trials:
        assert second.timings.paces.pace(trial_id, s_per_step=10.0) == pytest.approx(
            first.timings.paces.pace(trial_id, s_per_step=10.0))
    fit = second.plans.fit(second.timings.segment_times)
    assert fit is not None and fit == pytest.approx((10.0, 100.0), rel=0.01)

    assert second.run().reason == "done"
    assert seen, "the resumed sweep never re-planned"
    # At its first tick, from the stage under way (not when a worker has booted for it).
    assert seen[0].stage == 1
    assert seen[0].elapsed_s == pytest.approx(outcome.finished_at - outcome.started_at,
                                              abs=SIM_SETTINGS.tick_s)
    assert seen[0].observations >= len(done) and not seen[0].fresh_only
    assert seen[0].observed_s_per_step == pytest.approx(10.0, rel=0.01)
    assert seen[0].observed_first_s == pytest.approx(100.0, rel=0.01)


def test_an_unreadable_calibration_is_left_out_of_a_resume_with_a_warning(tmp_path, caplog):
    from tuner._plan_following import CALIBRATION_KEY
    from tuner._store import Store

    stop_file = tmp_path / "STOP"
    store = Store(tmp_path / "sweep")
    store.create_experiment("sim", "sim", {"simulated": "synth"}, "acc", "max", None, None)
    first, _, _ = _sim_controller(store, _DearFirstStepThenStop(stop_file), stop_file)
    assert first.run().reason == "requested"
    stop_file.unlink()
    store.set_meta(CALIBRATION_KEY, '{"bracket": 0, "late": 0.2, "stages": {}}')
    second, _, rp = _sim_controller(store, DearFirstStep(n=27), stop_file)
    with caplog.at_level("WARNING", logger="tuner._controller"):
        assert second.restore() == len(first.trials)
    assert "calibration is unreadable" in caplog.text
    assert rp.calibration() == {"bracket": 0, "late": 1.0, "stages": {}}
    assert second.run().reason == "done"


def test_a_profile_with_an_earlier_runs_spread_plans_each_stage_to_end_with_its_slowest():
    plain = Profile(10.0, boot=BootLatency.fixed(0))
    spread = Profile(10.0, boot=BootLatency.fixed(0),
                     pace_quantiles=((0.5, 0.9), (0.75, 1.5), (0.9, 2.0)))
    # The slowest of m trials at the m / (m + 1) quantile: 1 trial at the median (never
    # below 1), 3 at 0.75, 9 at 0.9, 27 beyond the table (its last).
    assert [spread.slowest_pace(m) for m in (1, 3, 9, 27)] == [1.0, 1.5, 2.0, 2.0]
    assert plain.slowest_pace(27) == 1.0
    # 9 trials on 9 instances: each stage one wave, which ends with its slowest trial.
    shape = JobShape(9, 1, 9, 3)
    a = plan_remaining(shape, plain, GPU, None, from_stage=0, elapsed_s=0.0, live_workers=9,
                       billing_minimum_s=0, max_workers=9)
    b = plan_remaining(shape, spread, GPU, None, from_stage=0, elapsed_s=0.0, live_workers=9,
                       billing_minimum_s=0, max_workers=9)
    assert b.inputs["paces"] == [[1.0, 2.0], [1.0, 1.5], [1.0, 1.0]]
    assert b.predicted_wall_s > a.predicted_wall_s
    with pytest.raises(ValueError, match="pace_quantiles"):
        Profile(10.0, pace_quantiles=((0.9, 2.0), (0.5, 1.0)))


def test_promoted_trials_spread_times_the_stages_after_the_first():
    first = ((0.5, 0.9), (0.75, 1.5), (0.9, 2.0))
    promoted = ((0.5, 0.8), (0.75, 2.5), (0.9, 3.0))
    spread = Profile(10.0, boot=BootLatency.fixed(0), pace_quantiles=first)
    both = Profile(10.0, boot=BootLatency.fixed(0), pace_quantiles=first,
                   promoted_pace_quantiles=promoted)
    assert [both.slowest_pace(m, promoted=True) for m in (1, 3, 9)] == [1.0, 2.5, 3.0]
    assert both.slowest_pace(9) == spread.slowest_pace(9, promoted=True) == 2.0
    shape = JobShape(9, 1, 9, 3)
    kw = dict(elapsed_s=0.0, live_workers=9, billing_minimum_s=0, max_workers=9)
    a = plan_remaining(shape, spread, GPU, None, from_stage=0, **kw)
    b = plan_remaining(shape, both, GPU, None, from_stage=0, **kw)
    # The first stage from the first segments' spread; the later ones from the promoted.
    assert b.inputs["paces"] == [[1.0, 2.0], [1.0, 2.5], [1.0, 1.0]]
    assert b.rungs[0].end_s == a.rungs[0].end_s
    assert b.predicted_wall_s > a.predicted_wall_s
    later = plan_remaining(shape, both, GPU, None, from_stage=1, **kw)
    assert later.inputs["paces"] == [[1.0, 2.5], [1.0, 1.0]]
    with pytest.raises(ValueError, match="promoted_pace_quantiles"):
        Profile(10.0, promoted_pace_quantiles=((0.5, 0.0),))


def test_the_replanner_plans_later_stages_no_less_spread_than_promoted_trials_were():
    # The current stage's nine trials alike: the ranking says nothing of the spread to come,
    # so stage 2's three are planned as unlike their mean as promoted trials were.
    shape = JobShape(27, 1, 9, 3)
    view = ReplanView(now=100.0, elapsed_s=100.0, stage=1, live=9, observed_s_per_step=10.0,
                      observations=27, spent_usd=0.1, paces=(1.0,) * 9,
                      pending=(True,) * 9, stage_sizes=(27, 9, 3))
    paces = []
    for table in ((), ((0.5, 0.8), (0.75, 2.5), (0.9, 3.0))):
        profile = Profile(10.0, boot=BootLatency.fixed(0), promoted_pace_quantiles=table)
        plan = Replanner(shape, profile, GPU, deadline_s=None, billing_minimum_s=0)(view)
        paces.append(plan.inputs["paces"])
    assert paces[0] == [[1.0, 1.0], [1.0, 1.0]]
    assert paces[1] == [[1.0, 1.0], [1.0, 2.5]]
