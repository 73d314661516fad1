"""Online re-planning: RubberBand plans once, from a profile; the step times a sweep really sees
often differ (the first epoch of a run is dearer, noise makes stragglers). A :class:`Replanner`
is handed to the controller, which calls it at every rung boundary and when the observed seconds
per step drift from what the current plan assumed; it plans the stages left with
:func:`plan_remaining` on what has been observed.

Example::

    >>> from budgets import BootLatency, InstanceType, JobShape, Profile, ReplanView
    >>> gpu = InstanceType("aws", "x1", "T4", 1, 4, 16, "us-east-1", 3.6)
    >>> rp = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60)), gpu,
    ...                deadline_s=200.0, billing_minimum_s=0)
    >>> [r.workers for r in rp.initial().rungs]      # 3 workers are the cheapest on time
    [3, 3, 1]
    >>> view = ReplanView(now=150.0, elapsed_s=150.0, stage=1, live=9,
    ...                   observed_s_per_step=30.0, observations=9, spent_usd=0.5)
    >>> plan = rp(view)          # 3x slower than the profile: the rest cannot be on time
    >>> plan.feasible, [r.rung for r in plan.rungs]
    (False, [1, 2])
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from budgets._job import JobShape
from budgets._pace import stage_paces
from budgets._plan import Plan
from budgets._planner import plan_remaining, trial_counts
from budgets._prices import InstanceType
from budgets._profile import MIN_RESUMED, Profile
from budgets._scaling import ReplanView

# First-stage plans boot at this quantile: stage 0 waits for the slowest of its boots;
# docs/benchmarks/tuning-log.md#first-stage-boot-quantile
FIRST_STAGE_BOOT_QUANTILE = 0.9
# The share of the time left each plan keeps free, since real waves end with their slowest
# segment; chosen on the planner benchmark: docs/benchmarks/tuning-log.md#default-margin
DEFAULT_MARGIN = 0.14
# A stage that ran later than this many times its plan counts as this (calibration);
# docs/benchmarks/tuning-log.md#max-late
MAX_LATE = 1.5
# Where between the prior's rate (0) and the one seen (1) a shape with a first cut of its own
# is judged while only first segments have been seen (the 1/eta shapes: 0.5), since its wider
# second stage costs more; chosen on the planner benchmark:
# docs/benchmarks/tuning-log.md#first-cut-weight
FIRST_CUT_WEIGHT = 0.75
# The share of its margin a sweep with a cost budget keeps free of the budget left when it
# judges whether it must promote fewer trials (on the cheapest plan for the rest); chosen on
# the planner benchmark: docs/benchmarks/tuning-log.md#cut-margin-share
CUT_MARGIN_SHARE = 0.5
# The share of the time left a later stage's plan at the middle rate keeps free (see
# _first_steps_hedge): less time is left there to make up for a rate too low;
# docs/benchmarks/tuning-log.md#first-steps-hedge
LATER_HEDGE_MARGIN = 0.4


class Replanning(Protocol):
    """What the controller asks of a re-planner (:class:`Replanner` is the one elastune has):
    a plan for the rest of the sweep from a view of it, and the few facts it keeps."""

    cost_budget_usd: float | None
    profile: Profile

    def __call__(self, view: ReplanView) -> Plan | None: ...

    def restrict(self, num_trials: int) -> None: ...

    def next_bracket(self, view: ReplanView, trials_so_far: int) -> Plan | None: ...

    def begin_bracket(self, num_trials: int) -> None: ...

    def calibration(self) -> dict[str, Any]: ...

    def recalibrate(self, calibration: Mapping[str, Any]) -> bool: ...


class Replanner:
    """Plans the rest of a synchronous-SHA sweep from what it has observed (pure: no clock, no
    I/O; the controller calls it at rung boundaries and on drift, and stores what it returns).

    Each call fits a fresh copy of ``profile`` to the observed seconds per step (a trial's
    dearer first segment apart, :func:`budgets.fit_segment_times`) and calls
    :func:`plan_remaining` from the current stage, with the live instances, the stage's trials
    already done and, where the view ranks them, the paces of the trials likely to be in each
    stage left (:func:`budgets.stage_paces`). Each plan keeps ``margin`` of the time left free
    (the model's waves end with their mean segment, the real ones with their slowest); plans
    made in the first stage take the boot latency at its 0.9 quantile (stage 0 needs its whole
    cluster up); a stage that ran later than its first plan has the stages left planned that
    much longer (up to 1.5x). While only a trial's first steps have been seen, a plan on their
    rate that is late, or on time only with the whole stage at once, gives way to the plan at
    the geometric middle of the prior's rate and the fitted one.

    With ``cost_budget_usd`` (a sweep whose number of trials the planner chose, SEER's
    problem) it also closes admission early, promotes fewer trials when even the cheapest
    plan for the rest passes the budget left, promotes more when the budget leaves room
    (:meth:`tuner.schedulers.SuccessiveHalving.limit_stage`, ``widen_stage``), and plans
    further brackets (:meth:`next_bracket`). Each plan returned carries in
    ``inputs["solve_s"]`` the seconds its whole call took.

    Keyword arguments (``gpus_per_trial``, ``max_workers``, ``straggler``, ...) are passed to
    :func:`plan_remaining`. Every rule in full: [docs/concepts/planner.md][inside-the-re-planner];
    how its constants were chosen: [docs/benchmarks/tuning-log.md][replanner-choices].
    """

    def __init__(self, shape: JobShape, profile: Profile, instance: InstanceType,
                 deadline_s: float | None, *, margin: float = DEFAULT_MARGIN,
                 cost_budget_usd: float | None = None, max_trials: int | None = None,
                 **planner_kwargs: Any) -> None:
        if not 0 <= margin < 1:
            raise ValueError(f"margin is {margin!r}, but must be 0 <= margin < 1")
        if cost_budget_usd is not None and not (isinstance(cost_budget_usd, int | float)
                                                and math.isfinite(cost_budget_usd)
                                                and cost_budget_usd > 0):
            raise ValueError(f"cost_budget_usd is {cost_budget_usd!r}, but must be None or "
                             "a finite number > 0")
        if max_trials is not None and (isinstance(max_trials, bool)
                                       or not isinstance(max_trials, int) or max_trials < 1):
            raise ValueError(f"max_trials is {max_trials!r}, but must be None or an int >= 1")
        self.cost_budget_usd = cost_budget_usd
        self.max_trials = max_trials
        self.bracket = 0     # brackets begun after the first (next_bracket, begin_bracket)
        self.shape = shape
        self._full = shape   # the shape before any cut of admission (it may be given back)
        self._first_trials = shape.num_trials   # the first bracket's, as planned
        self.profile = profile
        self.instance = instance
        self.deadline_s = deadline_s
        self.margin = margin
        self.kwargs = planner_kwargs
        # Calibration: per stage, (seconds into the sweep, predicted end) of its first plan;
        # and how much longer than predicted the slowest stage so far has run.
        self._stage_plans: dict[int, tuple[float, float]] = {}
        self._late = 1.0

    def restrict(self, num_trials: int) -> None:
        """Plan for no more than ``num_trials`` trials (a resumed sweep whose earlier run
        shrank the job): a later re-plan gives no trials back beyond them."""
        if not (isinstance(num_trials, int) and num_trials >= 1):
            raise ValueError(f"num_trials is {num_trials!r}, but must be an int >= 1")
        if num_trials < self.shape.num_trials:
            self.shape = replace(self.shape, num_trials=num_trials)
        if num_trials < self._full.num_trials:
            self._full = replace(self._full, num_trials=num_trials)

    def next_bracket(self, view: ReplanView, trials_so_far: int) -> Plan | None:
        """The sweep's bracket has finished before the deadline and within the budget: the
        plan of another bracket on the same rungs with the time and budget left, or None.

        Its number of trials is the most (at least ``reduction_factor``: one halving) whose
        plan from now (``view``: the live instances, the step times fitted over every segment
        so far, later steps included) ends on time with the margin kept and fits the budget
        left less the margin; no more than ``max_trials`` less ``trials_so_far`` (a finite
        space), nor than the first bracket was planned with (with all of both budgets: a
        larger one would rest on the fitted steps alone, which leave out what a segment costs
        around them, dispatch and start-up: [docs/benchmarks/tuning-log.md][later-brackets]).
        None without a cost budget (a sweep of a given shape runs it as given). The new
        bracket is then the one re-planned (:meth:`begin_bracket`)."""
        if self.cost_budget_usd is None:
            return None
        eta = self._full.reduction_factor
        cap = self._first_trials
        if self.max_trials is not None:
            cap = min(cap, self.max_trials - trials_so_far)
        counts = [n for n in trial_counts(eta, max(0, cap)) if n >= eta]
        if not counts:
            return None
        started = time.perf_counter()
        profile = self._fitted(view)
        at = dict(stage=0, elapsed_s=view.elapsed_s, live=view.live)

        def plan_of(n: int) -> Plan:
            shape = replace(self._full, num_trials=n)
            return self._plan(profile, shape=shape, sizes=shape.stage_sizes(), **at)

        lo, hi = -1, len(counts)   # counts[lo] fits (or lo = -1), counts[hi] does not
        while hi - lo > 1:         # (more trials never fit better)
            mid = (lo + hi) // 2
            if self._fits(plan_of(counts[mid]), view):
                lo = mid
            else:
                hi = mid
        if lo < 0:
            return None
        self.begin_bracket(counts[lo])
        plan = plan_of(counts[lo])
        self._remember(0, view.elapsed_s, plan)
        return _timed(plan, started)

    def begin_bracket(self, num_trials: int) -> None:
        """Re-plan a new bracket of ``num_trials`` trials from now on (the stages' calibration
        starts afresh; what the earlier brackets measured stays in the fit)."""
        if isinstance(num_trials, bool) or not isinstance(num_trials, int) or num_trials < 1:
            raise ValueError(f"num_trials is {num_trials!r}, but must be an int >= 1")
        self.shape = self._full = replace(self._full, num_trials=num_trials)
        self._stage_plans = {}
        self.bracket += 1

    def initial(self) -> Plan:
        """The plan to start with: nothing observed, nothing live."""
        started = time.perf_counter()
        plan = self._plan(self.profile, stage=0, elapsed_s=0.0, live=0)
        self._remember(0, 0.0, plan)
        return _timed(plan, started)

    def calibration(self) -> dict[str, Any]:
        """What the re-planner has learnt of the bracket under way, as JSON-able data: per
        stage, (seconds into the sweep, predicted end) of its first plan, and how much longer
        than planned the slowest stage so far ran. A resumed sweep gives it back to its new
        re-planner (:meth:`recalibrate`)."""
        return {"bracket": self.bracket, "late": self._late,
                "stages": {str(k): list(v) for k, v in self._stage_plans.items()}}

    def recalibrate(self, calibration: Mapping[str, Any]) -> bool:
        """Take up what :meth:`calibration` returned: the stages' first plans if it was taken
        in the bracket under way (:attr:`bracket`, counted by :meth:`begin_bracket`), and how
        late a stage ran in any case (it outlives brackets); returns whether the stages were
        taken. Raises ValueError on anything :meth:`calibration` does not return."""
        try:
            bracket = int(calibration["bracket"])
            stages = {int(k): (float(v[0]), float(v[1]))
                      for k, v in dict(calibration["stages"]).items()}
            late = float(calibration["late"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"calibration is {calibration!r}, not one calibration() "
                             "returned") from exc
        if not (1.0 <= late <= MAX_LATE) or any(
                k < 0 or not all(map(math.isfinite, v)) for k, v in stages.items()):
            raise ValueError(f"calibration is {calibration!r}, not one calibration() returned")
        self._late = max(self._late, late)
        if bracket != self.bracket:
            return False
        self._stage_plans = stages
        return True

    def _remember(self, stage: int, elapsed_s: float, plan: Plan | None) -> None:
        """Keep the first plan of each stage, to see how late the stage ends."""
        if plan is None or stage in self._stage_plans:
            return
        rung = next((r for r in plan.rungs if r.rung == stage), None)
        if rung is not None:
            self._stage_plans[stage] = (elapsed_s, rung.end_s)

    def _calibrate(self, view: ReplanView) -> None:
        """At a stage's first re-plan: how long the stage before took against its plan."""
        if view.stage in self._stage_plans:
            return
        before = self._stage_plans.get(view.stage - 1)
        if before is not None and before[1] > before[0]:
            took = (view.elapsed_s - before[0]) / (before[1] - before[0])
            self._late = min(MAX_LATE, max(self._late, took))

    def __call__(self, view: ReplanView) -> Plan | None:
        started = time.perf_counter()
        self._calibrate(view)
        plan = self._replan(view)
        self._remember(view.stage, view.elapsed_s, plan)
        return None if plan is None else _timed(plan, started)

    def _fitted(self, view: ReplanView) -> Profile:
        """A fresh copy of the profile fed what ``view`` has observed."""
        profile = replace(self.profile)  # a fresh copy: the prior, nothing observed
        gpus = self.kwargs.get("gpus_per_trial", 1)
        observed = view.observed_s_per_step
        if observed is not None and observed > 0 and view.fresh_only \
                and profile.first_segment_s > 0:
            # Only first segments seen, and the prior says they cost more than their steps:
            # the two cannot be told apart yet, so both are scaled by how far the first
            # segments are from the prior's (counting it all as steps would carry a first
            # epoch's cost into every later step).
            steps = profile.step_weight(0, self.shape.rungs()[0])
            prior = steps * profile.seconds_per_step(gpus) + profile.first_segment_s
            scale = observed * steps / prior
            profile = replace(profile, prior_s_per_step=profile.prior_s_per_step * scale,
                              first_segment_s=profile.first_segment_s * scale)
        elif observed is not None and observed > 0:
            profile.observe(steps=1, seconds=observed, gpus=gpus,
                            weight=max(1, view.observations))
        if view.observed_first_s is not None and view.observed_first_s > 0:
            # Seen: a trial's first segment costs this much more than its steps (on the GPUs
            # it ran on; the extra is not assumed to shrink with more of them).
            profile.first_segment_s = float(view.observed_first_s)
        return profile

    def _replan(self, view: ReplanView) -> Plan | None:
        profile = self._fitted(view)
        gpus = self.kwargs.get("gpus_per_trial", 1)
        stage = min(view.stage, len(self.shape.rungs()) - 1)
        sizes = self._sizes(view)
        paces = None
        if stage == view.stage and view.paces and len(view.pending) == len(view.paces):
            # Later stages' members are guessed from the ranking, their paces measured in
            # other stages: as unlike their stage's mean as promoted trials were in the
            # earlier run the profile comes from, where it says.
            spread = partial(self.profile.slowest_pace, promoted=True) \
                if self.profile.promoted_pace_quantiles else None
            paces = stage_paces(view.paces, view.pending, sizes[stage:], spread)
        done = max(0, view.stage_done) if stage == view.stage else 0
        at = dict(stage=stage, elapsed_s=view.elapsed_s, live=view.live, done=done)
        if self.cost_budget_usd is None and self._first_steps_only(view) \
                and profile.seconds_per_step(gpus) < self.profile.seconds_per_step(gpus):
            # First segments cheaper than the prior: the later steps are planned at the middle.
            return self._plan(self._hedged(profile, gpus), paces=paces, sizes=sizes, **at)
        plan = self._plan(profile, paces=paces, sizes=sizes, **at)
        if self.cost_budget_usd is None:
            if self._first_steps_only(view) and (not plan.feasible or self._all_at_once(plan)):
                return self._first_steps_hedge(view, profile, gpus, paces, sizes, at) or plan
            return plan
        # SEER's problem online. Until a segment of the second stage has ended, the steps to
        # come are not those seen (a trial's first epochs are often its dearest), so whether
        # the rest fits the budget is judged between the prior and what was seen; the plan
        # followed keeps what was seen (the deadline). Later stages have seen resumed segments
        # and are judged on them; the ledger keeps spend within the budget whatever the
        # judgement.
        first_seen = (view.stage == 0 or (view.stage == 1 and view.stage_done == 0)) \
            and self.bracket == 0
        judge = profile
        if first_seen:
            weight = 0.5 if self.shape.first_reduction is None else FIRST_CUT_WEIGHT
            judge = self._hedged(profile, gpus, weight)
        if view.stage == 0 and view.started < self.shape.num_trials:
            return self._admit(view, profile, judge, plan, at)
        # Whether the rest is affordable is judged on its cheapest plan: the plan followed
        # bills the instances the controller lets go behind a straggler
        # (docs/benchmarks/tuning-log.md#cheapest-plan-judgement). Lateness alone cuts
        # nothing here: fewer promotions would not buy the time back.
        if self._affordable(self._plan(judge, paces=paces, sizes=sizes, free=True, **at), view,
                            self.margin * CUT_MARGIN_SHARE):
            if self.bracket > 0:
                return plan
            return self._promote_more(view, profile, judge, sizes, paces, at) or plan
        return self._promote_fewer(view, profile, judge, sizes, paces, at) or plan

    def _first_steps_only(self, view: ReplanView) -> bool:
        """Whether the rate fitted so far is a first segment's (only first segments seen, or
        too few resumed ones for the fit to tell a first segment's extra apart), with a profile
        that does not know a run's first steps' cost (``step_costs``)."""
        if self.profile.step_costs:
            return False
        return view.fresh_only or (view.stage >= 1 and 0 < view.resumed < MIN_RESUMED)

    def _all_at_once(self, plan: Plan) -> bool:
        """Whether ``plan`` runs its first stage at its fastest: every trial at once, or on
        as many instances as it may rent (``max_workers``)."""
        if not plan.rungs:
            return False
        rung = plan.rungs[0]
        per = max(1, self.instance.gpus // max(1, rung.gpus_per_trial))
        cap = self.kwargs.get("max_workers")
        return rung.workers * per >= rung.trials or (cap is not None and rung.workers >= cap)

    def _first_steps_hedge(self, view: ReplanView, profile: Profile, gpus: int,
                           paces: list[tuple[float, float]] | None, sizes: list[int],
                           at: dict[str, Any]) -> Plan | None:
        """The rate fitted is a first segment's (:meth:`_first_steps_only`), and the plan on
        it is late, or on time only by running every trial of its first stage at once: the
        plan at the geometric middle of the prior's rate and the fitted one (the segments seen
        keep their cost), when it ends by the deadline with the margin kept (from the second
        stage on, ``LATER_HEDGE_MARGIN`` of the time left: less time is left to make up for a
        rate too low); else None.

        The first stage's own cost is known, the later steps' is not, and a run's first epoch
        is often its dearest: renting for the fastest plan on its rate buys speed for a case
        lost, or all but lost, on a rate that is not the later steps'. Where the first
        segments cost what the prior says, the middle is the fitted rate and nothing changes.
        Measured on the planner benchmark: docs/benchmarks/tuning-log.md#first-steps-hedge."""
        middle = self._hedged(profile, gpus)
        if middle is profile:
            return None
        margin = self.margin if view.stage == 0 else max(self.margin, LATER_HEDGE_MARGIN)
        plan = self._plan(middle, paces=paces, sizes=sizes, exact=False, margin=margin, **at)
        return plan if plan.feasible else None

    def _admit(self, view: ReplanView, profile: Profile, judge: Profile, plan: Plan,
               at: dict[str, Any]) -> Plan:
        """Admission is still open: the most trials, of the shape's and the counts below it
        (no fewer than those started), whose plan fits, judged with ``judge``; the controller
        closes admission at that count (until then a later re-plan may give some back). With
        none: ``plan`` when it is the deadline that cannot be kept; else the trials started
        are all there will be, and they promote fewer."""
        full, started = self._full, max(1, view.started)
        counts = sorted({n for n in trial_counts(full.reduction_factor, full.num_trials)
                         if n >= started} | {full.num_trials, started})
        counts = [n for n in counts if n <= full.num_trials]

        def at_count(n: int) -> tuple[JobShape, list[int], dict[str, Any]]:
            shape = replace(full, num_trials=n)
            return shape, self._sizes(view, shape), {**at, "done": min(at["done"], n - 1)}

        def fits(n: int) -> bool:
            shape, sizes, at_n = at_count(n)
            return self._fits(self._plan(judge, sizes=sizes, shape=shape, **at_n), view)

        lo, hi = -1, len(counts)   # counts[lo] fits (or lo = -1), counts[hi] does not
        while hi - lo > 1:         # (fewer trials never fit worse)
            mid = (lo + hi) // 2
            if fits(counts[mid]):
                lo = mid
            else:
                hi = mid
        if lo >= 0:
            self.shape, sizes, at_n = at_count(counts[lo])
            return self._plan(profile, sizes=sizes, **at_n)
        shape, sizes, at_n = at_count(counts[0])
        if self._affordable(self._plan(judge, sizes=sizes, shape=shape, **at_n), view):
            return plan   # late, not dear: the deadline's to keep, not the budget's
        self.shape = shape
        return self._promote_fewer(view, profile, judge, sizes, None, at_n) \
            or self._plan(profile, sizes=sizes, **at_n)

    def _promote_fewer(self, view: ReplanView, profile: Profile, judge: Profile,
                       sizes: list[int], paces: list[tuple[float, float]] | None,
                       at: dict[str, Any]) -> Plan | None:
        """The trials of the current stage are under way, and the rest costs more than the
        budget left: the plan that promotes the most trials into the next stage (``1/eta`` of
        those into each later one) whose cheapest plan (no deadline, ``judge``'s rate) fits
        the budget left; with none, the one that promotes a single trial (the best of the
        stage, trained to the last rung, is what a sweep is for). None when there is no
        later stage to cut. The plan returned is the one to follow (the deadline kept)."""
        stage = at["stage"]
        if stage + 1 >= len(sizes):
            return None
        eta = self.shape.reduction_factor

        def cut(p: int) -> list[int]:
            return [*sizes[:stage + 1],
                    *(max(1, p // eta ** j) for j in range(len(sizes) - stage - 1))]

        pick = 1
        lo, hi = 1, sizes[stage + 1] - 1    # promoting p fits for p <= lo? (bisection)
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._affordable(self._plan(judge, paces=paces, sizes=cut(mid), free=True, **at),
                                view, self.margin * CUT_MARGIN_SHARE):
                pick, lo = mid, mid + 1
            else:
                hi = mid - 1
        if pick >= sizes[stage + 1]:
            return None
        return self._plan(profile, paces=paces, sizes=cut(pick), **at)

    def _promote_more(self, view: ReplanView, profile: Profile, judge: Profile,
                      sizes: list[int], paces: list[tuple[float, float]] | None,
                      at: dict[str, Any]) -> Plan | None:
        """The rest fits the budget left with room to spare: the plan that promotes the most
        trials into the next stage (``1/eta`` of those into each later one, never fewer than
        ``sizes``), up to all of the current stage's, whose plan on time (``judge``'s rate,
        the margin kept) is feasible and fits the budget left. Synchronous halving prunes
        for good at each rung, so a trial ranked just below the cut (a late bloomer, which
        ASHA's promotions let through) is given its next rung with what admission left
        unspent. None when it promotes no more than ``sizes`` (or there is no later stage).
        The plan returned is the one to follow."""
        stage = at["stage"]
        if stage + 1 >= len(sizes) or view.stage != stage:
            return None
        eta = self.shape.reduction_factor

        def wider(p: int) -> list[int]:
            out = list(sizes[:stage + 1])
            for j, natural in enumerate(sizes[stage + 1:]):
                out.append(min(out[-1], max(natural, p // eta ** j)))
            return out

        natural, most = sizes[stage + 1], sizes[stage]
        pick = natural
        lo, hi = natural + 1, most   # promoting p fits for p <= lo? (bisection)
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._fits(self._plan(judge, paces=paces, sizes=wider(mid), **at), view):
                pick, lo = mid, mid + 1
            else:
                hi = mid - 1
        if pick <= natural:
            return None
        return self._plan(profile, paces=paces, sizes=wider(pick), **at)

    def _sizes(self, view: ReplanView, shape: JobShape | None = None) -> list[int]:
        """Trials per stage: the shape's, no more than the scheduler's (``view``); the
        stages the scheduler has decided after the first (``view.stage``), as it runs them
        (they may have promoted more than the shape's ``1/eta``)."""
        own = (shape or self.shape).stage_sizes()
        if len(view.stage_sizes) != len(own):
            return own
        return [int(b) if 0 < k <= view.stage else max(1, min(a, int(b)))
                for k, (a, b) in enumerate(zip(own, view.stage_sizes, strict=True))]

    def _hedged(self, profile: Profile, gpus: int, weight: float = 0.5) -> Profile:
        """``profile`` with its seconds per step at ``seen ** weight * prior ** (1 - weight)``
        (0.5: the geometric middle of the prior's and what it has learned; segments seen keep
        their cost: their extra goes to the first segment); ``profile`` itself when the two
        agree."""
        seen, prior = profile.seconds_per_step(gpus), self.profile.seconds_per_step(gpus)
        if abs(seen / prior - 1.0) < 1e-9:
            return profile
        middle = seen ** weight * prior ** (1.0 - weight)
        steps = profile.step_weight(0, self.shape.rungs()[0])
        first = max(0.0, profile.first_segment_s + steps * (seen - middle))
        return replace(self.profile, prior_s_per_step=middle * profile.speedup(gpus),
                       first_segment_s=first)

    def _fits(self, plan: Plan, view: ReplanView) -> bool:
        """Feasible, and its predicted cost within the budget left, less the margin."""
        return plan.feasible and self._affordable(plan, view)

    def _affordable(self, plan: Plan, view: ReplanView, margin: float | None = None) -> bool:
        """Its predicted cost within the budget left, less ``margin`` of it (None: the
        re-planner's own)."""
        assert self.cost_budget_usd is not None
        margin = self.margin if margin is None else margin
        left = (self.cost_budget_usd - view.spent_usd) * (1.0 - margin)
        return plan.predicted_cost_usd <= left

    def _plan(self, profile: Profile, *, stage: int, elapsed_s: float, live: int,
              done: int = 0, paces: list[tuple[float, float]] | None = None,
              shape: JobShape | None = None, sizes: list[int] | None = None,
              free: bool = False, exact: bool = True, margin: float | None = None) -> Plan:
        """:func:`plan_remaining` from ``stage`` (``free``: with no deadline, the cheapest
        plan for the work; ``exact``: when no plan keeps the margin, the cheapest that ends by
        the deadline itself, else the fastest, infeasible, one; ``margin``: of the time left,
        kept free, None: the re-planner's own)."""
        shape = self.shape if shape is None else shape
        kwargs = dict(self.kwargs)
        if sizes is not None:
            kwargs["stage_sizes"] = sizes
        if paces is not None:
            kwargs["paces"] = paces
        if self._late > 1.0:
            kwargs["straggler"] = max(float(kwargs.get("straggler", 0.0)), self._late - 1.0)
        if stage == 0 and kwargs.get("boot_s") is None:
            kwargs["boot_s"] = profile.boot.quantile(FIRST_STAGE_BOOT_QUANTILE)
        deadline = None if free else self.deadline_s
        aimed = deadline
        if deadline is not None:
            keep = self.margin if margin is None else margin
            aimed = deadline - keep * max(0.0, deadline - elapsed_s)
        plan = plan_remaining(shape, profile, self.instance, aimed, from_stage=stage,
                              elapsed_s=elapsed_s, live_workers=live, done_in_stage=done,
                              **kwargs)
        if exact and not plan.feasible and aimed != deadline:
            # The margin cannot be kept: the cheapest plan that still ends by the deadline
            # itself, rather than the fastest (and dearest) one.
            on_time = plan_remaining(shape, profile, self.instance, deadline,
                                     from_stage=stage, elapsed_s=elapsed_s, live_workers=live,
                                     done_in_stage=done, **kwargs)
            if on_time.feasible:
                return on_time
        return plan


def _timed(plan: Plan, started: float) -> Plan:
    """``plan`` with ``inputs["solve_s"]`` the whole call's seconds since ``started``: a
    re-plan may solve several plans (admission and promotion searches) to return one."""
    return replace(plan, inputs={**plan.inputs,
                                 "solve_s": round(time.perf_counter() - started, 6)})
