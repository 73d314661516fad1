"""Trial paces: how much slower or faster than the sweep's fitted seconds per step each trial
trains, and what that makes of the stages still to come.

Configurations differ in step cost (a wider network, a larger batch), and successive halving
may favour the slow ones: on the measured AlexNet curves the finalists train about 1.5x slower
per step than the average trial. A synchronous stage ends with its slowest trial, so a plan
from one pooled rate runs late exactly in the last, smallest stages. :class:`TrialPaces` keeps
each trial's segments (its resumed ones when it has any: a first segment mixes in start-up
costs); :func:`stage_paces` turns the ranked members of the current
stage into a (mean, slowest) pace per stage left, taking the best-ranked members as the
likely survivors of each later stage, and no faster at their slowest than the pool's
m / (m + 1) quantile (the ranking is a weak guess; measured on the planner benchmark:
docs/benchmarks/tuning-log.md#stage-paces). Once a stage's trials all have paces,
:func:`slowest_first` says whether handing them out slowest first (Graham's
longest-processing-time rule) ends the stage sooner than their rank order, each a list
schedule (:func:`list_makespan`: each job to the slot free first).

Hand-written: a ratio of sums per trial; no library models this.

Example::

    >>> tp = TrialPaces()
    >>> tp.observe("a", steps=2, seconds=30.0, fresh=False)
    >>> tp.observe("b", steps=2, seconds=20.0, fresh=False)
    >>> tp.pace("a", s_per_step=10.0), tp.pace("c", s_per_step=10.0)
    (1.5, None)
    >>> stage_paces([1.5, 1.0, None], [True, True, True], [3, 1])
    [(1.1667, 1.5), (1.5, 1.5)]
    >>> list_makespan([1.0, 1.0, 2.0], slots=2), list_makespan([2.0, 1.0, 1.0], slots=2)
    (3.0, 2.0)
    >>> slowest_first([1.0, 1.0, 2.0], slots=2)
    [2, 0, 1]
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

__all__ = ["TrialPaces", "list_makespan", "slowest_first", "stage_paces"]


class TrialPaces:
    """Steps and seconds per trial, resumed and fresh segments apart."""

    def __init__(self) -> None:
        # (steps, or their weight under a profile's step costs; seconds) per trial
        self._resumed: dict[str, tuple[float, float]] = {}
        self._fresh: dict[str, tuple[float, float]] = {}
        self._fresh_total = (0.0, 0.0)

    def observe(self, trial_id: str, *, steps: float, seconds: float, fresh: bool) -> None:
        """A finished segment of ``trial_id`` (``fresh``: it started from step 0)."""
        if steps <= 0 or not seconds > 0:
            return
        sums = self._fresh if fresh else self._resumed
        n, t = sums.get(trial_id, (0, 0.0))
        sums[trial_id] = (n + steps, t + seconds)
        if fresh:
            self._fresh_total = (self._fresh_total[0] + steps, self._fresh_total[1] + seconds)

    def pace(self, trial_id: str, *, s_per_step: float) -> float | None:
        """The trial's seconds per step over ``s_per_step``, from its resumed segments; before
        it has one, its fresh seconds per step over all trials' (a first segment carries
        start-up costs, so it is compared only with other first segments); None when the
        trial has finished no segment."""
        if trial_id in self._resumed and s_per_step > 0:
            n, t = self._resumed[trial_id]
            return t / n / s_per_step
        if trial_id in self._fresh:
            n, t = self._fresh[trial_id]
            total_n, total_t = self._fresh_total
            return (t / n) / (total_t / total_n)
        return None


def stage_paces(ranked: Sequence[float | None], pending: Sequence[bool],
                sizes: Sequence[int], spread: Callable[[int], float] | None = None
                ) -> list[tuple[float, float]]:
    """(mean, slowest) pace per stage left, rounded to 4 places.

    Args:
        ranked: the paces of the current stage's trials, best-ranked first (None: not known
            yet, taken as 1.0, the fitted rate).
        pending: per trial of ``ranked``, whether it has still to train in this stage.
        sizes: trials per stage left, the current one first.

    The current stage is over its pending trials (with ``u`` of them not measured yet, its
    slowest no faster than the ``u / (u + 1)`` quantile of the measured paces); a later stage
    of ``m`` trials over the ``m`` best-ranked ones, with its slowest no faster than the
    ``m / (m + 1)`` quantile of all of ``ranked``, and (``spread``) no faster than its mean
    times ``spread(m)``: how much slower than their stage's mean the slowest of ``m``
    promoted trials trained in an earlier run (``Profile.slowest_pace(m, promoted=True)``),
    since this stage's paces are first segments' or earlier stages', not its own. A stage
    with nothing to go on is (1.0, 1.0).

    >>> stage_paces([1.0, 1.0, 1.0], [True, True, True], [3, 1], spread=lambda m: 1.5)
    [(1.0, 1.0), (1.0, 1.5)]
    """
    known = [1.0 if p is None else float(p) for p in ranked]
    pool = sorted(known)
    out = []
    for k, m in enumerate(sizes):
        group = [p for p, wait in zip(known, pending, strict=True) if wait] if k == 0 \
            else known[:m]
        if not group:
            out.append((1.0, 1.0))
            continue
        slowest = max(group)
        unknown = sum(p is None for p, wait in zip(ranked, pending, strict=True) if wait)
        measured = sorted(float(p) for p in ranked if p is not None)
        if k == 0 and unknown and measured:
            # Trials not measured yet are as varied as those that are: the slowest of u of
            # them lies near the u / (u + 1) quantile of the measured paces.
            q = measured[min(len(measured) - 1, int(len(measured) * unknown / (unknown + 1)))]
            slowest = max(slowest, q)
        mean = sum(group) / len(group)
        if k > 0 and pool:
            # The ranking is a weak guess of who survives: the slowest of m trials drawn
            # without regard to pace lies near the m / (m + 1) quantile of the pool.
            slowest = max(slowest, pool[min(len(pool) - 1, int(len(pool) * m / (m + 1)))])
        if k > 0 and spread is not None:
            slowest = max(slowest, mean * spread(m))
        out.append((round(mean, 4), round(slowest, 4)))
    return out


def list_makespan(times: Sequence[float], slots: int, free: Sequence[float] = ()) -> float:
    """When the last of ``times`` ends if each goes, in the order given, to the slot free
    first; ``slots`` slots, free at 0 except those ``free`` lists (their own free times, e.g.
    negative for slots already at work before the others are up). 0 for no jobs."""
    if slots < 1:
        raise ValueError(f"slots is {slots!r}, but must be an int >= 1")
    heap = sorted(list(free)[:slots] + [0.0] * max(0, slots - len(free)))
    end = 0.0
    for t in times:
        start = heapq.heappop(heap)
        heapq.heappush(heap, start + t)
        end = max(end, start + t)
    return end


def slowest_first(paces: Sequence[float], slots: int) -> list[int] | None:
    """The indices of ``paces`` slowest first (ties in the order given), when that order's
    list schedule on ``slots`` slots ends before the order given does; else None (it would
    not shorten the stage: no more jobs than slots, or the order is already as good)."""
    if len(paces) <= slots:
        return None
    order = sorted(range(len(paces)), key=lambda i: -paces[i])
    if list_makespan([paces[i] for i in order], slots) < list_makespan(paces, slots) - 1e-9:
        return order
    return None
