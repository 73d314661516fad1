"""How many workers the sweep should hold now: policies over a small view of the cluster.

The controller builds a :class:`ScaleView` every tick and asks its policy for a target; the
autoscaler (``cloud``) turns the target into launches, drains and terminations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from budgets._plan import Plan


@dataclass(frozen=True)
class ScaleView:
    now: float
    live: int          # instances launched and not terminated (booting, ready or draining)
    busy: int          # instances with a segment running
    starved: bool      # the scheduler had no job for a free slot at the last dispatch
    queued: bool       # a job waits for a free slot
    stage: int         # highest rung index a segment has been started for
    elapsed_s: float | None = None  # seconds since the sweep started (None: use ``now``)
    # While ``starved``: when (in ``elapsed_s`` terms) new jobs are expected to appear, e.g.
    # when a synchronous stage's last running segment is expected to end; None: not known.
    next_work_s: float | None = None
    # The sweep's re-planner may cut a stage under way (it has a cost budget): work started
    # beyond the plan's count may then be stopped unfinished (see FollowPlan).
    cuts_stages: bool = False


@dataclass(frozen=True)
class ReplanView:
    """What a re-planner sees of a sweep under way (see ``Controller(replanner=...)``)."""

    now: float
    elapsed_s: float                     # seconds since the sweep started
    stage: int                           # highest rung index a segment has been started for
    live: int                            # instances launched and not terminated
    observed_s_per_step: float | None    # fitted over finished segments (fit_segment_times)
    observations: int                    # how many segments that fit is over
    spent_usd: float
    observed_first_s: float | None = None  # fitted extra seconds of a trial's first segment
    stage_done: int = 0                  # segments of rung ``stage`` finished (``done``)
    # The current stage's trials, best-ranked first: each one's pace (its seconds per step over
    # ``observed_s_per_step``; None: not measured yet) and whether it has still to train.
    paces: tuple[float | None, ...] = ()
    pending: tuple[bool, ...] = ()
    started: int = 0                     # trials admitted so far (in the bracket under way)
    fresh_only: bool = False             # every segment observed started its trial
    resumed: int = 0                     # segments observed that resumed a trial
    # Trials per stage (every stage), as the scheduler will run them: fewer than the shape's
    # once admission closed early or promotions were cut; empty: the shape's.
    stage_sizes: tuple[int, ...] = ()


class ScalingPolicy(Protocol):
    def target(self, view: ScaleView) -> int: ...


class Static:
    """A fixed cluster (the default, and the static baselines)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def target(self, view: ScaleView) -> int:
        return self.workers


class ReleaseIdle:
    """Naive elastic: release workers the scheduler has no job for; grow back to ``max_workers``
    when jobs queue. No plan, no look-ahead (the baseline a planner must beat)."""

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers

    def target(self, view: ScaleView) -> int:
        if view.queued:
            return self.max_workers
        if view.starved:
            return view.busy
        return view.live


# While a stage waits for stragglers, idle workers the next stage needs go when its work is
# more than (RELAUNCH_LEAD + RELEASE_MARGIN) boot latencies off, and are launched again
# RELAUNCH_LEAD boot latencies before it (with boot U(60, 180) s, 1.5 mean boots is the slowest).
RELAUNCH_LEAD = 1.5
RELEASE_MARGIN = 1.0


