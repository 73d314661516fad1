"""``tune()``: validate the sweep, set up broker, workers and store, run the controller."""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from budgets import Plan, RealClock, billed
from tuner._build import (
    Parts,
    build_controller,
    fills_idle,
    fixed_plan,
    scheduler_for,
    shaped,
)
from tuner._config import SweepConfig, load_sweep, resolve_trainable
from tuner._controller import Settings
from tuner._errors import ConfigError
from tuner._executor import CeleryExecutor
from tuner._extras import require_for_loggers, require_for_sweep
from tuner._journal import RestoreError, replay
from tuner._lock import ControllerLock
from tuner._planning import (
    cheapest_hourly,
    check_time_budget,
    plan_for,
    plan_instance,
)
from tuner._profiles import PROFILE_SOURCE, TRAINABLE_KEY, trainable_key, with_profile
from tuner._progress import Progress, check_verbose
from tuner._providers import check_cloud_broker, checkpoint_root, open_workers
from tuner._result import TuneResult
from tuner._status import status_document
from tuner._store import STORE_NAME, Store
from worker import BrokerAddress, BrokerURLError, EmbeddedRedis
from worker._broker import check_broker
from worker._checkpoints import checkpoint_steps
from worker.records import EndReason, ExperimentState

log = logging.getLogger(__name__)
_UNSET: Any = object()
DEFAULT_ROOT = "experiments"
STOP_FILE = "STOP"   # ``elastune stop DIR`` creates it; the running sweep stops cleanly
SHAPE_CHOSEN = "planner_chose_num_trials"  # meta key: "1" when the planner chose num_trials


def tune(
    config: Any,
    time_budget: float | str | None = _UNSET,
    cost_budget: float | None = _UNSET,
    *,
    experiment_dir: str | Path | None = None,
    seed: int | None = _UNSET,
    broker_url: str | None = None,
    insecure_broker: bool = False,
    observer: Callable[[dict[str, Any]], None] | None = None,
    verbose: int | None = None,
    resume: bool = False,
    **overrides: Any,
) -> TuneResult:
    """Run a sweep under a time budget and a cost budget; return the best result found.

    ``config`` is the sweep (a dict, a path to a sweep.yaml, or a ``SweepConfig``); keyword
    arguments override its top-level keys. Bad input raises :class:`ConfigError` naming the
    field, before anything is started or written.

    ``resume=True`` with an ``experiment_dir`` that already holds an experiment takes it up
    where it stopped (see :func:`resume`); ``config`` then only supplies a callable trainable
    (the stored sweep is used), and the budgets, if given, replace the stored totals.

    ``broker_url`` (default: an embedded Redis on a private unix socket) must carry a password,
    and use TLS (``rediss://``) unless it is a unix socket or a loopback address;
    ``insecure_broker=True`` accepts one that does not (see ``worker._broker.check_broker``).

    ``verbose``: 0 shows nothing, 1 the live status (trials by state, best so far, spend and
    time against the budgets), 2 also a line per trial event (started, promoted, pruned,
    completed, failed, stopped); None (the default) is 1 on a terminal or in a notebook and 0
    otherwise. The status goes to stderr, or in a notebook to the cell's output, refreshed
    in place. ``observer`` is called with the same status (a dict) as it changes.

    A time budget shorter than the profile says one segment of the first rung takes (a
    worker's boot included) is bad input: ConfigError on ``budget.time``. A sweep that fails
    is returned, not raised (as Ray Tune's ``Tuner.fit`` returns its errors in the result):
    ``result.state == "failed"`` and ``result.message`` says why, when its trainable reports
    without the sweep's metric (the sweep stops at that first report), or when its trials
    fail and none produces a value (it stops once its first max(3, 10 %) trials have all
    failed for good, see ``tuner._failures``). Some trials failing among others that
    produce values is a finished sweep.
    """
    if time_budget is not _UNSET:
        overrides["time_budget"] = time_budget
    if cost_budget is not _UNSET:
        overrides["cost_budget"] = cost_budget
    if seed is not _UNSET:
        overrides["seed"] = seed
    experiment_dir = _dir_argument(experiment_dir)
    _check_arguments(observer=observer, insecure_broker=insecure_broker, resume=resume,
                     verbose=verbose)
    if resume:
        if experiment_dir is None:
            raise ConfigError("experiment_dir", "resume=True needs the experiment directory")
        if (Path(experiment_dir) / STORE_NAME).exists():
            return _resume(Path(experiment_dir), config,
                           _parse_broker(broker_url, insecure_broker), observer, overrides,
                           insecure_broker, verbose)
    sweep = load_sweep(config, **overrides)
    address = _parse_broker(broker_url, insecure_broker)
    require_for_sweep(sweep.provider.type)
    require_for_loggers(sweep.loggers)
    check_cloud_broker(sweep, address)
    located = _locate_trainable(sweep)
    _check_affordable(sweep)
    sweep, source = with_profile(sweep, _root_of(experiment_dir))
    check_time_budget(sweep, "budget.time")
    sweep, plan, chosen = shaped(sweep)
    exp_dir, experiment_id = _experiment_dir(sweep.name, experiment_dir)
    _make_dir(exp_dir)
    with ControllerLock(exp_dir):
        store = Store(exp_dir)
        with store.atomic():
            store.create_experiment(experiment_id, sweep.name, sweep.to_json_dict(),
                                    sweep.metric, sweep.mode, sweep.time_budget_s,
                                    sweep.cost_budget_usd)
            store.set_meta(SHAPE_CHOSEN, "1" if chosen else "0")
            store.set_meta(PROFILE_SOURCE, source)
            key = trainable_key(sweep)
            if key is not None:
                store.set_meta(TRAINABLE_KEY, key)
        return _execute(sweep, plan, located, exp_dir, experiment_id, store, address,
                        observer, insecure_broker=insecure_broker, chosen=chosen,
                        verbose=verbose)


