"""Successive-halving schedulers: pure policies over trials, rungs and steps."""

from tuner.schedulers._base import Job, Mode, Scheduler, TrialStatus

__all__ = ["Job", "Mode", "Scheduler", "TrialStatus"]
