"""HyperSched's deadline policy as two pure decisions: admit a new trial, and how wide to run one.

After Liaw et al., "HyperSched: Dynamic Resource Reallocation for Model Development on a
Deadline" (SoCC '19). Near the deadline exploring more trials is wasted work, since none of them
could be trained to the top rung in time, and the GPUs they would take are better spent making
the best trials train faster. The controller asks :meth:`Reallocation.admit` before it lets the
scheduler start a new trial, and :meth:`Reallocation.width` for the number of GPUs of a segment
of a trial that may have free GPUs.

Simplified against the paper (one inequality for admission, greedy per-segment widening, one
seconds-per-step figure for every trial, no cost model): the list is in
docs/concepts/planner.md#deadline-policy-hypersched.

Example::

    >>> from budgets import RESNET50_CIFAR10, Reallocation
    >>> policy = Reallocation(RESNET50_CIFAR10, max_gpus_per_trial=4, restart_s=60.0)
    >>> policy.admit(time_left_s=1000.0, s_per_step=10.0, steps=300)   # 300*10/3.42 = 877 s
    True
    >>> policy.width(free_gpus=4, steps_left=20, s_per_step=10.0)      # saves at most 141 s
    4
    >>> policy.width(free_gpus=4, steps_left=5, s_per_step=10.0)       # saves at most 35 s
    1
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Reallocation:
    """Admission control near the deadline and wider segments for the best trials.

    Args:
        speedup: s(g), how many times faster one trial trains on g GPUs (e.g.
            ``budgets.RESNET50_CIFAR10``).
        max_gpus_per_trial: the most GPUs one trial may get; a trial always lands whole on one
            instance, so the controller also caps it by the free slots of that instance.
        restart_s: what stopping a trial and starting it again on other GPUs costs (checkpoint,
            restore, start-up), in seconds; a wider segment must save more than this.
    """

    speedup: Callable[[int], float]
    max_gpus_per_trial: int = 8
    restart_s: float = 0.0

    def __post_init__(self) -> None:
        problems = []
        if not callable(self.speedup):
            problems.append(f"speedup is {self.speedup!r}, but must be callable as s(g)")
        g = self.max_gpus_per_trial
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            problems.append(f"max_gpus_per_trial is {g!r}, but must be an integer >= 1")
        r = self.restart_s
        if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r) \
                or r < 0:
            problems.append(f"restart_s is {r!r}, but must be a finite number >= 0")
        if problems:
            raise ValueError("invalid Reallocation: " + "; ".join(problems))

    def admit(self, time_left_s: float, s_per_step: float, steps: int) -> bool:
        """Whether a new trial may still start: it needs ``steps`` steps to the top rung at
        ``s_per_step`` seconds each on one GPU, and ``time_left_s`` seconds remain. It is
        admitted when it could make it on ``max_gpus_per_trial`` GPUs."""
        if not math.isfinite(time_left_s):
            return True
        needed = steps * s_per_step / self.speedup(self.max_gpus_per_trial)
        return needed <= time_left_s

    def saved_s(self, gpus: int, steps_left: int, s_per_step: float, current: int = 1) -> float:
        """Projected seconds saved by running the ``steps_left`` steps on ``gpus`` GPUs rather
        than ``current``: ``steps_left * s_per_step * (1/s(current) - 1/s(gpus))``."""
        return steps_left * s_per_step * (1.0 / self.speedup(current) - 1.0 / self.speedup(gpus))

    def width(self, free_gpus: int, steps_left: int, s_per_step: float,
              current: int = 1) -> int:
        """GPUs for the next segment of a trial that now runs (or would run) on ``current``:
        up to ``min(free_gpus, max_gpus_per_trial)``, the width that saves the most time if
        that beats ``restart_s``, else ``current``. ``free_gpus`` counts the GPUs the trial
        could use on one instance, its own included."""
        best, best_saved = current, 0.0
        for g in range(current + 1, min(free_gpus, self.max_gpus_per_trial) + 1):
            saved = self.saved_s(g, steps_left, s_per_step, current)
            if saved > best_saved + 1e-9:
                best, best_saved = g, saved
        return best if best_saved > self.restart_s + 1e-9 else current
