"""How many workers the sweep should hold now: policies over a small view of the cluster.

The controller builds a :class:`ScaleView` every tick and asks its policy for a target; the
autoscaler (``cloud``) turns the target into launches, drains and terminations.
"""

from __future__ import annotations

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


class FollowPlan:
    """Hold the plan's worker count for the stage (rung) being run; while the scheduler has no
    job (synchronous SHA waits for stragglers), release workers beyond the next stage's count."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def target(self, view: ScaleView) -> int:
        planned = self.plan.workers_for_rung(view.stage)
        if view.starved and not view.queued:
            # Keep what the next stage will need; let the rest go while stragglers finish.
            return min(planned, max(view.busy, self.plan.workers_for_rung(view.stage + 1)))
        return planned
