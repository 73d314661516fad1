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
    """Map a value so that larger is better; NaN, infinities and None rank last (a metric
    that overflowed is a diverged run, whichever way it went)."""
    if value is None or not math.isfinite(value):
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

    @property
    @abstractmethod
    def total_trials(self) -> int:
        """How many trials the policy starts in all (every bracket's, for Hyperband)."""

    def stage_of(self, step: int) -> int:
        """The rung index a job to ``step`` belongs to (0 when the policy has no single ladder)."""
        return 0

    @abstractmethod
    def close_admission(self) -> None:
        """Start no new trial from now on (HyperSched's admission control near a deadline):
        ``next_job`` offers only lost jobs and promotions of the trials already started."""


@dataclass
class _Trial:
    status: TrialStatus = TrialStatus.RUNNING
    step: int = 0      # last rung step reached; the next segment starts here
    to_step: int = 0   # to_step of its latest job
    value: float | None = None


class _RungScheduler(Scheduler):
    """Bookkeeping shared by the successive-halving schedulers: trials, rung values, lost jobs.

    Subclasses decide promotions, either on demand (``_promotion``) or when a segment ends
    (``_settle``, queueing them in ``_ready``).
    """

    def __init__(self, rungs: list[int], reduction_factor: int, mode: Mode, num_trials: int):
        self.rungs = rungs
        self.reduction_factor = reduction_factor
        self.mode = mode
        self.num_trials = num_trials
        self._trials: dict[str, _Trial] = {}
        self._values: list[list[tuple[str, float | None]]] = [[] for _ in rungs]  # per rung
        self._lost: list[Job] = []   # segments to offer again, before anything else
        self._ready: list[Job] = []  # promotions already decided, offered next
        self._closed = False         # close_admission(): no new trials

    @property
    def max_resource(self) -> int:
        return self.rungs[-1]

    @property
    def total_trials(self) -> int:
        return self.num_trials

    def stage_of(self, step: int) -> int:
        return self.rungs.index(step) if step in self.rungs else 0

    def _promotion(self) -> Job | None:
        """The promotion to offer now, without committing it."""
        return None

    def _settle(self) -> None:
        """Called after every event that ends a segment."""

    def _commit(self, job: Job) -> Job:
        trial = self._trials.setdefault(job.trial_id, _Trial())
        trial.status, trial.to_step = TrialStatus.RUNNING, job.to_step
        return job

    def _resume_job(self) -> Job | None:
        """A lost job first, then a decided promotion, then ``_promotion()``; committed."""
        if self._lost or self._ready:
            return self._commit((self._lost or self._ready).pop(0))
        job = self._promotion()
        return None if job is None else self._commit(job)

    def close_admission(self) -> None:
        self._closed = True

    def _all_started(self) -> bool:
        """No new trial will start: all ``num_trials`` have, or admission is closed."""
        return self._closed or len(self._trials) >= self.num_trials

    def _new_job(self, new_trial_id: str) -> Job | None:
        if self._all_started():
            return None
        return self._commit(Job(new_trial_id, self.rungs[0], new=True))

    def next_job(self, new_trial_id: str) -> Job | None:
        return self._resume_job() or self._new_job(new_trial_id)

    def _running(self, trial_id: str) -> _Trial:
        trial = self._trials[trial_id]
        if trial.status is not TrialStatus.RUNNING:
            raise ValueError(f"Trial {trial_id} is {trial.status}, not running")
        return trial

    def _record(self, trial_id: str, step: int, value: float | None) -> None:
        trial = self._trials[trial_id]
        trial.step, trial.value = step, value
        if step in self.rungs:
            self._values[self.rungs.index(step)].append((trial_id, value))

    def on_rung(self, trial_id: str, step: int, value: float | None) -> None:
        trial = self._running(trial_id)
        if step != trial.to_step:
            raise ValueError(f"Trial {trial_id} reported step {step}, not {trial.to_step}")
        self._record(trial_id, step, value)
        done = step == self.max_resource
        trial.status = TrialStatus.COMPLETED if done else TrialStatus.PAUSED
        self._settle()

    def on_trial_end(self, trial_id: str, step: int, value: float | None, failed: bool) -> None:
        trial = self._running(trial_id)
        if failed:
            trial.status = TrialStatus.FAILED
        else:
            self._record(trial_id, step, value)
            trial.status = TrialStatus.COMPLETED
        self._settle()

    def on_job_lost(self, trial_id: str) -> None:
        """Offer the same segment again before anything else (``new=False``: params exist)."""
        trial = self._running(trial_id)
        trial.status = TrialStatus.PAUSED
        self._lost.append(Job(trial_id, trial.to_step))

    def status(self, trial_id: str) -> TrialStatus:
        return self._trials[trial_id].status

    def is_finished(self) -> bool:
        return (
            self._all_started()
            and not self._lost
            and not self._ready
            and all(t.status is not TrialStatus.RUNNING for t in self._trials.values())
            and self._promotion() is None
        )

    def finalize(self) -> None:
        self._lost.clear()
        self._ready.clear()
        for trial in self._trials.values():
            if trial.status is TrialStatus.PAUSED:
                trial.status = TrialStatus.PRUNED
