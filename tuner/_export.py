"""A stored sweep written as an Optuna study, for ``optuna.load_study`` and ``optuna-dashboard``.

Each trial becomes one ``FrozenTrial`` (``optuna.trial.create_trial``) with its params and the
sweep's distributions, its metric by step as intermediate values, its state and its usage as
user attributes. States map as Optuna would have recorded them: completed -> COMPLETE,
pruned -> PRUNED (its value the metric at the rung where it stopped, as Optuna gives a pruned
trial its last intermediate value), stopped (the sweep ended first) -> PRUNED too, failed ->
FAIL, running and paused -> RUNNING (``add_trials`` takes an unfinished trial; WAITING would
be run again by a later ``study.optimize``). Fixed values of the space are params with a
one-value ``CategoricalDistribution``, so the study's ``best_params`` is what the trainable
was given. The whole study is checked in memory first, so a refused export writes nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner._errors import ConfigError
from tuner._store import STORE_NAME, Store
from worker.records import TrialState

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

# Room for a traceback's last lines in a failed trial's user attributes.
_ERROR_CHARS = 2000


def export_optuna(experiment_dir: str | Path, storage: str | BaseStorage, *,
                  study_name: str | None = None, overwrite: bool = False) -> optuna.Study:
    """Write the experiment in ``experiment_dir`` to ``storage`` as an Optuna study.

    ``storage`` is an Optuna storage URL (``sqlite:///optuna.db``) or storage object;
    ``study_name`` defaults to the experiment's id (``elastune status``'s ``experiment``).
    The direction is the sweep's ``mode``. A study of that name already in ``storage`` is
    refused (:class:`ConfigError` on ``study_name``) unless ``overwrite=True``, which deletes
    it first. Works on a running sweep too: its unfinished trials are RUNNING.

    Example:
        >>> import optuna
        >>> from tuner import export_optuna
        >>> study = export_optuna("experiments/digits-mlp-20261202-1",
        ...                       "sqlite:///optuna.db")  # doctest: +SKIP
        >>> optuna.load_study(study_name=study.study_name,
        ...                   storage="sqlite:///optuna.db").best_params  # doctest: +SKIP
    """
    import optuna

    folder = Path(experiment_dir)
    if not (folder / STORE_NAME).is_file():
        raise ConfigError("experiment_dir", f"{folder} holds no experiment ({STORE_NAME} "
                                            "not found)")
    if study_name is not None and (not isinstance(study_name, str) or not study_name.strip()):
        raise ConfigError("study_name", f"must be a non-empty string; got {study_name!r}")
    if not isinstance(overwrite, bool):
        raise ConfigError("overwrite", f"expected true or false; got {overwrite!r}")
    store = Store(folder, readonly=True)
    try:
        exp = store.experiment()
        trials = frozen_trials(store, exp)
    finally:
        store.close()
    name = study_name or exp["id"]
    direction = (optuna.study.StudyDirection.MAXIMIZE if exp["mode"] == "max"
                 else optuna.study.StudyDirection.MINIMIZE)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # Optuna validates each trial as it is added: into memory first, so nothing is half-written.
    checked = optuna.create_study(direction=direction)
    checked.add_trials(trials)
    target = _storage(storage)
    if name in optuna.get_all_study_names(target):
        if not overwrite:
            raise ConfigError("study_name", f"a study named {name!r} is already in the storage; "
                                            "give another name, or overwrite it")
        optuna.delete_study(study_name=name, storage=target)
    study = optuna.create_study(storage=target, study_name=name, direction=direction)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([exp["metric"]])
        for key, value in _study_attrs(exp, folder).items():
            study.set_user_attr(key, value)
        study.add_trials(trials)
    except BaseException:
        optuna.delete_study(study_name=name, storage=target)
        raise
    return study


def _storage(storage: Any) -> BaseStorage:
    import optuna

    if isinstance(storage, optuna.storages.BaseStorage):
        return storage
    if not isinstance(storage, str) or not storage.strip():
        raise ConfigError("storage", "expected an Optuna storage URL such as "
                                     f"sqlite:///optuna.db, or a storage object; got {storage!r}")
    try:
        return optuna.storages.get_storage(storage)
    except Exception as exc:  # sqlalchemy's refusals of a URL, a driver missing, a bad path
        raise ConfigError("storage", f"Optuna cannot open it ({type(exc).__name__}: "
                                     f"{exc})"[:500]) from None


def shown_url(url: str) -> str:
    """A storage URL fit to print: its password masked."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # (not one sqlalchemy parses: nothing in it to hide)
        return url


