"""From a validated sweep to a ready controller: the one construction path of ``tune()``,
``resume()`` and ``simulate()``.

Everything the controller decides with (scheduler, sampler, ledger, scaling policy, re-planner,
deadline policy) comes from the sweep and its plan here; a run and a simulation differ only in
the :class:`Parts` they inject (clock, executor, provider, store, settings), so a benchmark
measures exactly what a user runs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from budgets import (
    Clock,
    FollowPlan,
    Ledger,
    Plan,
    Reallocation,
    ReleaseIdle,
    Replanner,
    ScalingPolicy,
)
from cloud import Provider, WarmPool
from tuner._config import SweepConfig
from tuner._controller import Controller, RunSpec, Settings
from tuner._errors import ConfigError
from tuner._executor import Executor
from tuner._hooks import Hooks, SweepInfo
from tuner._planning import (
    late_only,
    plan_for,
    plan_instance,
    profile_for,
    replanner_for,
    space_size,
    spot_policy_for,
    static_plan_for,
)
from tuner._sampling import Sampler
from tuner._store import Store
from tuner.schedulers import Admitting, Scheduler, make_scheduler, rung_steps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Parts:
    """What a run injects into the controller: the only things a real sweep and a simulated
    one do not share."""

    clock: Clock
    executor: Executor
    provider: Provider
    store: Store
    settings: Settings
    trainable: str                   # what the workers run: an import path or a code bundle
    checkpoint_root: Path | str      # a folder, or a URI in object storage
    instance_type: str               # the instance type the provider launches
    observer: Callable[[dict[str, Any]], None] | None = None
    warm: WarmPool | None = None     # VMs kept warm between sweeps (a cloud provider)
    # The experiment's folder (where trackers write by default); None: a simulation in memory.
    experiment_dir: Path | None = None


def build_controller(sweep: SweepConfig, plan: Plan, parts: Parts, *, experiment_id: str,
                     chosen: bool = False, prior: tuple[float, float] = (0.0, 0.0)
                     ) -> Controller:
    """The controller that runs ``sweep`` (shaped by :func:`shaped`) from ``plan`` on
    ``parts``. ``chosen``: the planner chose the number of trials (it may start more
    brackets, and an asynchronous sweep on a fixed cluster admits more trials while a worker
    would idle);
    ``prior``: the spend and wall seconds of the experiment's earlier runs."""
    scaling, replanner = scaling_for(sweep, plan, chosen)
    if replanner is None:
        # A fixed cluster: store what the planner predicts for it, for planned vs actual.
        parts.store.add_plan(parts.clock.now(), fixed_plan(sweep, plan).to_json())
    prior_usd, elapsed_s = prior
    spec = RunSpec(
        experiment_id=experiment_id, trainable=parts.trainable, metric=sweep.metric,
        mode=sweep.mode, workers=0 if sweep.provider.follows_plan else sweep.provider.workers,
        gpus_per_trial=sweep.gpus_per_trial, time_budget_s=sweep.time_budget_s,
        cost_budget_usd=sweep.cost_budget_usd, checkpoint_root=parts.checkpoint_root,
        max_failures=sweep.max_failures, instance_type=parts.instance_type,
        spot=sweep.provider.spot is True, spot_policy=spot_policy_for(sweep),
        elapsed_before_s=elapsed_s, segment_timeout_s=sweep.segment_timeout_s)
    return Controller(
        spec, scheduler=scheduler_for(sweep),
        sampler=Sampler(sweep.space, sweep.sampler, sweep.mode, sweep.seed,
                        levels=rung_steps(sweep.scheduler.min_resource,
                                          sweep.scheduler.max_resource,
                                          sweep.scheduler.reduction_factor)),
        executor=parts.executor, provider=parts.provider,
        ledger=Ledger(sweep.cost_budget_usd, sweep.provider.billing_minimum_s,
                      prior_usd=prior_usd),
        store=parts.store, clock=parts.clock, settings=parts.settings,
        observer=parts.observer, scaling=scaling, replanner=replanner,
        reallocation=reallocation_for(sweep, plan),
        more_brackets=chosen and replanner is not None, fill_idle=chosen and fills_idle(sweep),
        max_trials=space_size(sweep) if chosen else None,
        pool_plan=(lambda n: fixed_plan(sweep, plan, n)) if sweep.provider.type == "pool"
        else None, warm=parts.warm, hooks=hooks_for(sweep, parts, experiment_id))


def fills_idle(sweep: SweepConfig) -> bool:
    """Whether the sweep, when the planner chose its number of trials, admits more trials
    while a worker would idle (``PlanFollowing.admit_idle``): asynchronous halving on a fixed
    cluster (whose idle workers are billed anyway) with a cost budget."""
    return (isinstance(scheduler_for(sweep), Admitting) and sweep.cost_budget_usd is not None
            and not sweep.provider.follows_plan and sweep.provider.scaling != "release-idle")