def preview(sweep: SweepConfig, root: str | Path | None = None
            ) -> tuple[Plan, str, str | None]:
    """What ``run`` would plan for ``sweep``, spending nothing: the plan it follows, or for a
    fixed cluster the model's prediction for its ``provider.workers`` workers (what ``run``
    stores as its plan); where the plan's step times come from (see
    :func:`tuner._profiles.with_profile`; ``root``: the experiments root, default
    ``./experiments``); and why ``run`` would refuse its time budget (None: it would not)."""
    sweep, source = with_profile(sweep, _root_of(None) if root is None else Path(root))
    try:
        check_time_budget(sweep, "budget.time")
        too_short = None
    except ConfigError as exc:
        too_short = str(exc)
    sweep, plan, _ = shaped(sweep)
    if sweep.provider.follows_plan:
        return plan, source, too_short
    return fixed_plan(sweep, plan), source, too_short


def _root_of(experiment_dir: str | Path | None) -> Path:
    """The experiments root an experiment directory is in (where earlier runs are found)."""
    return Path(DEFAULT_ROOT) if experiment_dir is None else Path(experiment_dir).parent


def resume(
    experiment_dir: str | Path,
    time_budget: float | str | None = _UNSET,
    cost_budget: float | None = _UNSET,
    *,
    config: Any = None,
    broker_url: str | None = None,
    insecure_broker: bool = False,
    observer: Callable[[dict[str, Any]], None] | None = None,
    verbose: int | None = None,
    **overrides: Any,
) -> TuneResult:
    """Take up a stopped, crashed or finished experiment where it stopped.

    The budgets are totals for the experiment (earlier runs' wall time and spend count
    against them); give larger ones to extend a sweep that used its budgets up, and a larger
    ``num_trials`` to explore further. Finished trials are kept as they are, the scheduler's
    rungs and the sampler's history are rebuilt from the store, and trials that were running
    continue from their last checkpoint. ``config`` supplies a callable trainable when the
    stored one was a callable and no code bundle of it is stored. ``broker_url`` and
    ``insecure_broker`` are as for :func:`tune` (the URL is never stored, so give it again),
    and so are ``observer`` and ``verbose`` (the trials of earlier runs get no event lines).
    """
    if time_budget is not _UNSET:
        overrides["time_budget"] = time_budget
    if cost_budget is not _UNSET:
        overrides["cost_budget"] = cost_budget
    _check_arguments(observer=observer, insecure_broker=insecure_broker, verbose=verbose)
    address = _parse_broker(broker_url, insecure_broker)
    folder = _dir_argument(experiment_dir)
    if folder is None:
        raise ConfigError("experiment_dir", "give the directory of the experiment to resume")
    if not (folder / STORE_NAME).exists():
        raise ConfigError("experiment_dir", f"{folder} holds no experiment ({STORE_NAME} "
                          "not found)")
    return _resume(folder, config, address, observer, overrides, insecure_broker, verbose)


