"""The controller's part of planning: re-plan the rest of the sweep as timings arrive
(at rung boundaries, and when the observed seconds per step drift from the plan's, running
segments included), hand the re-planner each trial's pace, tell the scaling policy when a
synchronous stage's stragglers are expected to end, decide such a stage without them near the
deadline (a sweep whose shape the planner chose), and pick the market of each new instance
with the spot policy. The decisions are :class:`budgets.Replanner`'s,
:class:`budgets.FollowPlan`'s and :class:`budgets.SpotPolicy`'s; this part gathers what they
need from the sweep's state, its timings and its cluster.
"""

from __future__ import annotations

import json
import logging
import math
from typing import TYPE_CHECKING

from budgets import (
    MIN_RESUMED,
    FollowPlan,
    Ledger,
    Plan,
    Replanning,
    ReplanView,
    ScalingPolicy,
    SpotPolicy,
    fit_segment_times,
    slowest_first,
)
from cloud import ZonedSpot
from tuner._executor import Executor
from tuner._journaled import JournaledScheduler
from tuner._run_spec import RunSpec, Settings
from tuner._store import Store
from tuner._sweep_state import SweepState

if TYPE_CHECKING:
    from tuner._cluster import Cluster
    from tuner._timings import Timings

log = logging.getLogger("tuner._controller")

# Between segment ends, how often (in ticks) running segments are checked against the fit.
OVERDUE_CHECK_TICKS = 20
# A re-plan when the fitted seconds per step differ from the plan's by more than this share;
# a tighter band cost deadlines on the planner benchmark: docs/benchmarks/tuning-log.md#drift
DRIFT = 0.25
# While a stage waits for a segment running past its expected end, that segment is expected
# to run this share of its age again (a long-tailed duration: the longer it has run, the
# longer it will), when deciding whether the next stage's workers may go meanwhile; chosen on
# the planner benchmark: docs/benchmarks/tuning-log.md#overdue-again
OVERDUE_AGAIN = 0.5
# A sweep with a cost budget (the planner chose its shape) counts twice its age again: there
# an idle worker spends the budget that buys trials and promotions; chosen on the planner
# benchmark: docs/benchmarks/tuning-log.md#overdue-again-budget
OVERDUE_AGAIN_BUDGET = 2.0
# A spot launch that found no capacity this recently means "no spot now" to the spot policy
# (the launcher's longest back-off between tries).
SPOT_SHORT_S = 300.0
# The store's meta key of the re-planner's calibration (``Replanner.calibration``).
CALIBRATION_KEY = "replanner_calibration"


