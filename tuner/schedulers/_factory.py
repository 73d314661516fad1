"""Build a scheduler from the sweep's configuration."""

from __future__ import annotations

from tuner.schedulers._asha import ASHA
from tuner.schedulers._base import Mode, Scheduler
from tuner.schedulers._hyperband import Hyperband
from tuner.schedulers._pasha import PASHA
from tuner.schedulers._sha import SuccessiveHalving

_SCHEDULERS: dict[str, type[ASHA | SuccessiveHalving | Hyperband]] = {
    "asha": ASHA,
    "sha": SuccessiveHalving,
    "hyperband": Hyperband,
}


def make_scheduler(
    type: str,
    min_resource: int,
    max_resource: int,
    reduction_factor: int = 3,
    mode: Mode = "max",
    num_trials: int | None = None,
    first_reduction: int | None = None,
    early_promotion: bool = False,
    pasha: bool = False,
    brackets: int = 1,
) -> Scheduler:
    """The scheduler named ``type``: one of "asha", "sha", "hyperband" (``first_reduction``:
    synchronous halving's first cut, and ``early_promotion``, "sha" only; ``pasha``: "asha"
    only, its top rung grows as :class:`PASHA` decides; ``brackets``: "asha" only, the rungs
    new trials enter at, as :class:`ASHA` says).

    >>> make_scheduler("asha", 1, 27, 3, "max", None).rungs
    [1, 3, 9, 27]
    >>> make_scheduler("sha", 1, 27, 3, "max", 27, first_reduction=2).sizes
    [27, 13, 4, 1]
    """
    if type not in _SCHEDULERS:
        raise ValueError(f"The value of type is {type!r}, but must be one of {sorted(_SCHEDULERS)}")
    if early_promotion and type != "sha":
        raise ValueError("early_promotion is True, but only a synchronous halving ('sha') "
                         "decides its stages at once")
    if first_reduction is not None and type != "sha":
        raise ValueError(f"first_reduction is {first_reduction!r}, but only a synchronous "
                         "halving ('sha') has one")
    if pasha and type != "asha":
        raise ValueError(f"pasha is True, but only asynchronous halving ('asha') grows its top "
                         f"rung progressively, not {type!r}")
    if brackets != 1 and (type != "asha" or pasha):
        raise ValueError(f"brackets is {brackets!r}, but only asynchronous halving ('asha') "
                         "without pasha enters trials at several rungs")
    if pasha:
        return PASHA(min_resource, max_resource, reduction_factor, mode, num_trials)
    if type == "sha":
        return SuccessiveHalving(min_resource, max_resource, reduction_factor, mode, num_trials,
                                 first_reduction, early_promotion=early_promotion)
    if type == "asha":
        return ASHA(min_resource, max_resource, reduction_factor, mode, num_trials,
                    brackets=brackets)
    return _SCHEDULERS[type](min_resource, max_resource, reduction_factor, mode, num_trials)
