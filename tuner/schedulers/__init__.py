"""Successive-halving schedulers: pure policies over trials, rungs and steps."""

from tuner.schedulers._asha import ASHA
from tuner.schedulers._base import Job, Mode, Scheduler, TrialStatus
from tuner.schedulers._capabilities import Admitting, Bracketed, Laddered, Staged
from tuner.schedulers._factory import make_scheduler
from tuner.schedulers._hyperband import Hyperband
from tuner.schedulers._pasha import PASHA
from tuner.schedulers._rungs import promotable, rung_steps
from tuner.schedulers._sha import SuccessiveHalving

__all__ = [
    "ASHA",
    "Admitting",
    "Bracketed",
    "Hyperband",
    "Job",
    "Laddered",
    "Mode",
    "PASHA",
    "Scheduler",
    "Staged",
    "SuccessiveHalving",
    "TrialStatus",
    "make_scheduler",
    "promotable",
    "rung_steps",
]
