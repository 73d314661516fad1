"""A plan: how many workers of which type the sweep should have, rung by rung, and what that
is predicted to cost and take. Planners make plans; the controller's autoscaler follows them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RungPlan:
    """Stage ``rung`` of successive halving: ``trials`` trials trained to ``resource`` steps."""

    rung: int
    trials: int
    resource: int
    gpus_per_trial: int
    workers: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class TimelinePoint:
    t_s: float
    workers: int
    instance_type: str
    spot: bool = False


@dataclass(frozen=True)
class Plan:
    """The ``plan --json`` contract of INTERFACES.md, plus what made it."""

    feasible: bool
    predicted_cost_usd: float
    predicted_wall_s: float
    num_trials: int
    rungs: list[RungPlan]
    timeline: list[TimelinePoint]
    planner: str = "cost-min"
    reason: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)

    def workers_for_rung(self, rung: int) -> int:
        """Workers to hold while stage ``rung`` runs (the last stage's for later rungs)."""
        for r in self.rungs:
            if r.rung == rung:
                return r.workers
        return self.rungs[-1].workers if self.rungs else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "feasible": self.feasible,
            "predicted_cost_usd": self.predicted_cost_usd,
            "predicted_wall_s": self.predicted_wall_s,
            "num_trials": self.num_trials,
            "rungs": [asdict(r) for r in self.rungs],
            "timeline": [asdict(p) for p in self.timeline],
            "planner": self.planner,
            "reason": self.reason,
            "inputs": self.inputs,
        }
