"""Time: how long a trial segment takes on g GPUs, and how long a new VM takes to be useful.

The planner and the simulator ask a :class:`Profile` what a segment will cost in seconds
(setup + restore + steps at the learned rate divided by the :class:`Speedup` + checkpoint) and
a :class:`BootLatency` how long to launch ahead. The profile learns seconds per step online from
finished segments, and :meth:`Profile.drift` tells the controller when to re-plan.

Hand-written because no maintained library models this: Ray Tune and Syne Tune schedule trials
but do not predict their duration on g GPUs, and the estimators here are a few lines each
(a weighted mean with a prior; piecewise-linear interpolation in log2 g).

Example::

    >>> from budgets import Profile, RESNET50_CIFAR10
    >>> p = Profile(2.0, prior_weight=1, speedup=RESNET50_CIFAR10, setup_s=30)
    >>> p.observe(steps=100, seconds=100.0, gpus=2)   # 1.87 s/step at 1 GPU, seen on 2
    >>> round(p.seconds_per_step(1), 3)
    1.935
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import accumulate, pairwise
from types import MappingProxyType
from typing import Literal, Protocol

import numpy as np

# -- speedup on g GPUs ------------------------------------------------------------------------

@dataclass(frozen=True)
class Speedup:
    """s(g): how many times faster one trial trains on g GPUs than on one.

    Built from measured points ``{g: s(g)}``. Between points s is linear in log2 g; past the
    last point it is held at the last measured value (``beyond="hold"``, the default: no gain
    is assumed that was not measured) or grows in proportion to g at the last point's
    efficiency (``beyond="linear"``). Always s(g) <= g.

    The table must hold s(1) = 1, have integer keys >= 1, and be non-decreasing with
    s(g) <= g at every point.
    """

    table: Mapping[int, float]
    name: str = ""
    beyond: Literal["hold", "linear"] = "hold"

    def __post_init__(self) -> None:
        problems = _speedup_problems(self.table, self.beyond)
        if problems:
            raise ValueError(f"invalid speedup table {dict(self.table)!r}: "
                             + "; ".join(problems))
        # A read-only copy: the shipped constants are shared by every profile.
        object.__setattr__(self, "table", MappingProxyType(
            {int(g): float(s) for g, s in sorted(self.table.items())}))

    def __hash__(self) -> int:
        return hash((tuple(self.table.items()), self.name, self.beyond))

    def __call__(self, gpus: float) -> float:
        if not (isinstance(gpus, int | float) and gpus >= 1):
            raise ValueError(f"gpus is {gpus!r}, but must be a number >= 1")
        points = list(self.table.items())
        g_last, s_last = points[-1]
        if gpus >= g_last:
            s = s_last * gpus / g_last if self.beyond == "linear" else s_last
            return min(s, float(gpus))
        for (g0, s0), (g1, s1) in pairwise(points):
            if g0 <= gpus <= g1:
                frac = (math.log2(gpus) - math.log2(g0)) / (math.log2(g1) - math.log2(g0))
                return min(s0 + frac * (s1 - s0), float(gpus))
        raise AssertionError("unreachable: gpus lies between 1 and the last point")

    def efficiency(self, gpus: float) -> float:
        """s(g) / g: the fraction of g GPUs' worth of work one gets."""
        return self(gpus) / gpus


def _speedup_problems(table: Mapping[int, float], beyond: str) -> list[str]:
    out = []
    if beyond not in ("hold", "linear"):
        out.append(f"beyond is {beyond!r}, but must be 'hold' or 'linear'")
    if not table:
        return out + ["it is empty; it needs at least {1: 1.0}"]
    for g, s in table.items():
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            out.append(f"key {g!r} must be an integer number of GPUs >= 1")
        elif not isinstance(s, int | float) or not math.isfinite(s) or s <= 0:
            out.append(f"s({g}) is {s!r}, but must be a finite number > 0")
        elif s > g + 1e-9:
            out.append(f"s({g}) is {s}, but must be <= {g} (no superlinear speedup)")
    if out:
        return out
    if table.get(1) != 1.0:
        out.append(f"s(1) is {table.get(1)!r}, but must be 1.0")
    items = sorted(table.items())
    for (g0, s0), (g1, s1) in pairwise(items):
        if s1 < s0:
            out.append(f"s({g1}) = {s1} < s({g0}) = {s0}, but s must be non-decreasing")
    return out


