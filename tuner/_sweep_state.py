"""What the controller's parts share of a sweep under way: its trials, the segments running
and where the sweep stands. One typed object that the loop, the cluster, plan following and
the deadline policy read and write, so that no part reaches into another's fields."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from worker.records import Segment, TrialState


@dataclass
class TrialRecord:
    trial_id: str
    number: int
    params: dict[str, Any]
    bracket: int
    step: int = 0                      # last step reached by a finished segment
    value: float | None = None         # metric at ``step``
    failures: int = 0
    state: TrialState = TrialState.RUNNING
    last_report: dict[int, float] = field(default_factory=dict)

    def value_at(self, step: int) -> float | None:
        """The metric reported at ``step`` (or the last report before it)."""
        if step in self.last_report:
            return self.last_report[step]
        earlier = [s for s in self.last_report if s <= step]
        return self.last_report[max(earlier)] if earlier else self.value

    def forget_after_checkpoint(self) -> None:
        """Reports after the trial's last checkpointed step are superseded by a re-run."""
        self.last_report = {s: v for s, v in self.last_report.items() if s <= self.step}


@dataclass
class Running:
    segment: Segment
    instance_id: str
    slots: int
    started_at: float | None = None
    first_step_at: float | None = None  # a fresh segment's first step reported (its ts)
    renewed_at: float = 0.0            # the lease: when the worker last showed life
    beat: int | None = None            # the heartbeat count seen then


@dataclass
class SweepState:
    trials: dict[str, TrialRecord] = field(default_factory=dict)
    running: dict[str, Running] = field(default_factory=dict)
    started_at: float = 0.0            # the sweep's start (earlier runs' time counted)
    run_started: float = 0.0           # this run's start
    deadline: float = math.inf
    stage: int = 0                     # highest rung index a segment was started for
    starved: bool = False              # the scheduler had no job for a free slot
    queued: bool = False               # a job waited for a free slot
    budget_blocked: bool = False       # no job fits the cost budget: the sweep winds down
    bracket_first: int = 0             # trials started before the bracket under way
    admission_closed: bool = False
    admit_limit: int | None = None     # a re-plan's smaller number of trials
    cut: set[str] = field(default_factory=set)         # pruned from a stage while training
    widening: set[str] = field(default_factory=set)    # stopped to re-run on more GPUs
    evacuating: set[str] = field(default_factory=set)  # stopped ahead of a spot interruption
    # Seconds of segments lost to the infrastructure (preempted, lost, stale) since the plan
    # was made: re-run from their checkpoints, so the rest takes that much longer than it says.
    lost_work_s: float = 0.0

    def nothing_running(self) -> bool:
        """No segment runs that the sweep still waits for (those of trials cut from their
        stage are being stopped, and nothing waits for them)."""
        return not self.running or (bool(self.cut) and all(
            run.segment.trial_id in self.cut for run in self.running.values()))

    def on(self, instance_id: str) -> list[str]:
        """The running segments on ``instance_id``."""
        return [sid for sid, run in self.running.items() if run.instance_id == instance_id]
