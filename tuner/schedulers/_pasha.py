"""PASHA: asynchronous successive halving whose top rung grows only while the rankings of the
two highest rungs disagree (Bohdal et al., "PASHA: Efficient HPO and NAS with Progressive
Resource Allocation", ICLR 2023).

Written here rather than taken from Syne Tune (``PASHARungSystem``): that class is bound to
Syne Tune's rung system and its pinned dependencies, while this one keeps elastune's
pause-and-resume ASHA and its journal replay.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from tuner.schedulers._asha import ASHA
from tuner.schedulers._base import Mode, TrialStatus, sortable

# The share of noisy pairs' distances below the soft-ranking tolerance (the paper's 90th
# percentile).
NOISE_PERCENTILE = 90.0


def noise_epsilon(values: Mapping[str, Sequence[float | None]], mode: Mode) -> float:
    """PASHA's soft-ranking tolerance from the trials' values by rung (``values[t][k]``: trial
    ``t`` at rung ``k``; the highest rung first decides): the 90th percentile of the distance,
    at the highest rung both reached, between two trials whose order there flipped at some
    lower rung and flipped back; 0 when no pair did.

    >>> noise_epsilon({"a": [3.0, 1.0, 5.0], "b": [2.0, 2.0, 4.0]}, "max")
    1.0
    >>> noise_epsilon({"a": [1.0, 3.0], "b": [2.0, 4.0]}, "max")
    0.0
    """
    distances = []
    for a, b in itertools.combinations(sorted(values), 2):
        va, vb = values[a], values[b]
        top = min(len(va), len(vb)) - 1
        if top < 2:
            continue
        keys = [(sortable(x, mode), sortable(y, mode)) for x, y in zip(va, vb, strict=False)]
        if not all(math.isfinite(x) and math.isfinite(y) for x, y in keys[:top + 1]):
            continue
        order = keys[top][0] > keys[top][1]
        flipped = False
        for k in range(top - 1, -1, -1):
            lower = keys[k][0] > keys[k][1]
            if lower != order:
                flipped = True
            elif flipped:
                distances.append(abs(keys[top][0] - keys[top][1]))
                break
    if not distances:
        return 0.0
    distances.sort()
    # (numpy's default linear interpolation, without numpy)
    pos = (len(distances) - 1) * NOISE_PERCENTILE / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(distances) - 1)
    return distances[lo] + (distances[hi] - distances[lo]) * (pos - lo)


def rankings_agree(top: Mapping[str, float | None], below: Mapping[str, float | None],
                   mode: Mode, epsilon: float = 0.0) -> bool:
    """Whether the trials of the top rung (``top``: trial -> value there) rank as they did a
    rung below (``below``), up to ``epsilon``: the trial at each place of the top rung's order
    is within ``epsilon`` of the trial at that place of the lower rung's order, both valued a
    rung below (PASHA's soft ranking). With fewer than two trials at the top they agree.

    >>> rankings_agree({"a": 0.9, "b": 0.8}, {"a": 0.5, "b": 0.4, "c": 0.6}, "max")
    True
    >>> rankings_agree({"a": 0.9, "b": 0.8}, {"a": 0.4, "b": 0.5}, "max")
    False
    >>> rankings_agree({"a": 0.9, "b": 0.8}, {"a": 0.4, "b": 0.5}, "max", epsilon=0.1)
    True
    """
    common = [t for t in top if t in below]
    if len(common) < 2:
        return True
    by_top = sorted(common, key=lambda t: (-sortable(top[t], mode), t))
    by_below = sorted(common, key=lambda t: (-sortable(below[t], mode), t))
    for placed_top, placed_below in zip(by_top, by_below, strict=True):
        a, b = sortable(below[placed_top], mode), sortable(below[placed_below], mode)
        if placed_top != placed_below and not (math.isfinite(a) and math.isfinite(b)
                                               and abs(a - b) <= epsilon):
            return False
    return True


class PASHA(ASHA):
    """Progressive ASHA (Bohdal et al., ICLR 2023): ASHA whose top rung starts at the second
    rung and moves one rung up whenever the ranking of the trials at the current top rung
    differs from their ranking a rung below (soft ranking: values closer than the estimated
    noise count as tied, :func:`noise_epsilon`), up to ``max_resource``.

    A trial that reaches the current top rung pauses there: if the top rung grows it may be
    promoted as ASHA promotes; when the sweep ends it counts as completed. Rungs, promotion
    rule and ``num_trials`` are ASHA's; ``max_resource`` stays the ceiling (what the planner
    plans for).

    Example:

        >>> from tuner.schedulers import PASHA
        >>> p = PASHA(min_resource=1, max_resource=9, reduction_factor=3, num_trials=9)
        >>> p.rungs, p.current_max_resource
        ([1, 3, 9], 3)
    """

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int = 3,
        mode: Mode = "max",
        num_trials: int | None = None,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, mode, num_trials)
        self.top = min(1, len(self.rungs) - 1)   # index of the current top rung
        self._by_rung: list[dict[str, float | None]] = [{} for _ in self.rungs]

    @property
    def current_max_resource(self) -> int:
        """The step of the current top rung: no trial trains past it until it grows."""
        return self.rungs[self.top]

    def _record(self, trial_id: str, step: int, value: float | None) -> None:
        super()._record(trial_id, step, value)
        if step not in self.rungs:
            return
        k = self.rungs.index(step)
        self._by_rung[k][trial_id] = value
        if k == self.top and self.top < len(self.rungs) - 1 and self._should_grow():
            self.top += 1

    def _should_grow(self) -> bool:
        top, below = self._by_rung[self.top], self._by_rung[self.top - 1]
        ladder = {t: [self._by_rung[k].get(t) for k in range(self.top + 1)] for t in top}
        return not rankings_agree(top, below, self.mode, noise_epsilon(ladder, self.mode))

    def _top_rung(self) -> int:
        return self.top

    def finalize(self) -> None:
        top = self.rungs[self.top]
        at_top = [t for t, trial in self._trials.items()
                  if trial.status is TrialStatus.PAUSED and trial.step == trial.to_step == top]
        super().finalize()
        for t in at_top:
            self._trials[t].status = TrialStatus.COMPLETED
