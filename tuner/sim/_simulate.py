"""``simulate()``: the real controller, schedulers, sampler, ledger and store on simulated parts.

A simulated clock, a provider with boot latency, capacity failures and spot preemptions, and an
executor replaying learning curves stand in for the wall clock, the cloud and the workers.
Benchmarks use this to measure the real control code; nothing here decides anything itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from optuna.distributions import IntDistribution

from budgets import ScalingPolicy, SimClock
from tuner._controller import Controller, Outcome, Settings
from tuner._errors import ConfigError
from tuner._sampling import PermutationSampler
from tuner._store import Store
from tuner.sim._executor import SimExecutor
from tuner.sim._provider import SimInstanceType, SimProvider, uniform_boot
from tuner.sim._recorded_space import NearestConfig, recorded_space
from tuner.sim._spot_trace import TraceReplay, zone_price_factors
from worker.records import EndReason, ExperimentState

if TYPE_CHECKING:
    from tuner._config import SweepConfig

# Simulated time moves in jumps, so the loop may wait longer per tick than on the wall clock;
# cloud-like reaction time for the budget watchdog (stop segments, terminate VMs).
SIM_SETTINGS = Settings(tick_s=1.0, boot_timeout_s=3600.0, stop_grace_s=30.0, reaction_s=15.0,
                        spend_every_s=10.0, instance_check_s=5.0, heartbeat_timeout_s=120.0)


@dataclass(frozen=True)
class SimFaults:
    """Faults to inject beyond boot latency, capacity failures and spot preemptions (see
    ``SimProvider`` and ``SimExecutor`` for what each does); all off by default."""

    capacity_outages: Sequence[tuple[float, float]] = ()   # (start, end): every launch fails
    never_register_prob: float = 0.0     # a VM's worker never registers
    preemption_storms: Sequence[tuple[float, float]] = ()  # (time, fraction of spot VMs)
    vm_failures_per_hour: float = 0.0    # a VM dies on its own (not a preemption)
    app_error_prob: float = 0.0          # a segment's run raises mid-way
    nan_prob: float = 0.0                # a report's metric is NaN
    worker_losses_per_hour: float = 0.0  # the worker process of a running segment is killed
    worker_restart_s: Callable[[random.Random], float] | float = 30.0
    hang_prob: float = 0.0               # a segment's worker hangs (no heartbeat, no end)
    spot_notice_s: float = 0.0           # warning a spot VM gets before it is taken back


@dataclass
class SimResult:
    outcome: Outcome
    trials: pd.DataFrame
    best_value: float | None
    spend_usd: float
    wall_s: float                # simulated seconds from start to the end of the sweep
    deadline_met: bool
    budget_respected: bool
    store: Store
    provider: SimProvider | None = None
    executor: SimExecutor | None = None


def world(curves: Any, itype: SimInstanceType, *, metric: str, markets: bool,
          boot_s: Callable[[random.Random], float], capacity_failure_prob: float = 0.0,
          preemptions_per_hour: float = 0.0, step_noise: float = 0.0,
          speedup: Callable[[int], float] | None = None, time_scale: float = 1.0,
          seed: int = 0, setup_s: float = 0.0, faults: SimFaults | None = None,
          nearest: NearestConfig | None = None,
          spot_replay: TraceReplay | None = None,
          zone_spot_factor: Mapping[str, float] | None = None,
          ) -> tuple[SimClock, SimProvider, SimExecutor]:
    """The simulated clock, cloud and workers a simulated sweep runs on; ``markets``: some
    instances may be spot (preemptions strike only those); ``nearest``: trials name a point
    of the curves' hyperparameter space, not a configuration; ``spot_replay``: spot capacity
    replayed per zone, each zone's spot price ``zone_spot_factor`` times the type's."""
    clock = SimClock()
    f = faults or SimFaults()
    provider = SimProvider(clock, types=(itype,), boot_s=boot_s,
                           capacity_failure_prob=capacity_failure_prob,
                           preemptions_per_hour=preemptions_per_hour if markets else 0.0, seed=seed,
                           capacity_outages=f.capacity_outages,
                           never_register_prob=f.never_register_prob,
                           storms=f.preemption_storms if markets else (),
                           failures_per_hour=f.vm_failures_per_hour,
                           spot_replay=spot_replay if markets else None,
                           zone_spot_factor=zone_spot_factor)
    executor = SimExecutor(clock, provider, curves, metric=metric, step_noise=step_noise,
                           speedup=speedup, time_scale=time_scale, seed=seed, setup_s=setup_s,
                           config_ids=list(curves.config_ids()), nearest=nearest,
                           app_error_prob=f.app_error_prob, nan_prob=f.nan_prob,
                           worker_losses_per_hour=f.worker_losses_per_hour,
                           worker_restart_s=f.worker_restart_s, hang_prob=f.hang_prob,
                           notice_s=f.spot_notice_s)
    return clock, provider, executor


def run_to_end(controller: Controller, settings: Settings, raise_errors: bool,
               provider: SimProvider, executor: SimExecutor) -> SimResult:
    """Run ``controller`` to its end in simulated time; with ``raise_errors=False`` a sweep the
    controller gave up on comes back failed (reason ``error``), its store kept to inspect."""
    clock, ledger, spec = controller.clock, controller.ledger, controller.spec
    started = clock.now()
    try:
        outcome = controller.run()
    except Exception as exc:
        if raise_errors:
            raise
        end = clock.now()
        best = controller.best()
        outcome = Outcome(ExperimentState.FAILED, EndReason.ERROR, started, end, ledger.spent(end),
                          best[0] if best else None, best[1] if best else None,
                          list(controller.latencies), f"{type(exc).__name__}: {exc}")
    wall = outcome.finished_at - outcome.started_at
    deadline, budget = spec.time_budget_s, spec.cost_budget_usd
    return SimResult(
        outcome=outcome, trials=controller.store.trials_frame(), best_value=outcome.best_value,
        spend_usd=outcome.spend_usd, wall_s=wall,
        deadline_met=deadline is None or wall <= deadline + settings_grace(settings),
        budget_respected=budget is None or outcome.spend_usd <= budget + 1e-9,
        store=controller.store, provider=provider, executor=executor)


def simulate(
    sweep: Any,
    curves: Any,
    *,
    seed: int | None = None,
    faults: SimFaults | None = None,
    boot_s: Callable[[random.Random], float] | None = None,
    capacity_failure_prob: float = 0.0,
    preemptions_per_hour: float = 0.0,
    step_noise: float = 0.0,
    speedup: Callable[[int], float] | None = None,
    time_scale: float = 1.0,
    setup_s: float = 0.0,
    settings: Settings | None = None,
    store_path: str | Path = ":memory:",
    experiment_id: str = "sim",
    raise_errors: bool = True,
    oracle_scaling: ScalingPolicy | None = None,
    spot_traces: TraceReplay | None = None,
    verbose: int | None = 0,
    observer: Callable[[dict[str, Any]], None] | None = None,
    trial_params: Literal["index", "hyperparameters"] = "index",
    **overrides: Any,
) -> SimResult:
    """Run ``sweep`` in simulated time, its trials replaying ``curves`` (a :class:`CurveSet`).

    ``sweep`` is what :func:`tuner.tune` takes (a dict, a sweep.yaml path or a
    ``SweepConfig``; keyword ``overrides`` replace its top-level keys), and it is planned and
    built as ``tune()`` builds it (:func:`tuner._build.build_controller`): only the clock, the
    workers and the cloud are simulated. Its trainable and space are the curves' (each trial
    draws one recorded configuration, without replacement unless ``sampler`` says otherwise);
    ``metric`` and ``mode`` default to the curves'. ``trial_params="hyperparameters"``: the
    space is the curves' hyperparameters instead (:func:`tuner.sim.recorded_space`, read from
    the recorded configurations), each trial replays the recorded configuration nearest to
    its params (:class:`tuner.sim.NearestConfig`), and the sampler is ``tune()``'s unless the
    sweep names one, so a model-based sampler has something to learn from. The simulated
    cloud rents the instance type the sweep's plan picks, at its price; a VM boots in a time
    drawn from the sweep's ``profile.boot_s`` range unless ``boot_s`` draws it.

    The rest describes the world, not the sweep: ``seed`` (also the sweep's, unless it sets
    one), ``faults``, capacity failures, spot preemptions, step-time noise, ``speedup`` of a
    trial on g GPUs, ``time_scale`` of the curves' seconds, ``setup_s`` every segment pays
    before its first step. ``raise_errors=False``: a sweep the controller gave up on comes
    back failed, its store kept. ``oracle_scaling``: a scaling policy no sweep can name, in
    place of a ``provider.scaling: static`` sweep's fixed cluster (which it starts from): a
    benchmark's oracle, such as a cluster sized per stage in hindsight
    (:class:`budgets.StageWorkers`). ``verbose`` and ``observer`` are as for
    :func:`tuner.tune` (its times simulated seconds), but ``verbose`` defaults to 0: a
    benchmark runs many sweeps.
    ``spot_traces``: spot capacity replayed from measured traces
    (:class:`tuner.sim.TraceReplay`) in place of the preemption rate, over the sweep's
    ``provider.zones`` (every zone of the replay when it names none), each at its own spot
    price.

    >>> from tuner.sim import SAMPLE_DIR, discover, load_curves, simulate
    >>> curves = load_curves(SAMPLE_DIR, discover(SAMPLE_DIR)[0], max_configs=27)
    >>> run = simulate({"scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9},
    ...                 "num_trials": 9, "provider": {"type": "local", "workers": 3}},
    ...                curves, seed=0, time_budget=None, cost_budget=10.0)
    >>> str(run.outcome.state), len(run.trials), run.budget_respected
    ('finished', 9, True)
    """
    from tuner._build import Parts, build_controller, shaped
    from tuner._planning import plan_instance
    from tuner._progress import Progress, check_verbose

    check_verbose(verbose)
    if observer is not None and not callable(observer):
        raise ConfigError("observer", "expected a callable(status: dict) or None; got a "
                          f"{type(observer).__name__}")
    spec = simulated_sweep(sweep, curves, seed=seed, trial_params=trial_params, **overrides)
    if oracle_scaling is not None and (spec.provider.follows_plan
                                       or spec.provider.scaling == "release-idle"):
        raise ConfigError("provider.scaling",
                          f"is {spec.provider.scaling or 'plan'!r}, but oracle_scaling "
                          "replaces a fixed cluster: give provider.scaling: static")
    world_seed = seed if seed is not None else spec.seed or 0
    spec, plan, chosen = shaped(spec)
    priced = plan_instance(spec, plan)
    itype = SimInstanceType(priced.name, slots=priced.gpus,
                            on_demand_per_hour=priced.on_demand_per_hour,
                            spot_per_hour=priced.spot_per_hour)
    low, high = spec.profile.boot_range(spec.provider.type)
    replay = None
    if spot_traces is not None:
        zones = spec.provider.zones or ([spec.provider.zone] if spec.provider.zone else None)
        unknown = sorted(set(zones or ()) - set(spot_traces.zones))
        if unknown:
            raise ConfigError("provider.zones", f"names {', '.join(unknown)}, which the spot "
                              f"traces do not hold (they hold {', '.join(spot_traces.zones)})")
        replay = TraceReplay({z: spot_traces.traces[z] for z in zones or spot_traces.zones},
                             offset_s=spot_traces.offset_s,
                             compression=spot_traces.compression)
    clock, provider, executor = world(
        curves, itype, metric=spec.metric, markets=spec.provider.spot is not False,
        boot_s=boot_s or uniform_boot(low, high), capacity_failure_prob=capacity_failure_prob,
        preemptions_per_hour=preemptions_per_hour, step_noise=step_noise, speedup=speedup,
        time_scale=time_scale, seed=world_seed, setup_s=setup_s, faults=faults,
        nearest=NearestConfig(curves) if trial_params == "hyperparameters" else None,
        spot_replay=replay, zone_spot_factor=None if spot_traces is None else
        zone_price_factors(spot_traces.traces, priced.region))
    store = Store(store_path)
    store.create_experiment(experiment_id, spec.name, spec.to_json_dict(), spec.metric,
                            spec.mode, spec.time_budget_s, spec.cost_budget_usd)
    settings = settings or SIM_SETTINGS
    progress = Progress(verbose, f"simulated {experiment_id}", observer)
    parts = Parts(clock=clock, executor=executor, provider=provider, store=store,
                  settings=settings, trainable="simulated",
                  checkpoint_root=Path("/nonexistent"), instance_type=itype.name,
                  observer=progress.observer,
                  experiment_dir=None if str(store_path) == ":memory:"
                  else Path(store.path).parent)
    controller = build_controller(spec, plan, parts, experiment_id=experiment_id,
                                  chosen=chosen)
    if oracle_scaling is not None:
        controller.scaling = oracle_scaling
    with progress:
        return run_to_end(controller, settings, raise_errors, provider, executor)


def simulated_sweep(sweep: Any, curves: Any, *, seed: int | None = None,
                    trial_params: Literal["index", "hyperparameters"] = "index",
                    **overrides: Any) -> SweepConfig:
    """The validated sweep :func:`simulate` runs for these arguments (its trainable and space
    the curves', ``metric``/``mode`` defaulting to theirs, a seeded permutation sampler unless
    the sweep names one or ``trial_params`` is ``"hyperparameters"``): what ``elastune plan``
    would be given, to plan it before a run."""
    from tuner._config import load_sweep

    if trial_params not in ("index", "hyperparameters"):
        raise ValueError(f"trial_params is {trial_params!r}, but must be 'index' or "
                         "'hyperparameters'")

    config = dict(sweep) if isinstance(sweep, Mapping) else sweep
    ids = list(curves.config_ids())
    given = {**overrides}
    if isinstance(config, dict):
        known = {k: getattr(curves, k, None) for k in ("metric", "mode")}
        config = {"name": getattr(curves, "name", "sim").replace("/", "-"),
                  **{k: v for k, v in known.items() if v is not None}, **config}
        given.setdefault("trainable", replayed)
        if trial_params == "hyperparameters":
            space = recorded_space(curves)
            if not space:
                raise ValueError(f"{getattr(curves, 'name', 'the curves')}: no column of the "
                                 "recorded configurations varies, so there is no "
                                 "hyperparameter space; give trial_params='index'")
            given.setdefault("space", space)
        given.setdefault("space", {"config": IntDistribution(0, len(ids) - 1)})
        if seed is not None and "seed" not in config:
            given.setdefault("seed", seed)
    spec = load_sweep(config, **given)
    if "sampler" not in spec.model_fields_set and trial_params == "index":
        world_seed = seed if seed is not None else spec.seed or 0
        spec = spec.model_copy(update={"sampler": PermutationSampler(world_seed)})
    return spec


def replayed(params: dict[str, Any], ctx: Any) -> None:
    """The trainable a simulated sweep names: its segments are replayed from recorded curves by
    the simulated executor, so it never runs."""
    raise RuntimeError("a simulated sweep's trials replay recorded curves; they run only in "
                       "tuner.sim.simulate")


def settings_grace(settings: Settings | None) -> float:
    """How long after the deadline a sweep may end: stopped segments' grace, then teardown."""
    return (settings or SIM_SETTINGS).stop_grace_s + (settings or SIM_SETTINGS).tick_s
