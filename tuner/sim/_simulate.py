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
from typing import Any

import pandas as pd
from optuna.distributions import IntDistribution

from budgets import Ledger, Plan, Reallocation, ReplanView, ScalingPolicy, SimClock, SpotPolicy
from tuner._controller import Controller, Outcome, RunSpec, Settings
from tuner._sampling import PermutationSampler, Sampler
from tuner._store import Store
from tuner.schedulers import make_scheduler
from tuner.sim._executor import SimExecutor
from tuner.sim._provider import SimInstanceType, SimProvider, uniform_boot

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


def simulate(
    curves: Any,
    *,
    metric: str,
    mode: str,
    scheduler: Mapping[str, Any],
    num_trials: int | None,
    workers: int,
    time_budget_s: float | None = None,
    cost_budget_usd: float | None = None,
    gpus_per_trial: int = 1,
    instance_type: SimInstanceType | None = None,
    spot: bool = False,
    spot_policy: SpotPolicy | None = None,
    boot_s: Callable[[random.Random], float] | None = None,
    capacity_failure_prob: float = 0.0,
    preemptions_per_hour: float = 0.0,
    step_noise: float = 0.0,
    speedup: Callable[[int], float] | None = None,
    time_scale: float = 1.0,
    seed: int = 0,
    settings: Settings | None = None,
    store_path: str | Path = ":memory:",
    billing_minimum_s: float = 60.0,
    experiment_id: str = "sim",
    scaling: ScalingPolicy | None = None,
    replanner: Callable[[ReplanView], Plan | None] | None = None,
    faults: SimFaults | None = None,
    max_failures: int = 0,
    raise_errors: bool = True,
    reallocation: Reallocation | None = None,
    setup_s: float = 0.0,
    more_brackets: bool = False,
) -> SimResult:
    """Run a sweep over ``curves`` (a :class:`CurveSet`) in simulated time.

    ``faults`` adds the faults of :class:`SimFaults`; ``max_failures`` is how many times a
    trial may fail (its trainable raise) before it is given up, as in a real sweep. With
    ``raise_errors=False`` a sweep the controller gives up on (it has shut down, as a real one
    would) comes back as an outcome with state ``failed``, reason ``error`` and the message,
    so what it left in the store can still be inspected. ``reallocation`` is the controller's
    deadline policy (HyperSched; None: off). ``spot_policy`` picks each launch's market
    (preemptions then strike the spot ones). ``setup_s`` is what every segment pays before its
    first step (starting the trainable, restoring its checkpoint): the restart cost.
    ``more_brackets``: as a sweep whose number of trials the planner chose, start another
    bracket when one finishes with time and budget left (``replanner.next_bracket``; an ASHA
    sweep admits that many more trials).
    """
    clock = SimClock()
    f = faults or SimFaults()
    markets = spot or spot_policy is not None   # some instances may be spot
    itype = instance_type or SimInstanceType("sim-gpu", slots=max(1, gpus_per_trial),
                                             on_demand_per_hour=1.0, spot_per_hour=0.35)
    provider = SimProvider(clock, types=(itype,), boot_s=boot_s or uniform_boot(),
                           capacity_failure_prob=capacity_failure_prob,
                           preemptions_per_hour=preemptions_per_hour if markets else 0.0, seed=seed,
                           capacity_outages=f.capacity_outages,
                           never_register_prob=f.never_register_prob,
                           storms=f.preemption_storms if markets else (),
                           failures_per_hour=f.vm_failures_per_hour)
    executor = SimExecutor(clock, provider, curves, metric=metric, step_noise=step_noise,
                           speedup=speedup, time_scale=time_scale, seed=seed, setup_s=setup_s,
                           config_ids=list(curves.config_ids()),
                           app_error_prob=f.app_error_prob, nan_prob=f.nan_prob,
                           worker_losses_per_hour=f.worker_losses_per_hour,
                           worker_restart_s=f.worker_restart_s, hang_prob=f.hang_prob,
                           notice_s=f.spot_notice_s)
    store = Store(store_path)
    store.create_experiment(experiment_id, experiment_id,
                            {"simulated": getattr(curves, "name", "curves")}, metric, mode,
                            time_budget_s, cost_budget_usd)
    sched = make_scheduler(scheduler.get("type", "asha"), scheduler.get("min_resource", 1),
                           scheduler["max_resource"], scheduler.get("reduction_factor", 3), mode,
                           num_trials, scheduler.get("first_reduction"),
                           scheduler.get("early_promotion", False))
    ids = list(curves.config_ids())
    space = {"config": IntDistribution(0, len(ids) - 1)}
    spec = RunSpec(experiment_id=experiment_id, trainable="simulated", metric=metric, mode=mode,
                   workers=workers, gpus_per_trial=gpus_per_trial, time_budget_s=time_budget_s,
                   cost_budget_usd=cost_budget_usd, checkpoint_root=Path("/nonexistent"),
                   max_failures=max_failures, instance_type=itype.name, spot=spot,
                   spot_policy=spot_policy)
    ledger = Ledger(cost_budget_usd, billing_minimum_s)
    controller = Controller(
        spec, scheduler=sched, sampler=Sampler(space, PermutationSampler(seed), mode, seed),
        executor=executor,
        provider=provider, ledger=ledger, store=store,
        clock=clock, settings=settings or SIM_SETTINGS, scaling=scaling,
        replanner=replanner, reallocation=reallocation, more_brackets=more_brackets)
    started = clock.now()
    try:
        outcome = controller.run()
    except Exception as exc:
        if raise_errors:
            raise
        end = clock.now()
        best = controller.best()
        outcome = Outcome("failed", "error", started, end, ledger.spent(end),
                          best[0] if best else None, best[1] if best else None,
                          list(controller.latencies), f"{type(exc).__name__}: {exc}")
    wall = outcome.finished_at - outcome.started_at
    return SimResult(
        outcome=outcome, trials=store.trials_frame(), best_value=outcome.best_value,
        spend_usd=outcome.spend_usd, wall_s=wall,
        deadline_met=time_budget_s is None or wall <= time_budget_s + settings_grace(settings),
        budget_respected=cost_budget_usd is None or outcome.spend_usd <= cost_budget_usd + 1e-9,
        store=store, provider=provider, executor=executor)


def settings_grace(settings: Settings | None) -> float:
    """How long after the deadline a sweep may end: stopped segments' grace, then teardown."""
    return (settings or SIM_SETTINGS).stop_grace_s + (settings or SIM_SETTINGS).tick_s
