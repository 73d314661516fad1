"""``simulate()``: the real controller, schedulers, sampler, ledger and store on simulated parts.

A simulated clock, a provider with boot latency, capacity failures and spot preemptions, and an
executor replaying learning curves stand in for the wall clock, the cloud and the workers.
Benchmarks use this to measure the real control code; nothing here decides anything itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from optuna.distributions import IntDistribution

from budgets import Ledger, Plan, ReplanView, ScalingPolicy, SimClock
from cloud import SimInstanceType, SimProvider, uniform_boot
from tuner._controller import Controller, Outcome, RunSpec, Settings
from tuner._sampling import PermutationSampler, Sampler
from tuner._sim_executor import SimExecutor
from tuner._store import Store
from tuner.schedulers import make_scheduler

# Simulated time moves in jumps, so the loop may wait longer per tick than on the wall clock;
# cloud-like reaction time for the budget watchdog (stop segments, terminate VMs).
SIM_SETTINGS = Settings(tick_s=1.0, boot_timeout_s=3600.0, stop_grace_s=30.0, reaction_s=15.0,
                        spend_every_s=10.0, instance_check_s=5.0)


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
) -> SimResult:
    """Run a sweep over ``curves`` (a ``budgets.CurveSet``) in simulated time."""
    clock = SimClock()
    itype = instance_type or SimInstanceType("sim-gpu", slots=max(1, gpus_per_trial),
                                             on_demand_per_hour=1.0, spot_per_hour=0.35)
    provider = SimProvider(clock, types=(itype,), boot_s=boot_s or uniform_boot(),
                           capacity_failure_prob=capacity_failure_prob,
                           preemptions_per_hour=preemptions_per_hour if spot else 0.0, seed=seed)
    executor = SimExecutor(clock, provider, curves, metric=metric, step_noise=step_noise,
                           speedup=speedup, time_scale=time_scale, seed=seed,
                           config_ids=list(curves.config_ids()))
    store = Store(store_path)
    store.create_experiment(experiment_id, experiment_id,
                            {"simulated": getattr(curves, "name", "curves")}, metric, mode,
                            time_budget_s, cost_budget_usd)
    sched = make_scheduler(scheduler.get("type", "asha"), scheduler.get("min_resource", 1),
                           scheduler["max_resource"], scheduler.get("reduction_factor", 3), mode,
                           num_trials)
    ids = list(curves.config_ids())
    space = {"config": IntDistribution(0, len(ids) - 1)}
    spec = RunSpec(experiment_id=experiment_id, trainable="simulated", metric=metric, mode=mode,
                   workers=workers, gpus_per_trial=gpus_per_trial, time_budget_s=time_budget_s,
                   cost_budget_usd=cost_budget_usd, checkpoint_root=Path("/nonexistent"),
                   instance_type=itype.name, spot=spot)
    controller = Controller(
        spec, scheduler=sched, sampler=Sampler(space, PermutationSampler(seed), mode, seed),
        executor=executor,
        provider=provider, ledger=Ledger(cost_budget_usd, billing_minimum_s), store=store,
        clock=clock, settings=settings or SIM_SETTINGS, scaling=scaling,
        replanner=replanner)
    outcome = controller.run()
    wall = outcome.finished_at - outcome.started_at
    return SimResult(
        outcome=outcome, trials=store.trials_frame(), best_value=outcome.best_value,
        spend_usd=outcome.spend_usd, wall_s=wall,
        deadline_met=time_budget_s is None or wall <= time_budget_s + settings_grace(settings),
        budget_respected=cost_budget_usd is None or outcome.spend_usd <= cost_budget_usd + 1e-9,
        store=store)


def settings_grace(settings: Settings | None) -> float:
    """How long after the deadline a sweep may end: stopped segments' grace, then teardown."""
    return (settings or SIM_SETTINGS).stop_grace_s + (settings or SIM_SETTINGS).tick_s