def _resume(exp_dir: Path, config: Any, address: BrokerAddress | None,
            observer: Callable[[dict[str, Any]], None] | None,
            overrides: dict[str, Any], insecure_broker: bool = False,
            verbose: int | None = None) -> TuneResult:
    with ControllerLock(exp_dir):
        store = Store(exp_dir)
        try:
            exp = store.experiment()
            stored = dict(exp["config"])
            stored = _stored_trainable(stored, exp_dir, config)
            stored = _stored_sampler(stored, config, overrides)
            sweep = load_sweep(stored, **overrides)
            prior_usd, elapsed_s = _used_so_far(store, exp)
            # The planner chose the number of trials (it is in the stored config since):
            # the resumed sweep may still shrink it to keep within the cost budget, unless
            # the user now sets it.
            chosen = store.meta(SHAPE_CHOSEN) == "1" and "num_trials" not in overrides
            if _nothing_to_do(sweep, store, exp, chosen):
                if {"time_budget", "cost_budget"} & overrides.keys():
                    _check_room(sweep, prior_usd, elapsed_s)  # a budget given must leave room
                return _idle_result(sweep, store, exp_dir, exp["id"])
            _check_room(sweep, prior_usd, elapsed_s)
            check_time_budget(sweep, "time_budget", elapsed_s)
            require_for_sweep(sweep.provider.type)
            require_for_loggers(sweep.loggers)
            check_cloud_broker(sweep, address)
            _check_journal(sweep, store, overrides)
            located = _locate_trainable(sweep)
            plan = plan_for(sweep)
            with store.atomic():
                store.update_experiment(config=json.dumps(sweep.to_json_dict()),
                                        time_budget_s=sweep.time_budget_s,
                                        cost_budget_usd=sweep.cost_budget_usd,
                                        state=ExperimentState.RUNNING, finished_at=None,
                                        message=None)
                store.set_meta(SHAPE_CHOSEN, "1" if chosen else "0")
        except BaseException:
            store.close()
            raise
        return _execute(sweep, plan, located, exp_dir, exp["id"], store, address, observer,
                        prior=(prior_usd, elapsed_s), insecure_broker=insecure_broker,
                        chosen=chosen, verbose=verbose)


def _nothing_to_do(sweep: SweepConfig, store: Store, exp: dict[str, Any],
                   chosen: bool) -> bool:
    """Whether resuming has no work to run: the earlier run ended cleanly (after a crash,
    instances and segments are left to take over) and the scheduler rebuilt from the journal
    has no trial to admit, none paused to promote and none running. A sweep whose number of
    trials the planner chose may start another bracket (the controller's ``more_brackets``),
    or admit more trials (``fill_idle``): with the budgets it ended on, it asked then and was
    refused, so only larger budgets are work."""
    if exp["state"] == ExperimentState.RUNNING:
        return False
    scheduler = scheduler_for(sweep)
    try:
        replay(scheduler, store.journal())
    except RestoreError:
        return False        # (``_check_journal`` says why)
    if not scheduler.is_finished():
        return False
    if chosen and (sweep.provider.follows_plan or fills_idle(sweep)):
        return exp["message"] == EndReason.DONE and not (
            _larger(sweep.time_budget_s, exp["time_budget_s"])
            or _larger(sweep.cost_budget_usd, exp["cost_budget_usd"]))
    return True