# Measured per-trial speedups from HyperSched (Liaw et al., "HyperSched: Dynamic Resource
# Reallocation for Model Development on a Deadline", SoCC 2019).
RESNET50_CIFAR10 = Speedup({1: 1.0, 2: 1.87, 4: 3.42, 8: 5.60}, name="resnet50-cifar10")
BABI_LSTM = Speedup({1: 1.0, 2: 1.62, 4: 2.03, 8: 2.75}, name="babi-lstm")
RESNET101 = Speedup({1: 1.0, 2: 1.89, 4: 3.63, 8: 6.67}, name="resnet101")
# Ideal scaling, s(g) = g: an optimistic bound, and the default when nothing is measured.
LINEAR = Speedup({1: 1.0}, name="linear", beyond="linear")


# -- boot latency -----------------------------------------------------------------------------

class _Uniform(Protocol):
    def uniform(self, low: float, high: float) -> float: ...


@dataclass(frozen=True)
class BootLatency:
    """Seconds from asking for a VM to its worker taking work: uniform on [low, high].

    ``low == high`` is a fixed latency (:meth:`fixed`). The default U(60, 180) s is what the
    simulated provider uses. An instance is callable with an rng, so it can be handed to
    anything that wants ``boot_s(rng) -> float``.
    """

    low: float = 60.0
    high: float = 180.0

    def __post_init__(self) -> None:
        ok = all(isinstance(v, int | float) and math.isfinite(v) for v in (self.low, self.high))
        if not ok or self.low < 0 or self.high < self.low:
            raise ValueError(f"boot latency is low={self.low!r}, high={self.high!r}, but must "
                             "be finite with 0 <= low <= high")

    @classmethod
    def fixed(cls, seconds: float) -> BootLatency:
        return cls(seconds, seconds)

    @classmethod
    def uniform(cls, low: float, high: float) -> BootLatency:
        return cls(low, high)

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2.0

    def quantile(self, q: float) -> float:
        """The latency not exceeded with probability ``q`` (0 <= q <= 1)."""
        if not (0.0 <= q <= 1.0):
            raise ValueError(f"q is {q!r}, but must be 0 <= q <= 1")
        return self.low + q * (self.high - self.low)

    def sample(self, rng: np.random.Generator | _Uniform) -> float:
        """One draw, from a ``numpy.random.Generator`` or a ``random.Random``."""
        if self.low == self.high:
            return float(self.low)
        return float(rng.uniform(self.low, self.high))

    __call__ = sample


# -- the runtime profile ----------------------------------------------------------------------

