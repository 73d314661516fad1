"""Trial parameters through Optuna's ask/tell interface (TPE by default, random, grid, and
BOHB's multi-fidelity TPE, which learns from the values reported at each rung)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from tuner._multifidelity import MultiFidelityTPESampler
from tuner._space import Grid
from worker.records import (
    TrialState as State,  # the store's word for a trial (TrialState: optuna's)
)


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


# A finite space: asks for a set not asked yet before one is drawn from those left, and the
# largest space listed to draw from (in a larger one a repeat is too rare to be worth it).
_REASKS = 10
_LISTABLE = 100_000


def _values(dist: BaseDistribution) -> Sequence[Any] | None:
    """Every value of a finite dimension (choices, integers); None for a continuous one."""
    if isinstance(dist, CategoricalDistribution):
        return dist.choices
    if isinstance(dist, IntDistribution):
        return range(dist.low, dist.high + 1, dist.step)
    return None


def continued_seed(seed: int, asked: int) -> int:
    """The seed of a resumed sweep's sampler: its own random stream, the same for the same
    seed and number of trials already asked (a fresh sampler on the sweep's seed would
    replay the first run's stream, so its first new trials would repeat the first run's)."""
    return random.Random(f"{seed}:{asked}").getrandbits(32)


class Sampler:
    """Asks Optuna for each new trial's params and tells it how each trial ended.

    Seeded samplers make the sequence of params reproducible for the same order of results.
    In a finite space (choices and integers only) no set is asked twice before every set was
    asked once: a repeat is asked again, then drawn from the sets left.
    """

    def __init__(self, space: Mapping[str, Any], sampler: str | optuna.samplers.BaseSampler,
                 mode: str, seed: int | None, levels: Sequence[int] | None = None) -> None:
        """``levels``: the steps the scheduler's rungs sit at, where ``sampler: bohb`` reads
        the results it learns from (None: every reported step)."""
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
        self._seed = seed
        self._levels = None if levels is None else list(levels)
        # Reseeded on resume: TPE and random draw from a seeded stream. A grid walks its
        # seeded order by trial number, and a given sampler is the caller's: both go on as
        # they are.
        self._reseeded: str | None = None
        if isinstance(sampler, optuna.samplers.BaseSampler):
            chosen = sampler
            if isinstance(sampler, MultiFidelityTPESampler) and sampler.levels is None \
                    and self._levels is not None:
                # Its rungs are the sweep's: a resumed sweep replays every reported step.
                sampler.levels = list(self._levels)
        elif grids or sampler == "grid":
            chosen = _AskTellGridSampler(grids or self._grid_of(self._dists), seed=seed)
        else:
            self._reseeded = sampler if sampler in ("random", "bohb") else "tpe"
            chosen = self._named(self._reseeded, seed, self._levels)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(
            direction="maximize" if mode == "max" else "minimize", sampler=chosen)
        self._trials: dict[str, optuna.Trial] = {}
        self._reported: dict[str, set[int]] = {}
        values = [_values(d) for d in self._dists.values()]
        finite = [v for v in values if v is not None]
        # (ranges, not lists: a wide integer dimension costs nothing until drawn from)
        self._finite = finite if len(finite) == len(values) else None
        self._size = math.prod(map(len, finite)) if self._finite is not None else None
        self._asked: set[tuple[Hashable, ...]] = set()
        self._rng = random.Random(seed)

    @staticmethod
    def _named(name: str, seed: int | None, levels: Sequence[int] | None
               ) -> optuna.samplers.BaseSampler:
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "bohb":
            return MultiFidelityTPESampler(seed=seed, levels=levels)
        return optuna.samplers.TPESampler(seed=seed)

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
        for _ in range(_REASKS):
            if not self._repeats(trial):
                break
            self.study.tell(trial, state=TrialState.FAIL)   # a repeat: never run
            trial = self.study.ask(dict(self._dists))
        else:
            left = self._unasked() if self._repeats(trial) else None
            if left is not None:
                self.study.tell(trial, state=TrialState.FAIL)
                self.study.enqueue_trial(left, skip_if_exists=False)
                trial = self.study.ask(dict(self._dists))
        return self._take(trial_id, trial)

    def _take(self, trial_id: str, trial: optuna.Trial) -> dict[str, Any]:
        self._trials[trial_id] = trial
        params = {k: _jsonable(v) for k, v in trial.params.items()}
        if self._finite is not None:
            self._asked.add(self._key(params))
        return {**params, **self._fixed}

    def _key(self, params: Mapping[str, Any]) -> tuple[Hashable, ...]:
        return tuple(_jsonable(params.get(name)) for name in self._dists)

    def _repeats(self, trial: optuna.Trial) -> bool:
        """Whether ``trial`` repeats a set asked before while some set was never asked."""
        return (self._size is not None and len(self._asked) < self._size
                and self._key(trial.params) in self._asked)

    def _unasked(self) -> dict[str, Any] | None:
        """A set never asked, drawn at random (None: the space is too large to list)."""
        assert self._finite is not None and self._size is not None
        if self._size > _LISTABLE:
            return None
        left = [key for key in itertools.product(*self._finite) if key not in self._asked]
        return dict(zip(self._dists, self._rng.choice(left), strict=True))

    def restore(self, trials: list[tuple[str, dict[str, Any], State, float | None,
                                         dict[int, float]]]) -> None:
        """Re-create the study of a resumed sweep: each (trial_id, params, state, value,
        values by step) is asked again with its params fixed (``enqueue_trial``), given its
        reports, and told its end if it ended; paused trials stay open, as before.

        A seeded TPE or random sampler then continues on :func:`continued_seed`: an enqueued
        trial draws nothing from its stream, so its own seed would replay the first run's."""
        if trials and self._reseeded is not None and self._seed is not None:
            seed = continued_seed(self._seed, len(trials))
            self.study.sampler = self._named(self._reseeded, seed, self._levels)
            self._rng = random.Random(seed)
        for trial_id, params, state, value, reports in trials:
            known = {k: v for k, v in params.items() if k in self._dists}
            self.study.enqueue_trial(known, skip_if_exists=False)
            self._take(trial_id, self.study.ask(dict(self._dists)))
            for step in sorted(reports):
                self.report(trial_id, reports[step], step)
            if state in (State.COMPLETED, State.PRUNED, State.FAILED):
                self.tell(trial_id, state, value)

    def report(self, trial_id: str, value: float | None, step: int) -> None:
        trial = self._trials.get(trial_id)
        if trial is not None and value is not None and math.isfinite(value):
            reported = self._reported.setdefault(trial_id, set())
            if step not in reported:  # a re-run segment reaches the same rung again
                reported.add(step)
                trial.report(value, step)

    def tell(self, trial_id: str, state: State, value: float | None) -> None:
        trial = self._trials.pop(trial_id, None)
        self._reported.pop(trial_id, None)
        if trial is None:
            return
        if state == State.COMPLETED and value is not None and math.isfinite(value):
            self.study.tell(trial, value)
        elif state in (State.FAILED, State.COMPLETED):
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, state=TrialState.PRUNED)