def _larger(new: float | None, old: float | None) -> bool:
    """Whether budget ``new`` leaves more than ``old`` (None: no limit)."""
    return old is not None and (new is None or new > old)


def _idle_result(sweep: SweepConfig, store: Store, exp_dir: Path,
                 experiment_id: str) -> TuneResult:
    """The experiment as it stands, for a resume with nothing to do: nothing is started,
    written or billed."""
    log.warning("nothing to do: every trial of %s has ended (a larger num_trials explores "
                "further)", experiment_id)
    try:
        return _result(sweep, store, exp_dir, experiment_id,
                       checkpoint_root(sweep, experiment_id, exp_dir), [])
    finally:
        store.close()


def _stored_trainable(stored: dict[str, Any], exp_dir: Path, config: Any) -> dict[str, Any]:
    """The stored sweep with a trainable that can run: its import path, the code bundle of a
    callable, or the callable of ``config``."""
    ref = stored.get("trainable")
    if isinstance(ref, str) and not ref.startswith("<"):
        return stored
    given = config.get("trainable") if isinstance(config, dict) else getattr(
        config, "trainable", None)
    if callable(given):
        return {**stored, "trainable": given}
    bundle = exp_dir / "code" / "trainable.pkl"
    if bundle.exists():
        from worker import load_trainable

        return {**stored, "trainable": load_trainable(f"bundle:{bundle}")}
    raise ConfigError("config", f"the stored trainable is {ref}; pass the sweep (with its "
                      "callable trainable) as config=")


def _stored_sampler(stored: dict[str, Any], config: Any,
                    overrides: dict[str, Any]) -> dict[str, Any]:
    """The stored sweep with a sampler that can run: a sampler object (stored by its class
    name only) must be given again, as ``sampler=`` or in ``config``."""
    ref = stored.get("sampler")
    if not (isinstance(ref, str) and ref.startswith("<sampler")) or "sampler" in overrides:
        return stored
    given = config.get("sampler") if isinstance(config, dict) else getattr(
        config, "sampler", None)
    if given is not None and not isinstance(given, str):
        return {**stored, "sampler": given}
    raise ConfigError("sampler", f"the sweep ran with the Optuna sampler {ref[9:-1]}, which is "
                      "not stored; give it again: resume(DIR, sampler=...), or a sampler "
                      "name (tpe, random) to go on with another")


def _used_so_far(store: Store, exp: dict[str, Any]) -> tuple[float, float]:
    """(spend, wall seconds) of the experiment's earlier runs, also after a crash (then from
    the last spend record the controller wrote)."""
    spent = float(exp["spend_usd"] or 0.0)
    wall = exp["wall_s"]
    last = store.query("SELECT ts, spent_usd FROM spend ORDER BY rowid DESC LIMIT 1")
    if last:
        spent = max(spent, float(last[0]["spent_usd"]))
        if wall is None and exp["started_at"] is not None:
            wall = float(last[0]["ts"]) - float(exp["started_at"])
    return spent, float(wall or 0.0)


def _check_room(sweep: SweepConfig, prior_usd: float, elapsed_s: float) -> None:
    if sweep.time_budget_s is not None and elapsed_s >= sweep.time_budget_s:
        raise ConfigError("time_budget", f"the experiment has used {elapsed_s:.0f} s of its "
                          f"{sweep.time_budget_s:.0f} s; give a larger time budget to resume it")
    if sweep.cost_budget_usd is not None:
        minimum = billed(cheapest_hourly(sweep), 0.0, sweep.provider.billing_minimum_s)
        if prior_usd + minimum > sweep.cost_budget_usd:
            raise ConfigError("cost_budget", f"the experiment has spent {prior_usd:.4f} of its "
                              f"{sweep.cost_budget_usd:g} USD, too little is left for one more "
                              "worker; give a larger cost budget to resume it")


