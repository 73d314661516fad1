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
from tuner.sim import CurveSet, discover, load_curves

MAX_TRIALS = 81          # ASHA's trial count: the largest 3^k <= the task's configs, at most 81
MAX_RESOURCE = 27        # its top rung: the largest 3^k <= the task's steps, at most 27
MIN_FULL_TRIAL_S = 1200.0  # a shorter full trial (median config) is slowed down to this
BUDGET_FRACTIONS = (0.25, 0.5, 1.0)
QUICK_PER_SET = 1        # --quick: the first task of each set (in natural order)
DEFAULT_PER_SET = 40     # otherwise: up to this many per set, evenly spaced


def budget_key(f: float) -> str:
    """``0.25 -> "0.25"``, ``1.0 -> "1"``: the keys the summary uses."""
    return f"{f:g}"


@dataclass(frozen=True)
class Hyperparameter:
    """One column of a task's configurations: numeric (``low``..``high``, ``log`` when it
    spans two decades or more, ``integer`` when every value is whole) or categorical."""

    name: str
    kind: str                     # "float" | "int" | "categorical"
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[str, ...] = ()


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
        return [{h.name: _cast(h, self.curves.params(c).get(h.name)) for h in
                 self.hyperparameters} for c in self.config_ids]


def _cast(h: Hyperparameter, v: Any) -> Any:
    if h.kind == "categorical":
        return str(v)
    if v is None:
        return int(h.low) if h.kind == "int" else float(h.low)
    return int(v) if h.kind == "int" else float(v)


def hyperparameters(curves: CurveSet) -> tuple[Hyperparameter, ...]:
    """The columns of the task's configurations that vary, typed from their values."""
    ids = curves.config_ids()
    names: dict[str, None] = {}
    for c in ids:
        names.update(dict.fromkeys(curves.params(c)))
    out = []
    for name in names:
        vals = [curves.params(c).get(name) for c in ids]
        present = [v for v in vals if v is not None]
        if len(set(map(str, present))) < 2:
            continue
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
        if not numeric or len(present) < len(vals):
            out.append(Hyperparameter(name, "categorical",
                                      choices=tuple(sorted(set(map(str, vals))))))
            continue
        lo, hi = float(min(present)), float(max(present))
        whole = all(float(v).is_integer() for v in present)
        out.append(Hyperparameter(name, "int" if whole else "float", lo, hi,
                                  log=lo > 0 and hi / lo >= 100.0))
    return tuple(out)


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
    """The index of the tabulated config closest to ``proposal``: numeric columns scaled to
    [0, 1] (log where declared), categorical ones 0 when equal and 1 otherwise."""
    cache = cache if cache is not None else {}
    if "matrix" not in cache:
        cache["matrix"] = _encode(task, task.configs())
    x = _encode(task, [proposal])[0]
    d = np.nansum((cache["matrix"] - x) ** 2, axis=1)
    return int(np.argmin(d))


def _encode(task: SearchTask, rows: list[dict[str, Any]]) -> np.ndarray:
    out = np.zeros((len(rows), 0))
    for h in task.hyperparameters:
        if h.kind == "categorical":
            cols = np.array([[float(str(r[h.name]) == ch) for ch in h.choices] for r in rows])
            cols = cols * math.sqrt(0.5)  # two one-hot columns differ: distance 1
        else:
            v = np.array([float(r[h.name]) for r in rows])
            lo, hi = h.low, h.high
            if h.log:
                v, lo, hi = np.log(v), math.log(lo), math.log(hi)
            cols = ((v - lo) / (hi - lo))[:, None]
        out = np.hstack([out, cols])
    return out
