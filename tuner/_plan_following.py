"""The controller's part of planning: re-plan the rest of the sweep as timings arrive
(at rung boundaries, and when the observed seconds per step drift from the plan's, running
segments included), hand the re-planner each trial's pace, tell the scaling policy when a
synchronous stage's stragglers are expected to end, decide such a stage without them near the
deadline (a sweep whose shape the planner chose), and pick the market of each new instance
with the spot policy. The decisions are :class:`budgets.Replanner`'s,
:class:`budgets.FollowPlan`'s and :class:`budgets.SpotPolicy`'s; this mixin gathers what they
need from the controller (a :class:`tuner._controller.Controller` is the only class that mixes
it in).
"""

from __future__ import annotations

import json
import logging
import math
from typing import TYPE_CHECKING, Any

from budgets import MIN_RESUMED, FollowPlan, Plan, ReplanView, fit_segment_times
from records import InstanceState
from tuner.schedulers import SuccessiveHalving

if TYPE_CHECKING:
    from tuner._timings import Timings

log = logging.getLogger("tuner._controller")

# Between segment ends, how often (in ticks) running segments are checked against the fit.
OVERDUE_CHECK_TICKS = 20
# A re-plan when the fitted seconds per step differ from the plan's by more than this share
# (0.10 was tried: deadlines met 0.944 against 0.969 in the planner benchmark).
DRIFT = 0.25
# While a stage waits for a segment running past its expected end, that segment is expected
# to run this share of its age again (a long-tailed duration: the longer it has run, the
# longer it will), when deciding whether the next stage's workers may go meanwhile. Planner
# benchmark, median cost vs Static-min at 1.25x / 1.5x / 3x / 6x, worst case, vs the lower
# bound, deadlines met: ending now (before) 0.675 / 0.865 / 1.019 / 1.011, 1.697, 1.281,
# 0.981; 0.5: 0.674 / 0.856 / 1.019 / 1.011, 1.671, 1.261, 0.981; 1: deadlines met 0.944
# (the next stage waits for boots). As much again as the overrun (not the age): 1.671 at
# worst, but 0.685 at 1.25x.
OVERDUE_AGAIN = 0.5
# A sweep with a cost budget (the planner chose its shape) counts twice its age again: there
# an idle worker spends the budget that buys trials and promotions (on LCBench 167152, seed
# 2, at 1.25x and 1.5x the budget, 81 instances waited six minutes for the first stage's
# slowest first epochs, and the budget ran out in the second stage). Planner benchmark,
# accuracy (0.5 before): 1: 0.771, 2: 0.779, 4: 0.773; for a cost-minimising sweep, 1 already
# cost deadlines (0.956 met, see above).
OVERDUE_AGAIN_BUDGET = 2.0
# The store's meta key of the re-planner's calibration (``Replanner.calibration``).
CALIBRATION_KEY = "replanner_calibration"