def _execute(sweep: SweepConfig, plan: Plan, located: _Located, exp_dir: Path,
             experiment_id: str, store: Store, address: BrokerAddress | None,
             observer: Callable[[dict[str, Any]], None] | None,
             prior: tuple[float, float] | None = None,
             insecure_broker: bool = False, chosen: bool = False,
             verbose: int | None = None) -> TuneResult:
    trainable_spec, code_roots, preload, bundle_fn = located
    if prior is not None and bundle_fn is not None and (exp_dir / "code" /
                                                         "trainable.pkl").exists():
        bundle_fn = None   # a resumed sweep keeps its stored bundle
        trainable_spec = f"bundle:{exp_dir / 'code' / 'trainable.pkl'}"
    embedded = EmbeddedRedis() if address is None else None
    workers = None
    progress = Progress(verbose, f"elastune {experiment_id}", observer)
    try:
        if embedded is not None:
            address = embedded.start()
        assert address is not None
        clock = RealClock()
        workers = open_workers(sweep, address, experiment_id, exp_dir, trainable_spec,
                               code_roots, preload, bundle_fn, plan_instance(sweep, plan).name,
                               clock, insecure_broker=insecure_broker,
                               taken={r["instance_id"] for r in store.instances()})
        parts = Parts(clock=clock, executor=CeleryExecutor(address, experiment_id,
                                                forget_workers=not workers.keep_workers),
                      provider=workers.provider, store=store,
                      settings=Settings(**workers.settings, stop_file=exp_dir / STOP_FILE),
                      trainable=workers.trainable, checkpoint_root=workers.checkpoint_root,
                      instance_type=workers.instance_type, observer=progress.observer,
                      warm=workers.warm, experiment_dir=exp_dir)
        controller = build_controller(sweep, plan, parts, experiment_id=experiment_id,
                                      chosen=chosen, prior=prior or (0.0, 0.0))
        if prior is not None:
            (exp_dir / STOP_FILE).unlink(missing_ok=True)
            controller.restore()     # VMs the earlier run left running are adopted
            progress.seed(controller.snapshot(clock.now()))
        with progress:
            outcome = controller.run()
    finally:
        try:
            if workers is not None:
                workers.close()
        finally:
            if embedded is not None:
                embedded.stop()
    result = _result(sweep, store, exp_dir, experiment_id,
                     workers.checkpoint_root if workers is not None else None,
                     outcome.dispatch_latencies_s)
    store.close()
    return result


def _result(sweep: SweepConfig, store: Store, exp_dir: Path, experiment_id: str,
            checkpoints: str | None, latencies: list[float]) -> TuneResult:
    """The experiment in the store as a :class:`TuneResult`; ``checkpoints``: where its
    trials' checkpoints are (for the best one's)."""
    status = status_document(store, exp_dir)
    best = status["best"] or {}
    best_ckpt = None
    if best.get("trial_id") is not None and checkpoints is not None:
        best_ckpt = latest_checkpoint(f"{checkpoints}/{best['trial_id']}")
    return TuneResult(
        experiment_id=experiment_id, experiment_dir=exp_dir, state=status["state"],
        best_params=best.get("params"), best_value=best.get("value"),
        best_trial_id=best.get("trial_id"), best_checkpoint=best_ckpt,
        trials=store.trials_frame(), spend_usd=status["spend_usd"],
        cost_budget_usd=sweep.cost_budget_usd, wall_s=status["wall_s"],
        time_budget_s=sweep.time_budget_s, deadline_met=bool(status["deadline_met"]),
        budget_respected=status["budget_respected"], plans=store.plans(),
        dispatch_latencies_s=latencies, status=status, message=status["message"])