@dataclass
class Profile:
    """Seconds per training step, learned online, and the fixed costs around a segment.

    The estimate of seconds per step on one GPU is a weighted mean in which the prior counts as
    ``prior_weight`` observations and each observed segment as one (or its ``weight``). An
    observation on g GPUs is scaled back to one GPU by multiplying by s(g).

    Args:
        prior_s_per_step: seconds per step on one GPU before anything is observed.
        prior_weight: how many observations the prior is worth (0: forget it at the first one).
        setup_s: per segment, starting the trainable (imports, data loading).
        restore_s: per segment that resumes from a checkpoint.
        checkpoint_s: per segment, saving the checkpoint at its end.
        first_segment_s: per segment that starts a trial from scratch (does not resume): the
            extra cost of a trial's first steps (e.g. a first epoch that warms caches).
        boot: latency of a new VM (not part of a segment; the autoscaler launches ahead by it).
        speedup: s(g) for one trial on g GPUs.
        window: how many recent observations :meth:`drift` compares with the estimate.
        step_costs: what each of a trial's first steps costs relative to a later one (the
            ``k``-th entry is step ``k + 1``; steps past the table cost 1), from an earlier
            run of the model: a run whose epochs grow cheaper as caches warm and the data
            pipeline settles (YAHPO's LCBench epochs 1-3 take 2-5x a tenth one) is then
            planned stage by stage at what its steps cost, and what a sweep observes is read
            as that shape at its own speed (:meth:`step_weight`). The seconds per step
            (prior, learned) are those of a step past the table. Empty: every step costs the
            same.
        pace_quantiles: how much slower or faster than the mean trial the trials of an earlier
            run trained, as ``((q, pace), ...)``, quantile ``q`` in (0, 1) increasing (e.g.
            ``((0.5, 0.95), (0.9, 1.4), (0.99, 2.1))``): a stage of ``m`` trials whose own
            paces are not known yet is planned to end with a trial at the ``m / (m + 1)``
            quantile (:meth:`slowest_pace`). Empty: trials as alike as the mean.
        promoted_pace_quantiles: the same for promoted trials: how much slower or faster than
            the mean of its stage each resumed segment of an earlier run trained. A trial's
            first segment carries start-up costs every trial pays, which hide how unlike its
            later steps are, and who survives a cut is not drawn alike (a better network is
            often a larger, slower one), so the stages after the first are planned from this
            table where it is given (:meth:`slowest_pace` with ``promoted=True``). Empty:
            :attr:`pace_quantiles` serves for them too.
    """

    prior_s_per_step: float
    prior_weight: float = 1.0
    setup_s: float = 0.0
    restore_s: float = 0.0
    checkpoint_s: float = 0.0
    first_segment_s: float = 0.0
    boot: BootLatency = field(default_factory=BootLatency)
    speedup: Speedup = LINEAR
    window: int = 5
    step_costs: tuple[float, ...] = ()
    pace_quantiles: tuple[tuple[float, float], ...] = ()
    promoted_pace_quantiles: tuple[tuple[float, float], ...] = ()
    _count: int = field(default=0, init=False, repr=False)
    _weight: float = field(default=0.0, init=False, repr=False)
    _total: float = field(default=0.0, init=False, repr=False)
    _recent: deque[float] = field(default_factory=deque, init=False, repr=False)
    _cum: tuple[float, ...] = field(default=(0.0,), init=False, repr=False)

    def __post_init__(self) -> None:
        problems = []
        if not _positive(self.prior_s_per_step):
            problems.append(f"prior_s_per_step is {self.prior_s_per_step!r}, but must be > 0")
        for name in ("prior_weight", "setup_s", "restore_s", "checkpoint_s", "first_segment_s"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                problems.append(f"{name} is {v!r}, but must be a finite number >= 0")
        try:
            self.step_costs = tuple(float(c) for c in self.step_costs)
        except (TypeError, ValueError):
            problems.append(f"step_costs is {self.step_costs!r}, but must be numbers > 0")
        else:
            if not all(math.isfinite(c) and c > 0 for c in self.step_costs):
                problems.append(f"step_costs is {self.step_costs!r}, but must be finite "
                                "numbers > 0")
            # Prefix sums: step_weight is asked per running segment on the controller's tick.
            self._cum = (0.0, *accumulate(self.step_costs))
        for name in ("pace_quantiles", "promoted_pace_quantiles"):
            table = getattr(self, name)
            try:
                pairs = tuple((float(q), float(p)) for q, p in table)
            except (TypeError, ValueError):
                problems.append(f"{name} is {table!r}, but must be (quantile, pace) pairs")
                continue
            setattr(self, name, pairs)
            qs = [q for q, _ in pairs]
            if not all(0 < q < 1 and math.isfinite(p) and p > 0 for q, p in pairs) \
                    or qs != sorted(set(qs)):
                problems.append(f"{name} is {table!r}, but must be (quantile in (0, 1), "
                                "pace > 0) pairs, quantiles increasing")
        if not isinstance(self.window, int) or self.window < 1:
            problems.append(f"window is {self.window!r}, but must be an integer >= 1")
        if not isinstance(self.boot, BootLatency):
            problems.append(f"boot is {self.boot!r}, but must be a BootLatency")
        if not isinstance(self.speedup, Speedup):
            problems.append(f"speedup is {self.speedup!r}, but must be a Speedup")
        if problems:
            raise ValueError("invalid Profile: " + "; ".join(problems))
        self._recent = deque(maxlen=self.window)

    def slowest_pace(self, m: int, *, promoted: bool = False) -> float:
        """The pace (seconds per step over the mean trial's) of the slowest of ``m`` trials
        drawn alike: :attr:`pace_quantiles` (``promoted``: trials of a stage after the first,
        :attr:`promoted_pace_quantiles` where given) at ``m / (m + 1)``, interpolated linearly
        between the quantiles given (the last one's beyond them), never below 1; 1.0 without
        them.

        >>> p = Profile(1.0, pace_quantiles=((0.5, 1.0), (0.9, 1.4)),
        ...             promoted_pace_quantiles=((0.5, 0.9), (0.9, 2.0)))
        >>> p.slowest_pace(9), p.slowest_pace(9, promoted=True), p.slowest_pace(1, promoted=True)
        (1.4, 2.0, 1.0)
        """
        table = self.promoted_pace_quantiles if promoted and self.promoted_pace_quantiles \
            else self.pace_quantiles
        if not table or m < 1:
            return 1.0
        q = m / (m + 1)
        if q <= table[0][0]:
            return max(1.0, table[0][1])
        for (q0, p0), (q1, p1) in zip(table, table[1:], strict=False):
            if q <= q1:
                return max(1.0, p0 + (p1 - p0) * (q - q0) / (q1 - q0))
        return max(1.0, table[-1][1])

    # -- learning ---------------------------------------------------------------------------
    def observe(self, steps: int, seconds: float, gpus: int = 1, weight: float = 1.0) -> None:
        """A segment trained ``steps`` steps in ``seconds`` on ``gpus`` GPUs.

        ``seconds`` is the time spent in the steps only (first report to last), without setup,
        restore or checkpoint, which have their own fields.
        """
        if not (isinstance(steps, int) and steps > 0):
            raise ValueError(f"steps is {steps!r}, but must be an integer > 0")
        if not _positive(seconds):
            raise ValueError(f"seconds is {seconds!r}, but must be > 0")
        if not _positive(weight):
            raise ValueError(f"weight is {weight!r}, but must be > 0")
        one_gpu = seconds / steps * self.speedup(gpus)
        self._total += weight * one_gpu
        self._weight += weight
        self._count += 1
        self._recent.append(one_gpu)

    @property
    def observations(self) -> int:
        """How many segments have been observed."""
        return self._count

    def scaled(self, factor: float) -> Profile:
        """A fresh copy (nothing observed) whose steps and first-segment extra take
        ``factor`` times as long; set-up, restore, checkpoint and boot stay as they are.

        >>> Profile(10.0, first_segment_s=4.0, setup_s=2.0).scaled(0.5).segment_seconds(
        ...     3, restore=False)   # 2 + 2 + 3 x 5
        19.0
        """
        if not _positive(factor):
            raise ValueError(f"factor is {factor!r}, but must be > 0")
        return replace(self, prior_s_per_step=self.prior_s_per_step * factor,
                       first_segment_s=self.first_segment_s * factor)

    # -- predictions ------------------------------------------------------------------------
    def seconds_per_step(self, gpus: float = 1) -> float:
        """Estimated seconds per step for one trial on ``gpus`` GPUs."""
        w = self.prior_weight + self._weight
        one_gpu = (self.prior_weight * self.prior_s_per_step + self._total) / w if w > 0 \
            else self.prior_s_per_step
        return one_gpu / self.speedup(gpus)

    def step_weight(self, start: int, stop: int) -> float:
        """Steps ``start + 1 .. stop`` of a trial, each counted at its ``step_costs`` entry
        (1 past the table): how many later steps' worth of time they take.

        >>> Profile(10.0, step_costs=(3.0, 2.0)).step_weight(0, 4)   # 3 + 2 + 1 + 1
        7.0
        """
        if not (isinstance(start, int) and isinstance(stop, int) and 0 <= start <= stop):
            raise ValueError(f"steps {start!r}..{stop!r} must be ints with 0 <= start <= stop")
        n = len(self.step_costs)
        head = self._cum[min(stop, n)] - self._cum[min(start, n)]
        return float(head + max(0, stop - max(start, n)))

    def segment_seconds(self, steps: int, gpus: float = 1, *, restore: bool = True,
                        start: int = 0) -> float:
        """Estimated wall seconds of a segment of ``steps`` steps from step ``start`` on
        ``gpus`` GPUs.

        setup + restore (if it resumes from a checkpoint, else ``first_segment_s``)
        + :meth:`step_weight` x s_per_step(1) / s(g) + checkpoint. Boot latency is not
        included: it belongs to the VM, not the segment.
        """
        if not (isinstance(steps, int) and steps >= 0):
            raise ValueError(f"steps is {steps!r}, but must be an integer >= 0")
        return (self.setup_s + (self.restore_s if restore else self.first_segment_s)
                + self.step_weight(start, start + steps) * self.seconds_per_step(gpus)
                + self.checkpoint_s)

    def drift(self) -> float:
        """Mean of the last ``window`` observations over the current estimate (1.0 if none).

        Above 1, steps have become slower than the plan assumes; the controller re-plans when
        this leaves a band such as [0.8, 1.25].
        """
        if not self._recent:
            return 1.0
        return (sum(self._recent) / len(self._recent)) / self.seconds_per_step(1)


# Resumed segments a fit needs before it tells a first segment's extra from the steps'.
MIN_RESUMED = 5


def fit_segment_times(segments: Iterable[tuple[float, float, bool]], *,
                      min_resumed: float = MIN_RESUMED) -> tuple[float, float] | None:
    """Seconds per step and the extra seconds of a trial's first segment, fitted to finished
    segments ``(steps, seconds, fresh)`` (``fresh``: it started the trial from scratch;
    ``steps`` may be a :meth:`Profile.step_weight`, then the rate is a later step's).

    Least squares on ``seconds = steps * s_per_step + fresh * first_s``. The two are told apart
    only when fresh and at least ``min_resumed`` resumed segments have been seen (the first
    segments of a wave to end are its quickest: a few are a biased sample); until then (e.g.
    in a sweep's first stage, whose segments are all fresh) ``first_s`` is 0 and every second
    is counted as steps, which over- rather than under-estimates the stages to come.
    ``first_s`` is never negative. None when no segment has trained a step.

    A segment timed at zero still trained its steps and is fitted (a quick segment read on a
    coarse clock: dropping them kept the fitted rate at the first epochs' cost, see
    docs/benchmarks/tuning-log.md#zero-time-segments); only when the rate would then be zero
    are they left out.

    >>> segments = [(1, 20.0, True), (1, 20.0, True), (2, 20.0, False), (6, 60.0, False)]
    >>> [round(v, 6) for v in fit_segment_times(segments, min_resumed=2)]
    [10.0, 10.0]
    """
    rows = [(float(n), float(t), bool(f)) for n, t, f in segments if n > 0 and t >= 0]
    fit = _fit_rows(rows, min_resumed)
    if fit is None or fit[0] <= 0:
        # Nothing but segments timed at zero, or they pull the rate to nothing: without them.
        fit = _fit_rows([r for r in rows if r[1] > 0], min_resumed)
    return fit


def _fit_rows(rows: list[tuple[float, float, bool]],
              min_resumed: float) -> tuple[float, float] | None:
    """:func:`fit_segment_times` on ``(steps, seconds, fresh)`` rows with ``steps > 0``."""
    if not rows or not any(t > 0 for _, t, _ in rows):
        return None
    fresh = [(n, t) for n, t, f in rows if f]
    resumed = [(n, t) for n, t, f in rows if not f]
    if fresh and len(resumed) >= min_resumed:
        x = np.array([[n, 1.0 if f else 0.0] for n, _, f in rows])
        y = np.array([t for _, t, _ in rows])
        (rate, first), *_ = np.linalg.lstsq(x, y, rcond=None)
        if rate > 0 and first >= 0:
            return float(rate), float(first)
        if rate > 0:  # fresh segments no dearer: one rate for all
            return sum(t for _, t, _ in rows) / sum(n for n, _, _ in rows), 0.0
        rate = sum(t for _, t in resumed) / sum(n for n, _ in resumed)
        first = sum(t - n * rate for n, t in fresh) / len(fresh)
        return rate, max(0.0, first)
    return sum(t for _, t, _ in rows) / sum(n for n, _, _ in rows), 0.0


def _positive(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0