class PlanFollowing:
    """Follows and re-makes the plan: ``scaling`` (None: a fixed cluster) says how many
    instances the sweep wants; ``replanner`` (None: none) re-plans its rest; with
    ``more_brackets`` (a sweep whose number of trials the planner chose) a bracket that ends
    with time and budget left may start another; with ``fill_idle`` (the same, on any
    cluster) an asynchronous sweep on a fixed cluster admits more trials while a worker would
    idle (:meth:`admit_idle`). ``timings`` is set once built (it weighs steps with
    :meth:`steps_weight`)."""

    def __init__(self, spec: RunSpec, settings: Settings, *, state: SweepState,
                 scheduler: JournaledScheduler, cluster: Cluster, ledger: Ledger, store: Store,
                 executor: Executor, scaling: ScalingPolicy | None,
                 replanner: Replanning | None, more_brackets: bool,
                 fill_idle: bool = False, max_trials: int | None = None) -> None:
        self.spec = spec
        self.settings = settings
        self.state = state
        self.scheduler = scheduler
        self.cluster = cluster
        self.ledger = ledger
        self.store = store
        self.executor = executor
        self.scaling = scaling
        self.replanner = replanner
        self.more_brackets = more_brackets
        self.fill_idle = fill_idle
        self.max_trials = max_trials
        self.timings: Timings
        self.replanned = (0, 0)           # (stage, step times seen) at the last re-plan
        self.closing = -1                 # the last stage re-planned once all its jobs ran
        self.calibration_kept: str | None = None   # the re-planner's, as last stored
        self._overdue_checked = -math.inf  # when running segments were last compared
        self._work_fit: tuple[int, tuple[float, float] | None] = (-1, None)  # (segments, fit)
        self._ordered: tuple[int, int] | None = None   # (bracket's first trial, stage) ordered
        self._lost_since: Plan | None = None   # the plan lost work is counted against
        self._prior_plan: Plan | None = None   # the plan made before any segment was measured

    @property
    def cuts_stages(self) -> bool:
        """Whether the re-planner has the cost budget (the planner chose the sweep's shape):
        it may cut a stage under way."""
        return self.replanner is not None and self.replanner.cost_budget_usd is not None

    @property
    def plan(self) -> Plan | None:
        """The plan the scaling policy follows (None: it follows none)."""
        return self.scaling.plan if isinstance(self.scaling, FollowPlan) else None

    def order_stage(self) -> None:
        """As a synchronous stage's promotions are about to go out (from the second stage on,
        where every trial has trained and has a pace): hand them out slowest first when that
        list schedule ends the stage sooner on the slots the plan gives it, or the cluster has
        (Graham's longest-processing-time rule: a slowest trial started in the last wave is
        what makes a stage late), journaled. Once per stage; not with early promotion (its
        jobs go out as they become certain)."""
        staged = self.scheduler.staged
        if staged is None or self.scheduler.early_promotion or staged.stage == 0:
            return
        key = (self.state.bracket_first, staged.stage)
        if self._ordered == key:
            return          # (asked at every dispatch: nothing more once the stage is ordered)
        queued = staged.queued()
        if not queued:
            return
        self._ordered = key
        fit = self.fit(self.timings.segment_times)
        if fit is None:
            return
        paces = [self.timings.paces.pace(t, s_per_step=fit[0]) for t in queued]
        if any(p is None for p in paces):
            return
        plan = self.plan
        if plan is not None:
            per = max(1, self.cluster.provider.slots(self.spec.instance_type)
                      // max(1, self.spec.gpus_per_trial))
            slots = plan.workers_for_rung(staged.stage) * per
        else:
            slots = self.cluster.trial_slots()
        order = slowest_first([float(p) for p in paces if p is not None], max(1, slots))
        if order is None:
            return
        log.info("stage %d: its %d trials go out slowest first", staged.stage, len(order))
        for i in reversed(order):
            self.scheduler.hand_out_first(queued[i])

    def cut_stragglers(self, now: float) -> None:
        """HyperSched's admission control near the deadline, for a sweep whose shape the
        planner chose (the most accurate within both budgets; the re-planner has the cost
        budget): from the second stage on, when every segment a synchronous stage still waits
        for is expected to end too late for the stages after it (their steps at the fitted
        rate, one trial each: the least they need), the stage is decided with the trials that
        have reached its rung (enough to fill the next stage), and the others are pruned and
        stopped. A sweep of a given shape runs it as given."""
        staged = self.scheduler.staged
        if not self.cuts_stages or math.isinf(self.state.deadline):
            return
        if staged is None or staged.stage == 0:
            # (In the first stage the rates are first segments only, often dearer than the
            # steps to come; the re-planner shrinks the job there instead.)
            return
        waiting = self._stage_wait(now)
        if waiting is None:
            return
        ends, rate = waiting
        # The least the stages after need: their steps at the fitted rate, one trial each.
        rungs = staged.rungs
        after = rate * (rungs[-1] - rungs[staged.stage])
        if min(ends) + after <= self.state.deadline - self.state.started_at:
            return
        cut = staged.stragglers()
        if not cut:
            return
        log.info("stage %d decided without its stragglers: %s", staged.stage,
                 ", ".join(cut))
        cut = self.scheduler.decide_stage()
        self.state.cut.update(cut)
        # The next stage's jobs are ready: the scaling policy holds its workers (the idle
        # ones stay), and it is planned afresh at the next tick.
        self.state.starved = False
        self.state.stage = max(self.state.stage, staged.stage)
        self.replanned = (-1, -1)
        self.executor.request_stop([sid for sid, run in self.state.running.items()
                                    if run.segment.trial_id in cut])

    def next_work_s(self, now: float) -> float | None:
        """While a synchronous stage waits for its stragglers (the scheduler has no job and
        none is queued): when, in seconds since the sweep started, its last running segment
        is expected to end (the fitted seconds per step times the trial's pace) and the next
        stage's jobs appear, for :class:`budgets.FollowPlan`. A segment already running past
        its expected end is expected to run ``OVERDUE_AGAIN`` of its age again
        (``OVERDUE_AGAIN_BUDGET`` in a sweep with a cost budget): counting such a straggler as
        ending now held the next stage's workers idle behind it
        (docs/benchmarks/tuning-log.md#overdue-again). None when that is not the case or not
        known (a segment not started yet, nothing fitted)."""
        again = OVERDUE_AGAIN_BUDGET if self.cuts_stages else OVERDUE_AGAIN
        waiting = self._stage_wait(now, overdue_again=again)
        return max(waiting[0]) if waiting else None

    def _stage_wait(self, now: float, overdue_again: float = 0.0
                    ) -> tuple[list[float], float] | None:
        """While a synchronous stage waits for its stragglers: when each segment it waits
        for is expected to end (seconds since the sweep started; for one running past
        that, now plus ``overdue_again`` times its age), and the fitted seconds
        per step. None when that is not the case or not known."""
        if (not isinstance(self.scaling, FollowPlan) or not self.state.starved or self.state.queued
                or self.scheduler.staged is None or not self.state.running):
            return None
        segments = self.timings.segment_times
        if self._work_fit[0] != len(segments):  # refitted as segments end
            self._work_fit = (len(segments), self.fit(segments))
        fit = self._work_fit[1]
        if fit is None:
            return None
        rate, first = fit
        ends = []
        for run in self.state.running.values():
            seg = run.segment
            if seg.trial_id in self.state.cut:
                continue
            if run.started_at is None:
                return None
            pace = self.timings.paces.pace(seg.trial_id, s_per_step=rate) or 1.0
            expected = self.steps_weight(seg.start_step, seg.stop_step) * rate * pace \
                + (first if seg.start_step == 0 else 0.0)
            end = run.started_at + expected
            if now > end:
                end = now + overdue_again * (now - run.started_at)
            ends.append(end - self.state.started_at)
        return (ends, rate) if ends else None

    def spot_now(self, now: float) -> bool:
        """The market of an instance launched now: the sweep's, or its spot policy's (asked
        with what the current plan predicts the rest of the job needs)."""
        policy = self.spec.spot_policy
        if policy is None or self.scaling is None:
            # No policy; or a fixed cluster, which nothing re-buys on another market.
            return self.spec.spot
        rungs = self.scheduler.rungs or [0]
        # The stage being handed out (synchronous SHA knows it before a segment of it starts).
        stage = max(self.state.stage, self.scheduler.stage)
        elapsed = now - self.state.started_at
        plan = self.plan
        remaining: float | None = None
        restart = boot = 0.0
        last_start: float | None = None
        if isinstance(plan, Plan):
            if plan is not self._lost_since:
                # A new plan counts what is left as it is now.
                self._lost_since, self.state.lost_work_s = plan, 0.0
            if self.timings.observations == 0 and plan.feasible:
                self._prior_plan = plan
            remaining = max(0.0, plan.predicted_wall_s - elapsed) if plan.feasible else math.inf
            prior = self._prior_plan
            refused = now - self.cluster.launcher.spot_refused_at <= SPOT_SHORT_S
            if prior is not None and self.timings.fresh_only and not refused:
                # Only first segments measured: they cannot tell a first step's extra cost
                # from the steps' (Replanner), so the net keeps the profile's prediction
                # until a later segment tells them apart; a first segment lost to a
                # preemption costs one restart, which the net keeps room for.
                remaining = min(remaining, max(0.0, prior.predicted_wall_s - elapsed))
            # Work lost since (preempted segments) runs again: the rest is that much longer.
            remaining += self.state.lost_work_s
            boot = restart = float(plan.inputs.get("boot_s") or 0.0)
            last = next((r for r in plan.rungs if r.rung == len(rungs) - 1), None)
            last_start = None if last is None else last.start_s
            rung = next((r for r in plan.rungs if r.rung == stage), None)
            if rung is not None and rung.workers > 0:
                per = max(1, self.cluster.provider.slots(self.spec.instance_type)
                          // max(1, self.spec.gpus_per_trial))
                waves = -(-rung.trials // (rung.workers * per))
                restart += max(0.0, rung.end_s - rung.start_s) / max(1, waves)
        state = self.state
        deadline = None if math.isinf(state.deadline) else state.deadline - state.started_at
        # No spot anywhere lately: a spot launch failed within the launcher's longest wait.
        short = now - self.cluster.launcher.spot_refused_at <= SPOT_SHORT_S
        spot = policy.spot(stage=stage, last_stage=len(rungs) - 1, elapsed_s=elapsed,
                           deadline_s=deadline, remaining_s=remaining, restart_s=restart,
                           last_start_s=last_start, boot_s=boot, spot_short=short)
        provider = self.cluster.provider
        if spot and isinstance(provider, ZonedSpot) and len(provider.zones) > 1:
            self._order_zones(policy, provider, now, final=stage >= len(rungs) - 1)
        return spot

    def _order_zones(self, policy: SpotPolicy, provider: ZonedSpot, now: float, *,
                     final: bool) -> None:
        """Have the provider walk its zones in the policy's order, given where this sweep's
        spot VMs were taken back."""
        taken: dict[str, list[float]] = {}
        for inst in self.cluster.instances.values():
            if inst.preempted and inst.zone:
                end = inst.terminated_at if inst.terminated_at is not None else now
                taken.setdefault(inst.zone, []).append(end - self.state.started_at)
        itype = self.spec.instance_type
        prices = {z: provider.spot_price_in(z, itype) for z in provider.zones}
        provider.prefer_zones(policy.zone_order(
            prices, taken, now - self.state.started_at, final=final,
            on_demand=provider.price_per_hour(itype, False)))

    def replan(self, now: float) -> None:
        """Ask the re-planner for a new plan at a rung boundary, or when the observed seconds
        per step have drifted more than ``DRIFT`` from what the plan assumed (once per new
        observation), and follow it. A sweep whose shape the planner chose (the re-planner
        has the cost budget) is also re-planned once per synchronous stage when all of the
        stage's jobs have been handed out: the last moment the stage's promotions can still
        change, with most of its costs seen."""
        assert self.replanner is not None
        seen = self.timings.observations
        closing = self._closing_stage()
        if closing:
            self.closing = self.state.stage
        new_info = seen > self.replanned[1] or self.state.stage > self.replanned[0] or closing
        # Between segment ends, the ones still running are looked at now and then.
        recheck = (not new_info and bool(self.timings.segment_times) and bool(self.state.running)
                   and now - self._overdue_checked >= OVERDUE_CHECK_TICKS * self.settings.tick_s)
        if not (new_info or recheck):
            return
        if recheck:
            self._overdue_checked = now
        fit = self.fit(self.timings.segment_times)
        late = self._overdue(now, *fit) if fit is not None else []
        if late:
            # Segments still running past what the fit predicts: the first to end are a
            # wave's quickest, and a fit on them alone is low (survivorship). Each counts as
            # ending now, a lower bound on its time.
            fit = self.fit([*self.timings.segment_times, *late]) or fit
        elif recheck:
            return
        mean = fit[0] if fit is not None else None
        plan = self.plan
        assumed = plan.inputs.get("s_per_step") if isinstance(plan, Plan) else None
        drifted = (mean is not None and bool(assumed) and (seen > self.replanned[1] or recheck)
                   and abs(mean / assumed - 1.0) > DRIFT)
        if self.state.stage <= self.replanned[0] and not drifted and not closing:
            return
        live = len(self.cluster.live())
        if (self.state.stage <= self.replanned[0] and not closing and mean is not None and assumed
                and mean < assumed and self.timings.done_at(self.state.stage) < live):
            # Quicker than planned, but within a stage whose first wave has not ended: the
            # first segments to end are its quickest (survivorship), so no fewer instances
            # on their word yet.
            return
        self.replanned = (self.state.stage, seen)
        new = self.replanner(ReplanView(
            now=now, elapsed_s=now - self.state.started_at, stage=self.state.stage, live=live,
            observed_s_per_step=mean, observations=seen, spent_usd=self.ledger.spent(now),
            observed_first_s=fit[1] if fit is not None else None,
            stage_done=self.timings.done_at(self.state.stage),
            started=len(self.state.trials) - self.state.bracket_first,
            fresh_only=self.timings.fresh_only,
            resumed=self.timings.resumed_segments, stage_sizes=self._stage_sizes(),
            **self._member_paces(mean)))
        self.keep_calibration()
        if new is None:
            return
        self._limit_promotions(new)
        limit = self.state.admit_limit if self.state.admit_limit is not None else \
            plan.num_trials if isinstance(plan, Plan) else None
        if limit is not None and new.num_trials != limit and not self.state.admission_closed:
            # The re-planner shrank the job (a budget it no longer fits): admit no more; or,
            # with admission still open, gave some of a cut back.
            self.state.admit_limit = max(1, new.num_trials)
            self.scheduler.limit_admission(self.state.admit_limit)
        self._follow(new, now)

    def next_bracket(self, now: float) -> bool:
        """The bracket has finished (nothing runs, no job is left) before the deadline: start
        another one if the re-planner finds time and budget for it (``more_brackets``: a sweep
        whose number of trials the planner chose), journaled so a resumed sweep replays it.
        The scheduler's ``new_bracket`` starts it (ASHA, which has no brackets, admits that
        many more trials into its rungs). Returns whether one was started."""
        if not (self.more_brackets and self.scheduler.bracketed is not None
                and self.replanner is not None and now < self.state.deadline):
            return False
        fit = self.fit(self.timings.segment_times)
        live = len(self.cluster.live())
        plan = self.replanner.next_bracket(ReplanView(
            now=now, elapsed_s=now - self.state.started_at, stage=0, live=live,
            observed_s_per_step=fit[0] if fit is not None else None,
            observations=self.timings.observations, spent_usd=self.ledger.spent(now),
            observed_first_s=fit[1] if fit is not None else None, stage_done=0, started=0,
            fresh_only=self.timings.fresh_only),
            len(self.state.trials))
        if plan is None:
            return False
        log.info("%d more trials with the time and budget left", plan.num_trials)
        self.scheduler.new_bracket(plan.num_trials)
        self.keep_calibration()
        self.state.bracket_first = len(self.state.trials)
        self.state.stage, self.closing = 0, -1
        self.timings.new_bracket()
        self.replanned = (0, self.timings.observations)
        self.state.admit_limit, self.state.admission_closed = None, False
        self.state.starved = False
        self._follow(plan, now)
        return True

    @property
    def first_rung_steps(self) -> int:
        """The steps of a new trial's first segment (to the first rung)."""
        rungs = self.scheduler.rungs
        return rungs[0] if rungs else 1

    def admit_idle(self, now: float, first_rung_s: float) -> bool:
        """A trial slot is free and the scheduler has no job for it (every trial it admitted
        has started, no promotion is due): in a sweep whose number of trials the planner chose
        (``fill_idle``) under asynchronous halving on a fixed cluster, admit one more trial
        (journaled, so a resumed sweep replays it) when the spend committed with every live
        instance kept until that trial's first rung ends (``first_rung_s`` from now, what
        dispatch reserves for it) fits the cost budget and that end comes before the deadline;
        no more than ``max_trials`` in all (a finite space). Without a cost budget, with
        admission closed or limited by a re-plan, none. A fixed cluster's idle workers are
        billed anyway, so a trial admitted while others still run costs nothing extra; one
        that outlasts them costs its own seconds, which the check counts. A cluster that
        follows a scaling policy lets idle workers go, and its re-planner plans a larger next
        bracket once the sweep ends (:meth:`next_bracket`), which did better there. Returns
        whether one was admitted (docs/concepts/schedulers.md, "A count the planner
        chose")."""
        state, scheduler = self.state, self.scheduler
        budget = self.ledger.budget_usd
        if (not self.fill_idle or self.scaling is not None or scheduler.admitting is None
                or budget is None or state.admission_closed or state.admit_limit is not None):
            return False
        started = len(state.trials)
        if started < scheduler.total_trials or (self.max_trials is not None
                                                and started >= self.max_trials):
            return False
        end = now + first_rung_s
        if end > state.deadline:
            return False
        if self.ledger.committed(now, dict.fromkeys(self.cluster.live(), end)) > budget:
            return False
        log.debug("a worker is free and the budgets allow: one more trial")
        scheduler.admit_more(1)
        return True

    def _follow(self, plan: Plan, now: float) -> None:
        """Scale to ``plan`` from now on (stored with the others)."""
        if isinstance(self.scaling, FollowPlan):
            self.scaling.plan = plan
        else:
            self.scaling = FollowPlan(plan)
        self.store.add_plan(now, plan.to_json())

    def keep_calibration(self) -> None:
        """Store what the re-planner has learnt of the stages' timing (when it changed), so a
        resumed sweep's re-planner takes it up (see ``Controller.restore``)."""
        if self.replanner is None:
            return
        text = json.dumps(self.replanner.calibration(), sort_keys=True)
        if text != self.calibration_kept:
            self.store.set_meta(CALIBRATION_KEY, text)
            self.calibration_kept = text

    def _closing_stage(self) -> bool:
        """Whether the current stage is to be re-planned now as it closes (see
        :meth:`replan`): a cost budget, a synchronous stage before the last whose jobs have
        all been handed out, and not done yet for this stage."""
        staged = self.scheduler.staged
        if not self.cuts_stages or staged is None:
            return False
        stage = staged.stage
        return (stage == self.state.stage and self.closing < stage < len(staged.rungs) - 1
                and bool(self.state.running) and staged.handed_out())

    def _stage_sizes(self) -> tuple[int, ...]:
        """Trials per stage for :class:`budgets.ReplanView`: as decided up to the current
        stage, as successive halving sizes them after it (the re-planner's cuts are its own
        to make again); empty for a scheduler without stages."""
        staged = self.scheduler.staged
        if staged is None:
            return ()
        stage = staged.stage
        return tuple(staged.sizes[:stage + 1]) + tuple(staged.natural_sizes[stage + 1:])

    def _limit_promotions(self, plan: Plan) -> None:
        """Promote into the next stage as many trials as ``plan`` runs in it (a re-plan that
        cuts promotions to stay within the cost budget, gives a cut back, or promotes more
        than ``1/eta`` with budget to spare), journaled so a resumed sweep keeps it."""
        staged = self.scheduler.staged
        if staged is None:
            return
        rung = next((r for r in plan.rungs if r.rung == staged.stage + 1), None)
        if rung is not None:
            self.scheduler.resize_stage(rung.rung, rung.trials)

    def fit(self, segments: list[tuple[float, float, bool]]) -> tuple[float, float] | None:
        """:func:`budgets.fit_segment_times`; with a profile that has step costs, a trial's
        dearer first steps are in them, so every second is fitted as (weighted) steps."""
        costs = self.replanner.profile.step_costs if self.replanner is not None else ()
        return fit_segment_times(segments, min_resumed=math.inf if costs else MIN_RESUMED)

    def steps_weight(self, start: int, stop: int) -> float:
        """Steps ``start + 1 .. stop`` at what the re-planner's profile says they cost
        relative to a later step (:meth:`budgets.Profile.step_weight`); without such a
        profile, their number."""
        if self.replanner is None:
            return float(stop - start)
        return float(self.replanner.profile.step_weight(start, stop))

    def _overdue(self, now: float, s_per_step: float, first_s: float = 0.0
                 ) -> list[tuple[float, float, bool]]:
        """Running segments that have taken longer than ``s_per_step`` (and ``first_s`` more
        for a trial's first segment) predicts, as (steps, seconds so far, fresh) for
        :func:`budgets.fit_segment_times`."""
        out = []
        for run in self.state.running.values():
            seg = run.segment
            if run.started_at is None or seg.stop_step <= seg.start_step \
                    or seg.trial_id in self.state.cut:
                continue  # (a straggler cut from its stage is no measure of the rest)
            steps = self.steps_weight(seg.start_step, seg.stop_step)
            elapsed = now - run.started_at
            fresh = seg.start_step == 0
            if elapsed > steps * s_per_step + (first_s if fresh else 0.0):
                out.append((steps, elapsed, fresh))
        return out

    def _member_paces(self, s_per_step: float | None) -> dict[str, tuple]:
        """The current stage's trials, ranked, with their paces and whether they still train
        in it (for :class:`budgets.ReplanView`); empty for a scheduler without stages."""
        staged = self.scheduler.staged
        if staged is None or not s_per_step:
            return {}
        rungs = staged.rungs
        stage = min(self.state.stage, len(rungs) - 1)
        at, to = rungs[max(0, stage - 1)], rungs[stage]
        sign = 1.0 if self.spec.mode == "max" else -1.0

        def rank(trial_id: str) -> float:  # best first; not measured yet: last
            trial = self.state.trials[trial_id]
            value = trial.value_at(at) if trial.step >= at else None
            ok = value is not None and math.isfinite(value)
            return -sign * value if ok else math.inf

        ranked = sorted((t for t in staged.members() if t in self.state.trials), key=rank)
        return {"paces": tuple(self.timings.paces.pace(t, s_per_step=s_per_step) for t in ranked),
                "pending": tuple(self.state.trials[t].step < to for t in ranked)}