class PlanningMixin:
    """Methods of the controller that follow and re-make the plan."""

    # Provided by the controller.
    spec: Any
    scheduler: Any
    scaling: Any
    replanner: Any
    settings: Any
    store: Any
    ledger: Any
    provider: Any
    instances: dict[str, Any]
    running: dict[str, Any]
    trials: dict[str, Any]
    _stage: int
    timings: Timings
    _started_at: float
    _deadline: float
    _replanned: tuple[int, int]
    _closing: int
    _overdue_checked: float
    _admission_closed: bool
    _admit_limit: int | None
    _starved: bool
    _queued: bool
    _work_fit: tuple[int, tuple[float, float] | None]
    _cut: set[str]
    _bracket_first: int
    _calibration_kept: str | None
    more_brackets: bool
    executor: Any

    def _cut_stragglers(self, now: float) -> None:
        """HyperSched's admission control near the deadline, for a sweep whose shape the
        planner chose (the most accurate within both budgets; the re-planner has the cost
        budget): from the second stage on, when every segment a synchronous stage still waits
        for is expected to end too late for the stages after it (their steps at the fitted
        rate, one trial each: the least they need), the stage is decided with the trials that
        have reached its rung (enough to fill the next stage), and the others are pruned and
        stopped. A sweep of a given shape runs it as given."""
        if getattr(self.replanner, "cost_budget_usd", None) is None or math.isinf(self._deadline):
            return
        stragglers = getattr(self.scheduler, "stragglers", None)
        if not callable(stragglers) or self.scheduler.stage == 0:
            # (In the first stage the rates are first segments only, often dearer than the
            # steps to come; the re-planner shrinks the job there instead.)
            return
        waiting = self._stage_wait(now)
        if waiting is None:
            return
        ends, rate = waiting
        # The least the stages after need: their steps at the fitted rate, one trial each.
        rungs = self.scheduler.rungs
        after = rate * (rungs[-1] - rungs[self.scheduler.stage])
        if min(ends) + after <= self._deadline - self._started_at:
            return
        cut = stragglers()
        if not cut:
            return
        log.info("stage %d decided without its stragglers: %s", self.scheduler.stage,
                 ", ".join(cut))
        self.store.journal_add("decide", "*")
        cut = self.scheduler.decide_stage()
        self._cut.update(cut)
        # The next stage's jobs are ready: the scaling policy holds its workers (the idle
        # ones stay), and it is planned afresh at the next tick.
        self._starved = False
        self._stage = max(self._stage, self.scheduler.stage)
        self._replanned = (-1, -1)
        self.executor.request_stop([sid for sid, run in self.running.items()
                                    if run.segment.trial_id in cut])

    def _next_work_s(self, now: float) -> float | None:
        """While a synchronous stage waits for its stragglers (the scheduler has no job and
        none is queued): when, in seconds since the sweep started, its last running segment
        is expected to end (the fitted seconds per step times the trial's pace) and the next
        stage's jobs appear, for :class:`budgets.FollowPlan`. A segment already running past
        its expected end is expected to run ``OVERDUE_AGAIN`` of its age again
        (``OVERDUE_AGAIN_BUDGET`` in a sweep with a cost budget; first
        segments have no pace of their own, and trials differ tenfold in step cost on some
        curve sets: counting such a straggler as ending now held the next stage's workers
        idle behind it for many minutes). (0.8 of the expected time was tried: the
        stragglers that matter run past it, and nothing changed in the planner benchmark.)
        None when that is not the case or not known (a segment not started yet, nothing
        fitted)."""
        budgeted = getattr(self.replanner, "cost_budget_usd", None) is not None
        again = OVERDUE_AGAIN_BUDGET if budgeted else OVERDUE_AGAIN
        waiting = self._stage_wait(now, overdue_again=again)
        return max(waiting[0]) if waiting else None

    def _stage_wait(self, now: float, overdue_again: float = 0.0
                    ) -> tuple[list[float], float] | None:
        """While a synchronous stage waits for its stragglers: when each segment it waits
        for is expected to end (seconds since the sweep started; for one running past
        that, now plus ``overdue_again`` times its age), and the fitted seconds
        per step. None when that is not the case or not known."""
        if (not isinstance(self.scaling, FollowPlan) or not self._starved or self._queued
                or type(self.scheduler) is not SuccessiveHalving or not self.running):
            return None
        segments = self.timings.segment_times
        if self._work_fit[0] != len(segments):  # refitted as segments end
            self._work_fit = (len(segments), self._fit(segments))
        fit = self._work_fit[1]
        if fit is None:
            return None
        rate, first = fit
        ends = []
        for run in self.running.values():
            seg = run.segment
            if seg.trial_id in self._cut:
                continue
            if run.started_at is None:
                return None
            pace = self.timings.paces.pace(seg.trial_id, s_per_step=rate) or 1.0
            expected = self._steps_weight(seg.start_step, seg.stop_step) * rate * pace \
                + (first if seg.start_step == 0 else 0.0)
            end = run.started_at + expected
            if now > end:
                end = now + overdue_again * (now - run.started_at)
            ends.append(end - self._started_at)
        return (ends, rate) if ends else None

    def _spot_now(self, now: float) -> bool:
        """The market of an instance launched now: the sweep's, or its spot policy's (asked
        with what the current plan predicts the rest of the job needs)."""
        policy = self.spec.spot_policy
        if policy is None or self.scaling is None:
            # No policy; or a fixed cluster, which nothing re-buys on another market.
            return self.spec.spot
        rungs = getattr(self.scheduler, "rungs", None) or [0]
        # The stage being handed out (synchronous SHA knows it before a segment of it starts).
        stage = max(self._stage, int(getattr(self.scheduler, "stage", 0)))
        elapsed = now - self._started_at
        plan = getattr(self.scaling, "plan", None)
        remaining: float | None = None
        restart = boot = 0.0
        last_start: float | None = None
        if isinstance(plan, Plan):
            remaining = max(0.0, plan.predicted_wall_s - elapsed) if plan.feasible else math.inf
            boot = restart = float(plan.inputs.get("boot_s") or 0.0)
            last = next((r for r in plan.rungs if r.rung == len(rungs) - 1), None)
            last_start = None if last is None else last.start_s
            rung = next((r for r in plan.rungs if r.rung == stage), None)
            if rung is not None and rung.workers > 0:
                per = max(1, self.provider.slots(self.spec.instance_type)
                          // max(1, self.spec.gpus_per_trial))
                waves = -(-rung.trials // (rung.workers * per))
                restart += max(0.0, rung.end_s - rung.start_s) / max(1, waves)
        deadline = None if math.isinf(self._deadline) else self._deadline - self._started_at
        return policy.spot(stage=stage, last_stage=len(rungs) - 1, elapsed_s=elapsed,
                           deadline_s=deadline, remaining_s=remaining, restart_s=restart,
                           last_start_s=last_start, boot_s=boot)

    def _replan(self, now: float) -> None:
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
            self._closing = self._stage
        new_info = seen > self._replanned[1] or self._stage > self._replanned[0] or closing
        # Between segment ends, the ones still running are looked at now and then.
        recheck = (not new_info and bool(self.timings.segment_times) and bool(self.running)
                   and now - self._overdue_checked >= OVERDUE_CHECK_TICKS * self.settings.tick_s)
        if not (new_info or recheck):
            return
        if recheck:
            self._overdue_checked = now
        fit = self._fit(self.timings.segment_times)
        late = self._overdue(now, *fit) if fit is not None else []
        if late:
            # Segments still running past what the fit predicts: the first to end are a
            # wave's quickest, and a fit on them alone is low (survivorship). Each counts as
            # ending now, a lower bound on its time.
            fit = self._fit([*self.timings.segment_times, *late]) or fit
        elif recheck:
            return
        mean = fit[0] if fit is not None else None
        plan = getattr(self.scaling, "plan", None)
        assumed = plan.inputs.get("s_per_step") if isinstance(plan, Plan) else None
        drifted = (mean is not None and bool(assumed) and (seen > self._replanned[1] or recheck)
                   and abs(mean / assumed - 1.0) > DRIFT)
        if self._stage <= self._replanned[0] and not drifted and not closing:
            return
        live = sum(inst.state != InstanceState.TERMINATED for inst in self.instances.values())
        if (self._stage <= self._replanned[0] and not closing and mean is not None and assumed
                and mean < assumed and self.timings.done_at(self._stage) < live):
            # Quicker than planned, but within a stage whose first wave has not ended: the
            # first segments to end are its quickest (survivorship), so no fewer instances
            # on their word yet.
            return
        self._replanned = (self._stage, seen)
        new = self.replanner(ReplanView(
            now=now, elapsed_s=now - self._started_at, stage=self._stage, live=live,
            observed_s_per_step=mean, observations=seen, spent_usd=self.ledger.spent(now),
            observed_first_s=fit[1] if fit is not None else None,
            stage_done=self.timings.done_at(self._stage),
            started=len(self.trials) - self._bracket_first,
            fresh_only=self.timings.fresh_only,
            resumed=self.timings.resumed_segments, stage_sizes=self._stage_sizes(),
            **self._member_paces(mean)))
        self._keep_calibration()
        if new is None:
            return
        self._limit_promotions(new)
        limit = self._admit_limit if self._admit_limit is not None else \
            plan.num_trials if isinstance(plan, Plan) else None
        if limit is not None and new.num_trials != limit and not self._admission_closed:
            # The re-planner shrank the job (a budget it no longer fits): admit no more; or,
            # with admission still open, gave some of a cut back.
            self._admit_limit = max(1, new.num_trials)
            self.store.journal_add("limit", "*", self._admit_limit)
        if isinstance(self.scaling, FollowPlan):
            self.scaling.plan = new
        else:
            self.scaling = FollowPlan(new)
        self.store.add_plan(now, new.to_json())

    def _next_bracket(self, now: float) -> bool:
        """The bracket has finished (nothing runs, no job is left) before the deadline: start
        another one if the re-planner finds time and budget for it (``more_brackets``: a sweep
        whose number of trials the planner chose), journaled so a resumed sweep replays it.
        The scheduler's ``new_bracket`` starts it (ASHA, which has no brackets, admits that
        many more trials into its rungs). Returns whether one was started."""
        start = getattr(self.scheduler, "new_bracket", None)
        plan_next = getattr(self.replanner, "next_bracket", None)
        if not (self.more_brackets and callable(start) and callable(plan_next)
                and now < self._deadline):
            return False
        fit = self._fit(self.timings.segment_times)
        live = sum(inst.state != InstanceState.TERMINATED for inst in self.instances.values())
        plan = plan_next(ReplanView(
            now=now, elapsed_s=now - self._started_at, stage=0, live=live,
            observed_s_per_step=fit[0] if fit is not None else None,
            observations=self.timings.observations, spent_usd=self.ledger.spent(now),
            observed_first_s=fit[1] if fit is not None else None, stage_done=0, started=0,
            fresh_only=self.timings.fresh_only),
            len(self.trials))
        if plan is None:
            return False
        log.info("%d more trials with the time and budget left", plan.num_trials)
        self.store.journal_add("bracket", "*", plan.num_trials)   # (before: write-ahead)
        self._keep_calibration()
        start(plan.num_trials)
        self._bracket_first = len(self.trials)
        self._stage, self._closing = 0, -1
        self.timings.new_bracket()
        self._replanned = (0, self.timings.observations)
        self._admit_limit, self._admission_closed = None, False
        self._starved = False
        if isinstance(self.scaling, FollowPlan):
            self.scaling.plan = plan
        else:
            self.scaling = FollowPlan(plan)
        self.store.add_plan(now, plan.to_json())
        return True

    def _keep_calibration(self) -> None:
        """Store what the re-planner has learnt of the stages' timing (when it changed), so a
        resumed sweep's re-planner takes it up (see ``Controller.restore``)."""
        calibration = getattr(self.replanner, "calibration", None)
        if not callable(calibration):
            return
        text = json.dumps(calibration(), sort_keys=True)
        if text != self._calibration_kept:
            self.store.set_meta(CALIBRATION_KEY, text)
            self._calibration_kept = text

    def _closing_stage(self) -> bool:
        """Whether the current stage is to be re-planned now as it closes (see
        :meth:`_replan`): a cost budget, a synchronous stage before the last whose jobs have
        all been handed out, and not done yet for this stage."""
        if (getattr(self.replanner, "cost_budget_usd", None) is None
                or type(self.scheduler) is not SuccessiveHalving):
            return False
        stage = self.scheduler.stage
        return (stage == self._stage and self._closing < stage < len(self.scheduler.rungs) - 1
                and bool(self.running) and self.scheduler.handed_out())

    def _stage_sizes(self) -> tuple[int, ...]:
        """Trials per stage for :class:`budgets.ReplanView`: as decided up to the current
        stage, as successive halving sizes them after it (the re-planner's cuts are its own
        to make again); empty for a scheduler without stages."""
        sizes = getattr(self.scheduler, "sizes", None)
        natural = getattr(self.scheduler, "natural_sizes", None)
        if sizes is None or natural is None:
            return ()
        stage = int(getattr(self.scheduler, "stage", 0))
        return tuple(sizes[:stage + 1]) + tuple(natural[stage + 1:])

    def _limit_promotions(self, plan: Plan) -> None:
        """Promote into the next stage as many trials as ``plan`` runs in it (a re-plan that
        cuts promotions to stay within the cost budget, gives a cut back, or promotes more
        than ``1/eta`` with budget to spare), journaled so a resumed sweep keeps it."""
        limit = getattr(self.scheduler, "limit_stage", None)
        widen = getattr(self.scheduler, "widen_stage", None)
        sizes = getattr(self.scheduler, "sizes", None)
        if not callable(limit) or sizes is None:
            return
        stage = int(getattr(self.scheduler, "stage", 0))
        rung = next((r for r in plan.rungs if r.rung == stage + 1), None)
        if rung is None:
            return
        before = list(sizes)
        more = callable(widen) and rung.trials > self.scheduler.natural_sizes[rung.rung]
        (widen if more else limit)(rung.rung, rung.trials)
        if self.scheduler.sizes != before:
            self.store.journal_add("widen" if more else "promote", "*", rung.trials,
                                   bracket=rung.rung)

    def _fit(self, segments: list[tuple[float, float, bool]]) -> tuple[float, float] | None:
        """:func:`budgets.fit_segment_times`; with a profile that has step costs, a trial's
        dearer first steps are in them, so every second is fitted as (weighted) steps."""
        costs = getattr(getattr(self.replanner, "profile", None), "step_costs", ())
        return fit_segment_times(segments, min_resumed=math.inf if costs else MIN_RESUMED)

    def _steps_weight(self, start: int, stop: int) -> float:
        """Steps ``start + 1 .. stop`` at what the re-planner's profile says they cost
        relative to a later step (:meth:`budgets.Profile.step_weight`); without such a
        profile, their number."""
        weigh = getattr(getattr(self.replanner, "profile", None), "step_weight", None)
        return float(weigh(start, stop)) if callable(weigh) else float(stop - start)

    def _overdue(self, now: float, s_per_step: float, first_s: float = 0.0
                 ) -> list[tuple[float, float, bool]]:
        """Running segments that have taken longer than ``s_per_step`` (and ``first_s`` more
        for a trial's first segment) predicts, as (steps, seconds so far, fresh) for
        :func:`budgets.fit_segment_times`."""
        out = []
        for run in self.running.values():
            seg = run.segment
            if run.started_at is None or seg.stop_step <= seg.start_step \
                    or seg.trial_id in self._cut:
                continue  # (a straggler cut from its stage is no measure of the rest)
            steps = self._steps_weight(seg.start_step, seg.stop_step)
            elapsed = now - run.started_at
            fresh = seg.start_step == 0
            if elapsed > steps * s_per_step + (first_s if fresh else 0.0):
                out.append((steps, elapsed, fresh))
        return out

    def _member_paces(self, s_per_step: float | None) -> dict[str, tuple]:
        """The current stage's trials, ranked, with their paces and whether they still train
        in it (for :class:`budgets.ReplanView`); empty for a scheduler without stages."""
        members = getattr(self.scheduler, "members", None)
        rungs = getattr(self.scheduler, "rungs", None)
        if not callable(members) or not rungs or not s_per_step:
            return {}
        stage = min(self._stage, len(rungs) - 1)
        at, to = rungs[max(0, stage - 1)], rungs[stage]
        sign = 1.0 if self.spec.mode == "max" else -1.0

        def rank(trial_id: str) -> float:  # best first; not measured yet: last
            trial = self.trials[trial_id]
            value = self._value_at(trial, at) if trial.step >= at else None
            ok = value is not None and math.isfinite(value)
            return -sign * value if ok else math.inf

        ranked = sorted((t for t in members() if t in self.trials), key=rank)
        return {"paces": tuple(self.timings.paces.pace(t, s_per_step=s_per_step) for t in ranked),
                "pending": tuple(self.trials[t].step < to for t in ranked)}
