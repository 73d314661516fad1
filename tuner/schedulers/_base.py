"""The scheduler contract: a pure policy deciding which trial runs to which step.

A scheduler never touches processes, clocks or machines. The controller asks it for the next job
whenever a slot is free, runs the job as a segment, and tells it what happened.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Mode = Literal["min", "max"]


class TrialStatus(StrEnum):
    RUNNING = "running"      # a segment of it is in flight
    PAUSED = "paused"        # waiting at a rung for a promotion decision
    COMPLETED = "completed"  # reached max_resource, or its trainable ended it
    PRUNED = "pruned"        # stopped at a rung by successive halving
    FAILED = "failed"        # its trainable raised


@dataclass(frozen=True)
class Job:
    """Run ``trial_id`` up to ``to_step``. ``new`` means the controller must sample its params."""

    trial_id: str
    to_step: int
    bracket: int = 0
    new: bool = False


def worse_than_everything(mode: Mode) -> float:
    return -math.inf if mode == "max" else math.inf


def sortable(value: float | None, mode: Mode) -> float:
    """Map a value so that larger is better; NaN/None rank last."""
    if value is None or math.isnan(value):
        return -math.inf
    return value if mode == "max" else -value


class Scheduler(ABC):
    """Successive-halving family policy over integer steps (the resource)."""

    mode: Mode

    @abstractmethod
    def next_job(self, new_trial_id: str) -> Job | None:
        """The job to start now, or None if nothing may start now.

        ``new_trial_id`` is the id the controller will give a new trial if the job starts one
        (``Job.new``). Returning a job commits it: its trial is RUNNING from then on.
        """

    @abstractmethod
    def on_rung(self, trial_id: str, step: int, value: float | None) -> None:
        """A segment of ``trial_id`` reached ``step`` (its job's ``to_step``) with ``value``."""

    @abstractmethod
    def on_trial_end(self, trial_id: str, step: int, value: float | None, failed: bool) -> None:
        """The trial ended before its job's ``to_step``: its trainable returned or raised."""

    @abstractmethod
    def on_job_lost(self, trial_id: str) -> None:
        """The job's segment was lost (infrastructure); the job must be offered again."""

    @abstractmethod
    def status(self, trial_id: str) -> TrialStatus: ...

    @abstractmethod
    def is_finished(self) -> bool:
        """True when no job will ever be offered again and none is running."""

    @abstractmethod
    def finalize(self) -> None:
        """End of the sweep: every paused trial becomes PRUNED (or COMPLETED at max_resource)."""

    @property
    @abstractmethod
    def max_resource(self) -> int: ...
