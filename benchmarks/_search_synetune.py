"""Syne Tune as a peer in the search benchmark: its own simulator backend
(``UserBlackboxBackend``) over a tabular blackbox made from the task's curves, its schedulers,
``n_workers`` = W and a stop at the same simulated seconds the dollars buy.

The blackbox (``BlackboxTabular``) holds, per config and step 1 .. R, the metric and the
cumulative seconds (the sum of the task's step seconds), so the backend charges a trial what
the other methods pay per step, and resumes a paused trial from its checkpoint. A run past its
recorded end (a diverged curve) reports the table's worst value at no further cost, since a
tabular blackbox needs a value at every step. Searchers propose points of the task's
hyperparameter space; Syne Tune's own nearest-neighbour surrogate (``add_surrogate`` with a
1-nearest-neighbour regressor) answers each with the closest tabulated config. Syne Tune is
imported lazily: the benchmark runs without it and says why a scheduler did not run.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
from typing import Any

import numpy as np
import pandas as pd

from benchmarks._search_tasks import ETA, SearchTask

# Peer name -> the class in syne_tune.optimizer.legacy_baselines (0.13 / 0.14 API) and
# whether it takes the asynchronous-halving ``type`` (DyHPO sets its own).
SCHEDULERS: dict[str, tuple[str, bool]] = {
    "syne-tune ASHA": ("ASHA", True),
    "syne-tune BOHB": ("BOHB", True),
    "syne-tune ASHA-BORE": ("ASHABORE", True),
    "syne-tune ASHA-CQR": ("ASHACQR", True),
    "syne-tune MOBSTER": ("MOBSTER", True),
    "syne-tune Hyper-Tune": ("HyperTune", True),
    "syne-tune DyHPO": ("DyHPO", False),
}
ELAPSED = "elapsed_time"
RESOURCE = "step"
# A constant of the schedulers' config space naming the step a trial runs to: with it the
# scheduler tells the backend where a trial pauses (Syne Tune's advice for promotion-type
# halving; with ``max_t`` alone a simulated trial runs past its rung before the pause lands,
# which costs it time, and DyHPO asserts on it).
MAX_RESOURCE = "max_step"


def version() -> str | None:
    """The installed Syne Tune's version; None when it cannot be imported."""
    try:
        import syne_tune
    except ImportError:
        return None
    return str(getattr(syne_tune, "__version__", "unknown"))


def import_error() -> str | None:
    """Why Syne Tune cannot run here (None when it can)."""
    try:
        import syne_tune.blackbox_repository  # noqa: F401
        import syne_tune.optimizer.legacy_baselines  # noqa: F401
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def config_space(task: SearchTask) -> dict[str, Any]:
    from syne_tune.config_space import choice, lograndint, loguniform, randint, uniform

    space: dict[str, Any] = {}
    for h in task.hyperparameters:
        if h.kind == "categorical":
            space[h.name] = choice(list(h.choices))
        elif h.kind == "int":
            space[h.name] = (lograndint if h.log else randint)(int(h.low), int(h.high))
        else:
            space[h.name] = (loguniform if h.log else uniform)(h.low, h.high)
    return space


def blackbox(task: SearchTask) -> Any:
    """The task as a Syne Tune blackbox: the table, behind a 1-nearest-neighbour surrogate."""
    from sklearn.neighbors import KNeighborsRegressor
    from syne_tune.blackbox_repository import add_surrogate
    from syne_tune.blackbox_repository.blackbox_tabular import BlackboxTabular
    from syne_tune.config_space import randint

    r = task.max_resource
    sign = 1.0 if task.mode == "max" else -1.0
    worst = float(-sign * np.nanmax(-sign * task.values[:, 1:]))
    values = np.where(np.isfinite(task.values[:, 1:]), task.values[:, 1:], worst)
    elapsed = np.cumsum(task.step_s[:, 1:], axis=1)
    evals = np.stack([values, elapsed], axis=-1)[:, None, :, :]   # (configs, seed, steps, 2)
    bb = BlackboxTabular(
        hyperparameters=pd.DataFrame(task.configs()), configuration_space=config_space(task),
        fidelity_space={RESOURCE: randint(1, r)}, objectives_evaluations=evals,
        fidelity_values=np.arange(1, r + 1), objectives_names=[task.metric, ELAPSED])
    return add_surrogate(bb, surrogate=KNeighborsRegressor(n_neighbors=1))


def run(task: SearchTask, name: str, workers: int, horizon_s: float, seed: int
        ) -> list[tuple[float, float]]:
    """Run Syne Tune's scheduler ``name`` (a key of ``SCHEDULERS``) until ``horizon_s``
    simulated seconds; returns every (time, value) reported, in time order."""
    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
    from syne_tune.blackbox_repository import UserBlackboxBackend
    from syne_tune.constants import ST_TUNER_TIME
    from syne_tune.optimizer import legacy_baselines

    if not task.hyperparameters:
        raise ValueError(f"{task.name}: the configurations have no hyperparameter that varies")
    cls_name, halving = SCHEDULERS[name]
    kwargs: dict[str, Any] = dict(
        metric=task.metric, mode=task.mode, resource_attr=RESOURCE,
        max_resource_attr=MAX_RESOURCE, grace_period=1, random_seed=seed)
    if halving:
        kwargs.update(type="promotion", reduction_factor=ETA)
    space = {**config_space(task), MAX_RESOURCE: task.max_resource}
    scheduler = getattr(legacy_baselines, cls_name)(space, **kwargs)
    backend = UserBlackboxBackend(blackbox=blackbox(task), elapsed_time_attr=ELAPSED,
                                  max_resource_attr=MAX_RESOURCE)
    callback = SimulatorCallback()
    folder = tempfile.mkdtemp(prefix="elastune-search-synetune-")
    saved = os.environ.get("SYNETUNE_FOLDER")
    os.environ["SYNETUNE_FOLDER"] = folder
    quiet = logging.getLogger("syne_tune")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        tuner = Tuner(trial_backend=backend, scheduler=scheduler,
                      stop_criterion=StoppingCriterion(max_wallclock_time=horizon_s),
                      n_workers=workers, sleep_time=0, callbacks=[callback],
                      results_update_interval=1e9, print_update_interval=1e9,
                      save_tuner=False, tuner_name=f"search-{seed}")
        tuner.run()
        frame = callback.dataframe()
    finally:
        quiet.setLevel(level)
        if saved is None:
            os.environ.pop("SYNETUNE_FOLDER", None)
        else:
            os.environ["SYNETUNE_FOLDER"] = saved
        shutil.rmtree(folder, ignore_errors=True)
    if frame.empty:
        return []
    out = [(float(t), float(v)) for t, v in zip(frame[ST_TUNER_TIME], frame[task.metric],
                                               strict=True)
           if t <= horizon_s and math.isfinite(v)]
    return sorted(out)