def _study_attrs(exp: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    return {"elastune_experiment": exp["id"], "elastune_dir": str(folder.resolve()),
            "elastune_state": exp["state"], "metric": exp["metric"],
            "spend_usd": exp["spend_usd"], "cost_budget_usd": exp["cost_budget_usd"],
            "time_budget_s": exp["time_budget_s"], "wall_s": exp["wall_s"]}


def frozen_trials(store: Store, exp: Mapping[str, Any]) -> list[FrozenTrial]:
    """Every trial of the store as an Optuna ``FrozenTrial``, in elastune's trial order."""
    distributions = _distributions(exp["config"])
    steps: dict[str, dict[int, float]] = {}
    for r in store.reports():      # by rowid: a re-run segment's report of a step is later
        if r["value"] is not None and math.isfinite(r["value"]):
            steps.setdefault(r["trial_id"], {})[int(r["step"])] = float(r["value"])
    times: dict[str, tuple[float | None, float | None]] = {}
    for s in store.segments():
        first, last = times.get(s["trial_id"], (None, None))
        if s["started_at"] is not None:
            first = s["started_at"] if first is None else min(first, s["started_at"])
        if s["finished_at"] is not None:
            last = s["finished_at"] if last is None else max(last, s["finished_at"])
        times[s["trial_id"]] = (first, last)
    return [_frozen(row, distributions, steps.get(row["trial_id"], {}),
                    times.get(row["trial_id"], (None, None)))
            for row in store.trial_rows()]


def _distributions(config: Mapping[str, Any]) -> dict[str, BaseDistribution]:
    """The stored sweep's space as Optuna distributions, a fixed value as a one-value choice."""
    from optuna.distributions import BaseDistribution, CategoricalDistribution

    from tuner._space import Grid, parse_space

    out: dict[str, BaseDistribution] = {}
    for name, dim in parse_space(config["space"]).items():
        if isinstance(dim, Grid):
            out[name] = CategoricalDistribution(dim.values)
        elif isinstance(dim, BaseDistribution):
            out[name] = dim
        else:
            out[name] = CategoricalDistribution([dim])
    return out


def _frozen(row: Mapping[str, Any], distributions: Mapping[str, BaseDistribution],
            reports: dict[int, float], times: tuple[float | None, float | None]) -> FrozenTrial:
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState as Optuna
    from optuna.trial import create_trial

    params = json.loads(row["params"])
    dists = {k: distributions.get(k) or CategoricalDistribution([v]) for k, v in params.items()}
    value = row["value"] if row["value"] is not None and math.isfinite(row["value"]) else None
    state = TrialState(row["state"])
    attrs: dict[str, Any] = {"elastune_trial_id": row["trial_id"], "elastune_state": str(state),
                             "gpu_seconds": row["gpu_seconds"], "cost_usd": row["cost_usd"],
                             "last_step": row["last_step"], "bracket": row["bracket"]}
    if state == TrialState.COMPLETED and value is not None:
        kind = Optuna.COMPLETE
    elif state in (TrialState.PRUNED, TrialState.STOPPED):
        kind = Optuna.PRUNED
    elif state in (TrialState.RUNNING, TrialState.PAUSED):
        kind, value = Optuna.RUNNING, None
    else:      # failed, or completed without a value of the metric (as the sampler tells it)
        kind, value = Optuna.FAIL, None
        if row["error"]:
            attrs["error"] = str(row["error"])[-_ERROR_CHARS:]
    trial = create_trial(state=kind, value=value, params=params, distributions=dists,
                         user_attrs=attrs, intermediate_values=reports)
    first, last = times
    trial.datetime_start = _when(first if first is not None else row["created_at"])
    if kind.is_finished():
        trial.datetime_complete = _when(max(x for x in (last, row["updated_at"],
                                                        row["created_at"]) if x is not None))
    return trial


def _when(t: float) -> _dt.datetime:
    # Optuna's own trials carry naive local times (datetime.now()); a simulated sweep's clock
    # starts at 0, so its times are seconds after the epoch.
    return _dt.datetime.fromtimestamp(float(t))
