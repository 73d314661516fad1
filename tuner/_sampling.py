"""Trial parameters through Optuna's ask/tell interface (TPE by default, random, grid)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from tuner._space import Grid


class _AskTellGridSampler(optuna.samplers.GridSampler):
    """GridSampler whose exhausted grid does not call ``study.stop()``, which only works inside
    ``study.optimize``; here the scheduler's ``num_trials`` ends the sweep."""

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        return None


class PermutationSampler(optuna.samplers.BaseSampler):
    """Draws every integer of an ``IntDistribution`` once, in a seeded random order.

    Random search without replacement over a finite, measured set of configurations (a curve
    set in simulation). Optuna's GridSampler does the same over a categorical, but compares the
    whole choice list on every ask, which is quadratic in the number of configurations.
    """

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._orders: dict[tuple[int, int], list[int]] = {}

    def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
        return {}

    def sample_relative(self, study: Any, trial: Any, search_space: Any) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: Any, trial: Any, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        if not isinstance(param_distribution, IntDistribution):
            raise ValueError(f"space.{param_name}: the permutation sampler draws integers only")
        key = (param_distribution.low, param_distribution.high)
        if key not in self._orders:
            order = list(range(key[0], key[1] + 1))
            self._rng.shuffle(order)
            self._orders[key] = order
        order = self._orders[key]
        return order[trial.number % len(order)]


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return value


class Sampler:
    """Asks Optuna for each new trial's params and tells it how each trial ended.

    Seeded samplers make the sequence of params reproducible for the same order of results.
    """

    def __init__(self, space: Mapping[str, Any], sampler: str | optuna.samplers.BaseSampler,
                 mode: str, seed: int | None) -> None:
        self._dists: dict[str, BaseDistribution] = {}
        self._fixed: dict[str, Any] = {}
        grids: dict[str, list[Any]] = {}
        for name, dim in space.items():
            if isinstance(dim, Grid):
                grids[name] = list(dim.values)
                self._dists[name] = CategoricalDistribution(list(dim.values))
            elif isinstance(dim, BaseDistribution):
                self._dists[name] = dim
            else:
                self._fixed[name] = dim
        if isinstance(sampler, optuna.samplers.BaseSampler):
            chosen = sampler
        elif grids or sampler == "grid":
            chosen = _AskTellGridSampler(grids or self._grid_of(self._dists), seed=seed)
        elif sampler == "random":
            chosen = optuna.samplers.RandomSampler(seed=seed)
        else:
            chosen = optuna.samplers.TPESampler(seed=seed)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(
            direction="maximize" if mode == "max" else "minimize", sampler=chosen)
        self._trials: dict[str, optuna.Trial] = {}
        self._reported: dict[str, set[int]] = {}

    @staticmethod
    def _grid_of(dists: Mapping[str, BaseDistribution]) -> dict[str, list[Any]]:
        grid = {}
        for name, dist in dists.items():
            if not isinstance(dist, CategoricalDistribution):
                raise ValueError(f"space.{name}: the grid sampler needs grid or choice values")
            grid[name] = list(dist.choices)
        return grid

    def ask(self, trial_id: str) -> dict[str, Any]:
        trial = self.study.ask(dict(self._dists))
        self._trials[trial_id] = trial
        params = {k: _jsonable(v) for k, v in trial.params.items()}
        return {**params, **self._fixed}

    def restore(self, trials: list[tuple[str, dict[str, Any], str, float | None,
                                         dict[int, float]]]) -> None:
        """Re-create the study of a resumed sweep: each (trial_id, params, state, value,
        values by step) is asked again with its params fixed (``enqueue_trial``), given its
        reports, and told its end if it ended; paused trials stay open, as before."""
        for trial_id, params, state, value, reports in trials:
            known = {k: v for k, v in params.items() if k in self._dists}
            self.study.enqueue_trial(known, skip_if_exists=False)
            self.ask(trial_id)
            for step in sorted(reports):
                self.report(trial_id, reports[step], step)
            if state in ("completed", "pruned", "failed"):
                self.tell(trial_id, state, value)

    def report(self, trial_id: str, value: float | None, step: int) -> None:
        trial = self._trials.get(trial_id)
        if trial is not None and value is not None and math.isfinite(value):
            reported = self._reported.setdefault(trial_id, set())
            if step not in reported:  # a re-run segment reaches the same rung again
                reported.add(step)
                trial.report(value, step)

    def tell(self, trial_id: str, state: str, value: float | None) -> None:
        trial = self._trials.pop(trial_id, None)
        self._reported.pop(trial_id, None)
        if trial is None:
            return
        if state == "completed" and value is not None and math.isfinite(value):
            self.study.tell(trial, value)
        elif state == "failed" or state == "completed":
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, state=TrialState.PRUNED)
