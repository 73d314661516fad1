"""Aggregates of normalized regret over tasks: the interquartile mean and a seeded percentile
bootstrap interval, as Syne Tune's and rliable's benchmark reports give them.

    >>> iqm([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1.0])
    0.35
    >>> lo, hi = bootstrap_ci([0.1, 0.2, 0.3, 0.4], seed=0)
    >>> 0.1 <= lo <= hi <= 0.4
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOOTSTRAP_SAMPLES = 2000


def iqm(xs: Sequence[float]) -> float | None:
    """The mean of the middle half (from the 25th to the 75th percentile, the lowest and
    highest quarter cut off, fractional observations weighted); None for no values."""
    v = np.sort(np.asarray(xs, dtype=float))
    n = len(v)
    if n == 0:
        return None
    lo, hi = 0.25 * n, 0.75 * n
    # weight of observation i: the part of [i, i+1) inside [lo, hi)
    idx = np.arange(n)
    w = np.clip(np.minimum(idx + 1, hi) - np.maximum(idx, lo), 0.0, 1.0)
    return float(np.sum(w * v) / np.sum(w))


def bootstrap_ci(xs: Sequence[float], *, seed: int = 0, level: float = 0.95,
                 samples: int = BOOTSTRAP_SAMPLES) -> tuple[float | None, float | None]:
    """A percentile bootstrap interval of the IQM: resample the values with replacement
    ``samples`` times (seeded), take the IQM of each, and the central ``level`` of those."""
    v = np.asarray(xs, dtype=float)
    if len(v) == 0:
        return None, None
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(v), size=(samples, len(v)))
    stats = np.array([iqm(v[d]) for d in draws])
    tail = (1.0 - level) / 2.0
    return float(np.quantile(stats, tail)), float(np.quantile(stats, 1.0 - tail))