def hooks_for(sweep: SweepConfig, parts: Parts, experiment_id: str) -> Hooks:
    """The sweep's experiment trackers (``loggers``), writing in the experiment's folder
    unless told where."""
    if not sweep.loggers:
        return Hooks()
    from tuner.loggers import make_loggers

    info = SweepInfo(experiment_id=experiment_id, name=sweep.name, metric=sweep.metric,
                     mode=sweep.mode, time_budget_s=sweep.time_budget_s,
                     cost_budget_usd=sweep.cost_budget_usd, config=sweep.to_json_dict(),
                     experiment_dir=parts.experiment_dir)
    return Hooks(make_loggers(sweep.loggers, parts.experiment_dir), parts.store, info)


def shaped(sweep: SweepConfig) -> tuple[SweepConfig, Plan, bool]:
    """The sweep's plan and, when the planner chooses the number of trials, the sweep with
    the shape it chose (and True)."""
    plan = plan_for(sweep)
    chosen = (sweep.num_trials is None and sweep.sampler != "grid"
              and (plan.feasible or late_only(sweep, plan))
              and sweep.scheduler.type != "hyperband")
    if chosen:
        # The planner chooses the shape: the most trials that fit both budgets. (Hyperband
        # runs its canonical brackets, which the planner does not model.)
        sweep = chosen_shape(sweep, plan)
    return sweep, plan, chosen


def chosen_shape(sweep: SweepConfig, plan: Plan) -> SweepConfig:
    """``sweep`` with the shape the planner chose for it: ``plan``'s number of trials and, with
    ``min_resource`` left to it too, its first rung (it may start one rung up) and its first
    cut (synchronous halving may let half of the first stage go on)."""
    s = sweep.scheduler
    first = plan.rungs[0].resource if plan.rungs else s.min_resource
    update: dict[str, Any] = {"min_resource": first} if first != s.min_resource else {}
    if plan.inputs.get("first_reduction") is not None:
        update["first_reduction"] = plan.inputs["first_reduction"]
    scheduler = s.model_copy(update=update) if update else s
    return sweep.model_copy(update={"num_trials": plan.num_trials, "scheduler": scheduler})


def fixed_plan(sweep: SweepConfig, plan: Plan, workers: int | None = None) -> Plan:
    """What the planner predicts for a sweep on a fixed cluster of ``workers`` (default
    ``provider.workers``; a pool's size now, once workers join or leave)."""
    fixed = sweep.model_copy(update={"num_trials": scheduler_for(sweep).total_trials})
    return static_plan_for(fixed, workers or sweep.provider.workers,
                           instance=plan_instance(sweep, plan))


def scheduler_for(sweep: SweepConfig) -> Scheduler:
    s = sweep.scheduler
    return make_scheduler(s.type, s.min_resource, s.max_resource, s.reduction_factor,
                          sweep.mode, num_trials_of(sweep), s.first_reduction,
                          s.early_promotion, s.pasha, s.brackets)


def num_trials_of(sweep: SweepConfig) -> int | None:
    """A grid search runs its whole grid unless told otherwise."""
    if sweep.num_trials is None and sweep.sampler == "grid":
        return math.prod(len(v) for v in sweep.grid_search_space().values())
    return sweep.num_trials


def scaling_for(sweep: SweepConfig, plan: Plan, chosen: bool = False
                ) -> tuple[ScalingPolicy | None, Replanner | None]:
    """Follow the plan (re-planned at rung boundaries and on drift), release idle workers
    (``provider.scaling: release-idle``) or keep a fixed cluster (None). ``chosen``: the
    planner chose the number of trials (see :func:`replanner_for`)."""
    if sweep.provider.scaling == "release-idle":
        return ReleaseIdle(sweep.provider.workers), None
    if not sweep.provider.follows_plan:
        return None, None
    if not plan.feasible:
        if not late_only(sweep, plan):
            raise ConfigError("budget", f"no plan fits the budgets: {plan.reason}")
        log.warning("%s; following %s (%.0f s, %.4f USD), re-planned as real step times "
                    "arrive: the sweep stops at the time budget with the best result so far",
                    plan.reason, "it" if "step_scale" in plan.inputs else "the fastest plan",
                    plan.predicted_wall_s, plan.predicted_cost_usd)
    replanner = replanner_for(sweep, plan, chosen=chosen)
    first = replanner.initial()
    if "step_scale" in plan.inputs:   # stored as made: at a fraction of the step times
        first = replace(first, inputs={**first.inputs, "step_scale": plan.inputs["step_scale"]})
    return FollowPlan(first), replanner


def reallocation_for(sweep: SweepConfig, plan: Plan) -> Reallocation | None:
    """HyperSched's policy when ``scheduler.deadline_policy`` asks for it: a trial may take
    every GPU of its instance; a restart costs the profile's setup, checkpoint and restore
    plus the step it gives up."""
    if sweep.scheduler.deadline_policy != "hypersched":
        return None
    profile = profile_for(sweep)
    return Reallocation(profile.speedup, max_gpus_per_trial=plan_instance(sweep, plan).gpus,
                        restart_s=profile.setup_s + profile.checkpoint_s + profile.restore_s
                        + profile.seconds_per_step(1))
