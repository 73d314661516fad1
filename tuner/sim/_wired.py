"""A simulated sweep wired by hand: the controller on simulated parts with the scaling
policy, re-planner and deadline policy a test gives it, rather than those a sweep's settings
build (:func:`tuner.sim.simulate`, the product's path)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from optuna.distributions import IntDistribution

from budgets import Ledger, Plan, Reallocation, ReplanView, ScalingPolicy, SpotPolicy
from tuner._controller import Controller, RunSpec, Settings
from tuner._sampling import PermutationSampler, Sampler
from tuner._store import Store
from tuner.schedulers import make_scheduler
from tuner.sim._provider import SimInstanceType, uniform_boot
from tuner.sim._simulate import SIM_SETTINGS, SimFaults, SimResult, run_to_end, world


def simulate_wired(
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
    """Run a sweep over ``curves`` in simulated time, on parts the caller wires by hand (a
    scaling policy, a re-planner, a deadline policy): for tests of the controller's parts.
    Sweeps as a user writes them, and every benchmark, go through :func:`tuner.sim.simulate`.

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
    itype = instance_type or SimInstanceType("sim-gpu", slots=max(1, gpus_per_trial),
                                             on_demand_per_hour=1.0, spot_per_hour=0.35)
    clock, provider, executor = world(
        curves, itype, metric=metric, markets=spot or spot_policy is not None,
        boot_s=boot_s or uniform_boot(), capacity_failure_prob=capacity_failure_prob,
        preemptions_per_hour=preemptions_per_hour, step_noise=step_noise, speedup=speedup,
        time_scale=time_scale, seed=seed, setup_s=setup_s, faults=faults)
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
    return run_to_end(controller, settings or SIM_SETTINGS, raise_errors, provider, executor)