class FollowPlan:
    """Hold the plan's worker count for the stage (rung) being run; while the scheduler has no
    job (synchronous SHA waits for stragglers), release workers beyond the next stage's count
    (all idle ones in the last stage, and while the next stage's work is far enough off, see
    ``ScaleView.next_work_s``, booting them again ahead of it).

    Looks ahead as the planner's timeline assumes: from one boot latency (``boot_s``, default
    the plan's ``inputs["boot_s"]``) before the next stage's planned start, it holds that
    stage's count if larger, so added instances are up when the stage begins. The controller
    may swap ``plan`` for a re-planned one at any time.

    A re-plan that asks for fewer workers while jobs wait for a slot lets none go: the work
    is the same whoever runs it (billing is per second) and their boots are paid, so a worker
    let go there only makes the stage later
    ([docs/benchmarks/tuning-log.md][hold-workers]). Except where the re-planner may cut the
    stage under way (``ScaleView.cuts_stages``, a sweep with a cost budget): segments started
    beyond the plan's count are then stopped unfinished, and fewer trials are ranked at the cut.

    While the stage waits for stragglers, it holds no more than the plan's count for the stage
    either: the workers the next stage needs go until its planned start is a boot away, and
    are launched again then; keeping them whenever that work is near holds them idle behind
    stragglers that run long past their expected end
    ([docs/benchmarks/tuning-log.md][release-behind-stragglers]).
    """

    def __init__(self, plan: Plan, boot_s: float | None = None) -> None:
        self.plan = plan
        self.boot_s = boot_s

    def _boot(self) -> float:
        """The boot latency the look-ahead counts: ``boot_s``, else the plan's."""
        return float(self.boot_s if self.boot_s is not None
                     else self.plan.inputs.get("boot_s") or 0.0)

    def target(self, view: ScaleView) -> int:
        planned = self.plan.workers_for_rung(view.stage)
        nxt = next((r for r in self.plan.rungs if r.rung == view.stage + 1), None)
        last = bool(self.plan.rungs) and view.stage >= self.plan.rungs[-1].rung
        # Past the plan's last stage nothing is to come: a worker whose trial has ended
        # there would wait, paid, for the slowest one to finish.
        upcoming = 0 if last else self.plan.workers_for_rung(view.stage + 1)
        elapsed = view.now if view.elapsed_s is None else view.elapsed_s
        if nxt is not None and upcoming > planned and elapsed >= nxt.start_s - self._boot():
            planned = upcoming
        if view.starved and not view.queued:
            # Keep what the next stage will need; let the rest go while stragglers finish.
            hold = max(view.busy, upcoming)
            if view.next_work_s is not None and hold > view.busy:
                # ... unless the next stage's work is far off: then an idle worker costs more
                # than booting one again, RELAUNCH_LEAD boot latencies before that work.
                boot = self._boot()
                wait = view.next_work_s - elapsed
                if boot > 0 and wait > (RELAUNCH_LEAD + RELEASE_MARGIN) * boot:
                    hold = view.busy
                elif boot > 0 and wait > RELAUNCH_LEAD * boot:
                    hold = max(view.busy, min(upcoming, view.live))  # neither go nor launch
            return min(planned, hold)
        if view.queued and not view.cuts_stages:
            return max(planned, view.live)   # busy, or about to be: none goes
        return planned


class StageWorkers:
    """A fixed worker count per stage (rung), as a plan's stage counts followed with no
    re-plan: the baseline that ``benchmarks/hindsight.py`` sizes in hindsight, to measure how
    far the planner is from the cheapest per-stage cluster for a run whose every step time
    and boot is known.

    Holds ``workers[stage]`` (the last count for later stages) while the stage has work, and
    lets none go while jobs wait for a slot. While the stage waits for stragglers it lets
    idle workers go down to the next stage's count when ``keep`` (so they are up when the
    stage begins), else down to the busy ones; either way it holds the next stage's count
    from ``RELAUNCH_LEAD`` boot latencies (``boot_s``) before that stage's work is expected
    (``ScaleView.next_work_s``).
    """

    def __init__(self, workers: Sequence[int], *, boot_s: float, keep: bool = True) -> None:
        counts = list(workers)
        if not counts or any(isinstance(w, bool) or not isinstance(w, int) or w < 1
                             for w in counts):
            raise ValueError(f"workers is {counts!r}, but must be one int >= 1 per stage")
        if not (isinstance(boot_s, int | float) and boot_s >= 0):
            raise ValueError(f"boot_s is {boot_s!r}, but must be a number >= 0")
        self.workers = counts
        self.boot_s = float(boot_s)
        self.keep = bool(keep)

    def __repr__(self) -> str:
        return f"StageWorkers({self.workers!r}, boot_s={self.boot_s}, keep={self.keep})"

    def target(self, view: ScaleView) -> int:
        k = min(view.stage, len(self.workers) - 1)
        upcoming = self.workers[k + 1] if k + 1 < len(self.workers) else 0
        if view.starved and not view.queued:
            hold = max(view.busy, upcoming) if self.keep else view.busy
            elapsed = view.now if view.elapsed_s is None else view.elapsed_s
            if view.next_work_s is not None \
                    and view.next_work_s - elapsed <= RELAUNCH_LEAD * self.boot_s:
                hold = max(view.busy, upcoming)
            return hold
        if view.queued:
            return max(self.workers[k], view.live)
        return self.workers[k]