def latest_checkpoint(location: str) -> Path | str | None:
    """The newest checkpoint file of a trial: a local path, or a URI in object storage."""
    steps = checkpoint_steps(location)
    if not steps:
        return None
    name = f"{location.rstrip('/')}/step-{steps[-1]:06d}.pkl"
    return name if "://" in location else Path(name)


def _check_journal(sweep: SweepConfig, store: Store, overrides: dict[str, Any]) -> None:
    """The resumed sweep's scheduler must take up the journal of the earlier runs (before
    anything is written): e.g. a synchronous halving that has decided a rung cannot admit
    more trials, so a larger ``num_trials`` is refused rather than stored."""
    try:
        replay(scheduler_for(sweep), store.journal())
    except RestoreError as exc:
        if "num_trials" in overrides:
            stored = store.experiment()["config"].get("num_trials")
            raise ConfigError("num_trials", (
                f"is {overrides['num_trials']!r}, but the experiment's {sweep.scheduler.type} "
                f"scheduler cannot take up what it has run with that many trials ({exc}); a "
                "synchronous halving that has decided a rung admits no more trials: keep "
                f"num_trials at {stored!r}, or start a new experiment")) from None
        raise ConfigError("config", f"the experiment's journal does not replay into its "
                          f"scheduler ({exc})") from None


def _parse_broker(broker_url: str | None, insecure: bool = False) -> BrokerAddress | None:
    """The broker the user gave, checked against the one broker policy (``check_broker``);
    None for the embedded one."""
    if broker_url is None:
        return None
    if not isinstance(broker_url, str):
        raise ConfigError("broker_url", "expected a URL such as rediss://:PASSWORD@host:6380/0; "
                          f"got a {type(broker_url).__name__}")
    if any(ord(c) < 32 or ord(c) == 127 for c in broker_url):
        raise ConfigError("broker_url", "contains a control character (NUL, newline, ...)")
    try:
        address = BrokerAddress.parse(broker_url)
        check_broker(address, insecure=insecure)
        return address
    except BrokerURLError as exc:
        raise ConfigError("broker_url", str(exc).partition(": ")[2]) from None
    except ValueError as exc:  # urlsplit's own refusals, e.g. an unclosed IPv6 bracket
        raise ConfigError("broker_url", f"is not a valid URL ({exc})") from None


def _check_arguments(**arguments: Any) -> None:
    """The keyword arguments of ``tune``/``resume`` that are not sweep keys."""
    for name, value in arguments.items():
        if name == "observer":
            if value is not None and not callable(value):
                raise ConfigError(name, "expected a callable(status: dict) or None; "
                                  f"got a {type(value).__name__}")
        elif name == "verbose":
            check_verbose(value)
        elif not isinstance(value, bool):
            raise ConfigError(name, f"expected true or false; got {value!r}"[:200])


# (spec for workers, dirs workers need on sys.path, modules to preload, fn to bundle)
_Located = tuple[str, list[str], list[str], Callable[..., Any] | None]


def _locate_trainable(sweep: SweepConfig) -> _Located:
    """(spec for workers, dirs workers need on sys.path, modules to preload, fn to bundle)."""
    roots = [os.getcwd()]
    if sweep.base_dir is not None:
        roots.append(str(sweep.base_dir))
    target = sweep.trainable
    if isinstance(target, str):
        resolve_trainable(target, roots)
        module_name = target.partition(":")[0]
        return target, _with_root(roots, module_name), [module_name], None
    owner: str | None = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", "")
    if owner and owner != "__main__" and "<locals>" not in qualname:
        try:
            obj: Any = importlib.import_module(owner)
            for part in qualname.split("."):
                obj = getattr(obj, part)
            if obj is target:
                return (f"{owner}:{qualname}", _with_root(roots, owner), [owner], None)
        except (ImportError, AttributeError):
            pass
    # Defined in a notebook, a script's __main__ or a closure: it travels as a code bundle in
    # the experiment directory, never inside a broker message.
    return "", roots, [], target


