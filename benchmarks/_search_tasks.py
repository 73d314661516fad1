"""The search benchmark's tasks: which curve sets run, the job and the money each gets, and what
every method sees of a task (its hyperparameters, its step costs, its table's best value).

One ``SearchTask`` holds everything the methods share, so that elastune and every peer replay
the same curves at the same per-step seconds (``CurveSet.cost_s`` of step k-1 to k, times the
task's ``time_scale``), on the same number of workers at the same price.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.planner import ETA, largest_power
from tuner.sim import (
    CurveSet,
    Hyperparameter,
    NearestConfig,
    discover,
    hyperparameters,
    load_curves,
)

MAX_TRIALS = 81          # ASHA's trial count: the largest 3^k <= the task's configs, at most 81
MAX_RESOURCE = 27        # its top rung: the largest 3^k <= the task's steps, at most 27
MIN_FULL_TRIAL_S = 1200.0  # a shorter full trial (median config) is slowed down to this
BUDGET_FRACTIONS = (0.25, 0.5, 1.0)
QUICK_PER_SET = 1        # --quick: the first task of each set (in natural order)
DEFAULT_PER_SET = 40     # otherwise: up to this many per set, evenly spaced


def budget_key(f: float) -> str:
    """``0.25 -> "0.25"``, ``1.0 -> "1"``: the keys the summary uses."""
    return f"{f:g}"


@dataclass
class SearchTask:
    """A task as every method sees it. ``step_s[i, k]``: seconds of step k of config i (k >= 1,
    scaled); ``values[i, k]``: its metric after step k (NaN where none: past a diverged run's
    end, or a hole); ``budgets_usd``: the dollars per budget fraction (set once measured)."""

    name: str
    curves: CurveSet
    num_trials: int
    max_resource: int
    time_scale: float
    hyperparameters: tuple[Hyperparameter, ...]
    config_ids: list[str]
    step_s: np.ndarray
    values: np.ndarray
    best: float                   # the best value anywhere in the table (any config, any step)
    reference: float              # the median over configs of each config's best value
    budgets_usd: dict[str, float] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return self.curves.mode

    @property
    def metric(self) -> str:
        return self.curves.metric

    def regret(self, found: float | None) -> float:
        """Normalized regret of a best value found: ``(best - found) / (best - reference)``
        (sign-flipped for ``min``), clipped to [0, 1]; 1 when nothing was found."""
        if found is None or not math.isfinite(found):
            return 1.0
        span = self.best - self.reference
        if span == 0:
            return 0.0 if found == self.best else 1.0
        return float(min(1.0, max(0.0, (self.best - found) / span)))

    def configs(self) -> list[dict[str, Any]]:
        """Each config's hyperparameters, in ``config_ids`` order, as the space declares them."""
        return [{h.name: h.cast(self.curves.params(c).get(h.name)) for h in
                 self.hyperparameters} for c in self.config_ids]


def make_task(data_dir: Path, name: str) -> SearchTask | None:
    """The task's job (ASHA, eta 3, n trials, rungs to R) and tables; None when it cannot hold
    a halving (fewer than 3 usable configs or steps)."""
    curves = load_curves(data_dir, name)
    ids = curves.config_ids()
    usable = [c for c in ids if curves.last_step(c) > 0]
    n = min(MAX_TRIALS, largest_power(ETA, len(usable)))
    r = min(MAX_RESOURCE, largest_power(ETA, curves.max_step))
    if n < ETA or r < ETA:
        return None
    full = float(np.median([curves.cost_s(c, 0, r) for c in usable]))
    scale = MIN_FULL_TRIAL_S / full if 0 < full < MIN_FULL_TRIAL_S else 1.0
    step_s = np.zeros((len(ids), r + 1))
    values = np.full((len(ids), r + 1), np.nan)
    for i, c in enumerate(ids):
        for k in range(1, r + 1):
            step_s[i, k] = curves.cost_s(c, k - 1, k) * scale
            v = curves.value(c, k)
            values[i, k] = np.nan if v is None else v
    sign = 1.0 if curves.mode == "max" else -1.0
    per_config = [sign * np.nanmax(sign * values[i]) for i in range(len(ids))
                  if np.isfinite(values[i]).any()]
    best = float(sign * np.max(sign * np.array(per_config)))
    return SearchTask(name, curves, n, r, scale, hyperparameters(curves), ids, step_s, values,
                      best, float(np.median(per_config)))


def select_tasks(data_dir: Path, *, quick: bool, per_set: int | None,
                 log: Callable[[str], None]) -> list[SearchTask]:
    """Per set (sorted), its tasks in natural order, evenly spaced: every k-th from the first
    with k = floor(tasks / per_set), then the first ``per_set`` of those, so ``per_set`` of
    them where the set has that many (``quick``: the first of each).
    Tasks that cannot hold a halving are skipped and said so."""
    by_set: dict[str, list[str]] = {}
    for name in discover(data_dir):
        by_set.setdefault(name.split("/", 1)[0], []).append(name)
    want = QUICK_PER_SET if quick else (per_set or DEFAULT_PER_SET)
    out: list[SearchTask] = []
    for set_name in sorted(by_set):
        names = sorted(by_set[set_name], key=_natural)
        step = max(1, len(names) // want)
        for name in names[::step][:want]:
            task = make_task(data_dir, name)
            if task is None:
                log(f"skip {name}: too few configs or steps for a halving with eta {ETA}")
                continue
            out.append(task)
    return out


def _natural(name: str) -> tuple:
    task = name.split("/", 1)[1]
    return (0, int(task), "") if task.isdigit() else (1, 0, task)


def nearest_config(task: SearchTask, proposal: dict[str, Any],
                   cache: dict[str, Any] | None = None) -> int:
    """The index of the tabulated config closest to ``proposal``, by the rule a simulated
    elastune sweep replays with (``tuner.sim.NearestConfig``)."""
    cache = cache if cache is not None else {}
    if "nearest" not in cache:
        cache["nearest"] = NearestConfig(task.curves, task.hyperparameters)
    return int(cache["nearest"].index(proposal))
