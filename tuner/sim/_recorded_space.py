"""A curve set's hyperparameter space, read from its recorded configurations, and the nearest
recorded configuration to a sampled point: what lets a simulated sweep's sampler learn.

Each column of the configurations that varies is a dimension: numeric columns a range (log
scale where it spans two decades or more and its values look drawn on that scale, integer
where every value is whole), text columns
(and columns some configurations lack) a choice. A sampled point replays the recorded
configuration closest to it: numeric columns scaled to [0, 1] (on the log scale where the range
is), a categorical column 1 apart where it differs. The peers of the search benchmark see the
same space and the same rule (``benchmarks/_search_tasks.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

# A numeric column may be searched on a log scale when its largest value is this many times
# its smallest (positive) one.
LOG_SPAN = 100.0


def _log_scaled(values: Sequence[float]) -> bool:
    """Whether a positive column spanning two decades or more was drawn on a log scale: its
    median sits nearer the middle of the range on the log scale than on the linear one (the
    recorded configurations are draws from the space, so the scale they look uniform on is
    the space's)."""
    lo, hi = min(values), max(values)
    if not (lo > 0 and hi / lo >= LOG_SPAN):
        return False
    mid = float(np.median(values))
    linear = (mid - lo) / (hi - lo)
    logged = (math.log(mid) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return abs(logged - 0.5) < abs(linear - 0.5)


@dataclass(frozen=True)
class Hyperparameter:
    """One column of a task's configurations: numeric (``low``..``high``, ``log`` when its
    values were drawn on a log scale, ``int`` when every value is whole) or categorical."""

    name: str
    kind: str                     # "float" | "int" | "categorical"
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[str, ...] = ()

    def distribution(self) -> BaseDistribution:
        """The dimension as an Optuna distribution."""
        if self.kind == "categorical":
            return CategoricalDistribution(list(self.choices))
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log)
        return FloatDistribution(self.low, self.high, log=self.log)

    def cast(self, value: Any) -> Any:
        """A recorded value as the dimension declares it (a missing number: ``low``)."""
        if self.kind == "categorical":
            return str(value)
        if value is None:
            return int(self.low) if self.kind == "int" else float(self.low)
        return int(value) if self.kind == "int" else float(value)


def hyperparameters(curves: Any) -> tuple[Hyperparameter, ...]:
    """The columns of the set's configurations (``curves.params``) that vary, typed from
    their values."""
    ids = curves.config_ids()
    rows = [curves.params(c) for c in ids]
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    out = []
    for name in names:
        vals = [row.get(name) for row in rows]
        present = [v for v in vals if v is not None]
        if len(set(map(str, present))) < 2:
            continue
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in present)
        if not numeric or len(present) < len(vals):
            out.append(Hyperparameter(name, "categorical",
                                      choices=tuple(sorted(set(map(str, vals))))))
            continue
        lo, hi = float(min(present)), float(max(present))
        whole = all(float(v).is_integer() for v in present)
        out.append(Hyperparameter(name, "int" if whole else "float", lo, hi,
                                  log=_log_scaled([float(v) for v in present])))
    return tuple(out)


def recorded_space(curves: Any) -> dict[str, BaseDistribution]:
    """The set's hyperparameter space as Optuna distributions (empty when no column varies)."""
    return {h.name: h.distribution() for h in hyperparameters(curves)}


def encode(hps: Sequence[Hyperparameter], rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Rows of hyperparameters as points where squared distance is the nearness rule's."""
    out = np.zeros((len(rows), 0))
    for h in hps:
        if h.kind == "categorical":
            cols = np.array([[float(str(r[h.name]) == ch) for ch in h.choices] for r in rows])
            cols = cols.reshape(len(rows), len(h.choices)) * math.sqrt(0.5)  # differ: 1 apart
        else:
            v = np.array([float(r[h.name]) for r in rows])
            lo, hi = h.low, h.high
            if h.log:
                v, lo, hi = np.log(v), math.log(lo), math.log(hi)
            cols = ((v - lo) / (hi - lo))[:, None]
        out = np.hstack([out, cols])
    return out


class NearestConfig:
    """Maps a sampled point of :func:`recorded_space` to the recorded configuration closest to
    it (the first in ``config_ids`` order among equally close ones)."""

    def __init__(self, curves: Any, hps: Sequence[Hyperparameter] | None = None) -> None:
        self.hyperparameters = tuple(hyperparameters(curves) if hps is None else hps)
        self.config_ids = list(curves.config_ids())
        self.rows = [{h.name: h.cast(curves.params(c).get(h.name))
                      for h in self.hyperparameters} for c in self.config_ids]
        self._matrix = encode(self.hyperparameters, self.rows)
        self._memo: dict[tuple[Any, ...], int] = {}

    def index(self, params: Mapping[str, Any]) -> int:
        """The position in ``config_ids`` of the configuration nearest to ``params``."""
        key = tuple(params[h.name] for h in self.hyperparameters)
        if key not in self._memo:
            x = encode(self.hyperparameters, [params])[0]
            self._memo[key] = int(np.argmin(np.nansum((self._matrix - x) ** 2, axis=1)))
        return self._memo[key]

    def __call__(self, params: Mapping[str, Any]) -> str:
        """The id of the configuration nearest to ``params``."""
        return self.config_ids[self.index(params)]