def _with_root(roots: list[str], module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    file = getattr(module, "__file__", None)
    if file:
        depth = len(module_name.split("."))
        up = depth if file.endswith("__init__.py") else depth - 1
        path = Path(file).resolve().parents[up]
        if str(path) not in roots:
            roots = [*roots, str(path)]
    return roots


def _check_affordable(sweep: SweepConfig) -> None:
    budget = sweep.cost_budget_usd
    if budget is None:
        return
    minimum_s = sweep.provider.billing_minimum_s
    hourly = cheapest_hourly(sweep)
    minimum = billed(hourly, 0.0, minimum_s)
    if minimum > budget:
        raise ConfigError(
            "budget.cost",
            f"{budget} USD does not cover one worker's {minimum_s:.0f} s billing minimum "
            f"({minimum:.4f} USD at {hourly:g} USD/h)")


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_MAX = 255    # bytes in one path component (ext4, xfs, apfs, ntfs)
_PATH_MAX = 4095


def _dir_argument(value: Any) -> Path | None:
    """``experiment_dir`` as a Path; ConfigError for what can name no directory (a NUL, an
    empty string, a component longer than the file system allows, not a path at all)."""
    if value is None:
        return None
    text = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if not isinstance(text, str):
        raise ConfigError("experiment_dir", "expected a directory path (str or os.PathLike); "
                          f"got a {type(value).__name__}")
    if not text.strip():
        raise ConfigError("experiment_dir", f"is empty ({text!r}); give a directory, e.g. "
                          "experiments/my-sweep")
    if "\0" in text:
        raise ConfigError("experiment_dir", "contains a NUL character")
    try:
        encoded = os.fsencode(text)
    except UnicodeError:
        raise ConfigError("experiment_dir", f"cannot be encoded for the file system: "
                          f"{text!r}"[:300]) from None
    path = Path(text)
    longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
    if longest > _NAME_MAX or len(encoded) > _PATH_MAX:
        raise ConfigError("experiment_dir", f"is too long: at most {_NAME_MAX} bytes a "
                          f"component and {_PATH_MAX} in all; got {text!r}"[:300])
    return path


def _make_dir(path: Path) -> None:
    """Create the experiment directory and its missing parents; if that fails, remove what
    was created, so that refused input leaves nothing behind."""
    created: list[Path] = []
    try:
        target = path.resolve()   # ``a/../b`` must not leave an ``a`` behind
        missing = []
        while not target.is_dir():
            missing.append(target)
            if target.parent == target:
                break
            target = target.parent
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:
                if not folder.is_dir():
                    raise
                continue
            created.append(folder)
    except (OSError, RuntimeError) as exc:   # RuntimeError: a symlink loop
        for folder in reversed(created):
            try:
                folder.rmdir()
            except OSError:
                pass
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError("experiment_dir", f"cannot create {path}: {reason}") from None


def _experiment_dir(name: str, experiment_dir: str | Path | None) -> tuple[Path, str]:
    if experiment_dir is not None:
        path = Path(experiment_dir)
        if ".." in path.parts:  # ``new/..`` only exists once ``new`` does: say where it is
            path = path.resolve()
        if (path / STORE_NAME).exists():
            raise ConfigError("experiment_dir",
                              f"{path} already holds an experiment; choose another directory")
        if path.exists() and not path.is_dir():
            raise ConfigError("experiment_dir", f"{path} exists and is not a directory")
        if path.is_dir() and any(path.iterdir()):
            # Its store, checkpoints and logs would mix with files that are not the sweep's
            # (the file system root, a home directory, a repository).
            raise ConfigError("experiment_dir", f"{path} is not empty and holds no experiment; "
                              "give a new or an empty directory")
        return path, _SAFE.sub("-", path.resolve().name) or name
    root = Path(DEFAULT_ROOT)
    stamp = _dt.datetime.now().strftime("%Y%m%d")
    k = 1
    while (root / f"{name}-{stamp}-{k}").exists():
        k += 1
    return root / f"{name}-{stamp}-{k}", f"{name}-{stamp}-{k}"

