"""From a sweep to a plan: the job shape, runtime profile and instance types a sweep implies,
handed to the planners of ``budgets`` (RubberBand's cost-minimising one when the sweep fixes
``num_trials``, SEER's accuracy-maximising one when it leaves it to the planner).

Spends nothing and starts nothing: no broker, no worker, no VM, and the trainable is not even
imported. ``elastune plan`` prints what :func:`plan_for` returns; ``tune`` can reuse it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from budgets import (
    BABI_LSTM,
    DEFAULT_MARGIN,
    FIRST_STAGE_BOOT_QUANTILE,
    LINEAR,
    RESNET50_CIFAR10,
    RESNET101,
    BootLatency,
    InstanceType,
    JobShape,
    Plan,
    PriceBook,
    Profile,
    Replanner,
    Speedup,
    SpotPolicy,
    choose_instance,
    initial_accuracy_plan,
    plan_cost_min,
    plan_static,
)
from tuner._config import SweepConfig
from tuner._errors import ConfigError
from tuner._space import Grid

SPEEDUP_TABLES: dict[str, Speedup] = {
    "linear": LINEAR,
    "resnet50_cifar10": RESNET50_CIFAR10,
    "babi_lstm": BABI_LSTM,
    "resnet101": RESNET101,
}
DEFAULT_REGION = {"aws": "us-east-1", "gcp": "us-central1"}


def profile_for(sweep: SweepConfig) -> Profile:
    """The runtime profile the sweep's ``profile`` section describes (defaults where it is
    silent; the boot latency's default depends on the provider)."""
    p = sweep.profile
    low, high = p.boot_range(sweep.provider.type)
    return Profile(p.seconds_per_step, setup_s=p.setup_s, restore_s=p.restore_s,
                   checkpoint_s=p.checkpoint_s, boot=BootLatency(low, high),
                   speedup=(SPEEDUP_TABLES[p.speedup] if isinstance(p.speedup, str)
                            else Speedup(p.speedup, name="measured")),
                   step_costs=p.step_costs, pace_quantiles=tuple(p.pace_quantiles.items()),
                   promoted_pace_quantiles=tuple(p.promoted_pace_quantiles.items()))


def shape_for(sweep: SweepConfig, num_trials: int) -> JobShape:
    s = sweep.scheduler
    return JobShape(num_trials, s.min_resource, s.max_resource, s.reduction_factor,
                    s.first_reduction if s.type == "sha" else None, brackets=s.brackets)


def gpus_per_trial(sweep: SweepConfig) -> int:
    """GPUs (worker slots) a trial takes; a CPU-only trial (0 GPUs) still takes one slot."""
    return max(1, sweep.gpus_per_trial)


def instance_types_for(sweep: SweepConfig, book: PriceBook | None = None) -> list[InstanceType]:
    """The instance types the sweep may rent, priced.

    ``local``: one type ``local`` with ``provider.slots`` GPUs at ``provider.price_per_hour``.
    ``aws``/``gcp``: the price book's rows for ``instance_types``/``machine_types`` in the
    region (aws: ``provider.region``, default us-east-1; gcp: ``provider.region`` or the
    ``zone``'s region, default us-central1), or every priced type there when none is named.
    """
    provider = sweep.provider
    if provider.type in ("local", "pool"):
        # (a pool is planned as local workers that each fit a trial, at its price: its
        # members say their own slots when they join)
        slots = (provider.slots if provider.type == "local"
                 else max(provider.slots, sweep.gpus_per_trial))
        return [InstanceType("local", "local", "slot", slots, 0, 0.0, "local",
                             provider.price_per_hour)]
    book = book or PriceBook()
    region = provider.region
    zone = provider.zone or (provider.zones[0] if provider.zones else None)
    if region is None and provider.type == "gcp" and zone:
        region = zone.rsplit("-", 1)[0]
    region = region or DEFAULT_REGION[provider.type]
    named = provider.instance_types if provider.type == "aws" else provider.machine_types
    field = "provider.instance_types" if provider.type == "aws" else "provider.machine_types"
    types = book.types(provider.type, region, min_gpus=1)
    if not types:  # the region is what is wrong, whichever types are named
        where = ("provider.region" if provider.region else "provider.zone" if provider.zone
                 else "provider.zones")
        raise ConfigError(where, f"no priced {provider.type} GPU instance type in {region}")
    if named is not None:
        out = []
        for name in named:
            try:
                out.append(book.get(provider.type, name, region))
            except KeyError as exc:
                raise ConfigError(field, str(exc.args[0])) from None
        types = out
    if isinstance(provider.spot, str):
        # A spot policy buys either market: only types with both prices will do.
        both = [t for t in types if t.spot_per_hour is not None]
        if not both:
            raise ConfigError("provider.spot", f"is {provider.spot!r}, but no instance type "
                              f"the sweep may rent has a spot price in {region}")
        types = both
    return types


def plan_for(sweep: SweepConfig, book: PriceBook | None = None) -> Plan:
    """The plan for ``sweep`` under its own budgets.

    With ``num_trials`` set: the cheapest plan for that many trials that ends within the time
    budget (no time budget: the cheapest plan at all), on the cheapest instance type; it is
    marked infeasible when it would still cost more than the cost budget. With ``num_trials``
    None: the most trials that fit both budgets (:func:`budgets.initial_accuracy_plan`).

    The planner models synchronous successive halving; for ASHA (asynchronous promotions)
    and Hyperband (several brackets; the plan covers the first) it is an approximation.
    """
    provider = sweep.provider
    types = instance_types_for(sweep, book)
    local = provider.type in ("local", "pool")
    profile = profile_for(sweep)
    # Booted as the re-planner's first plan is (the plan a sweep follows): a first stage
    # needs its whole cluster up, so its boot is taken at the 0.9 quantile.
    kwargs = dict(gpus_per_trial=gpus_per_trial(sweep), spot=provider.spot is True and not local,
                  billing_minimum_s=provider.billing_minimum_s,
                  max_workers=provider.workers if local else None,
                  boot_s=profile.boot.quantile(FIRST_STAGE_BOOT_QUANTILE))
    deadline, budget = sweep.time_budget_s, sweep.cost_budget_usd
    policy = spot_policy_for(sweep)

    # A sweep of a given number of trials: the plan keeps the re-planner's margin of the time
    # free (a spot policy's, else the default), as the first plan it follows does; the
    # deadline itself when that cannot be done.
    margin = policy.margin if policy is not None else DEFAULT_MARGIN

    def solve(num_trials: int, by: float | None) -> Plan:
        if local:
            return plan_cost_min(shape_for(sweep, num_trials), profile, types[0], by, **kwargs)
        return choose_instance(shape_for(sweep, num_trials), profile, types, by, **kwargs)

    try:
        if sweep.num_trials is None:
            # The count the sweep will admit at most, as the planner benchmark measures it
            # (late on the profile's estimate alone: the count chosen at the step times
            # under which one trial ends in time, see ``late_only``); its boot at the mean.
            s = sweep.scheduler
            size = space_size(sweep)
            plan = initial_accuracy_plan(s.min_resource, s.max_resource, s.reduction_factor,
                                         profile, types[0] if local else types, deadline,
                                         budget, margin=margin, **shape_choice(sweep),
                                         **({} if size is None else {"max_trials": size}),
                                         **{**kwargs, "boot_s": None})
        elif deadline is not None:
            plan = solve(sweep.num_trials, deadline * (1.0 - margin))
            if not plan.feasible:
                plan = solve(sweep.num_trials, deadline)
        else:
            plan = solve(sweep.num_trials, None)
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError("provider.spot" if kwargs["spot"] else "gpus_per_trial",
                          str(exc)) from None
    if plan.feasible and budget is not None and plan.predicted_cost_usd > budget:
        plan = replace(plan, feasible=False, reason=(
            f"the cheapest plan for {plan.num_trials} trials costs "
            f"{plan.predicted_cost_usd:.4f} USD, more than the cost budget of {budget:g} USD"))
    return replace(plan, inputs={**plan.inputs, "sweep": sweep.name,
                                 "scheduler": sweep.scheduler.type,
                                 "time_budget_s": deadline, "cost_budget_usd": budget,
                                 "spot_policy": None if policy is None else policy.mode})


def shortest_run_s(sweep: SweepConfig) -> tuple[float, str]:
    """The shortest wall time in which the sweep can run anything by its profile, and what it
    is made of: a worker's quickest boot, then one segment of the first rung (setup, the first
    ``min_resource`` steps on one trial's GPUs, checkpoint). A time budget below it ends
    before a single segment could, while its workers are billed; a longer one that the plan
    only runs late is accepted (see :func:`late_only`)."""
    profile = profile_for(sweep)
    steps, gpus = sweep.scheduler.min_resource, gpus_per_trial(sweep)
    boot = profile.boot.low
    segment = profile.segment_seconds(steps, gpus, restore=False)
    extra = profile.setup_s + profile.first_segment_s + profile.checkpoint_s
    how = (f"a worker boots in {_seconds(boot)} s (profile.boot_s), then one trial's first "
           f"rung of {steps} step{'s' if steps != 1 else ''} (scheduler.min_resource) takes "
           f"{_seconds(segment)} s at the profile's {_seconds(profile.seconds_per_step(gpus))}"
           f" s a step on {gpus} GPU{'s' if gpus != 1 else ''} (profile.seconds_per_step)"
           + (f" and {_seconds(extra)} s of setup and checkpoint" if extra else ""))
    return boot + segment, how


def check_time_budget(sweep: SweepConfig, field: str, elapsed_s: float = 0.0) -> None:
    """ConfigError naming ``field`` when the time budget (less ``elapsed_s``, the earlier runs'
    wall time of a resumed sweep) is shorter than :func:`shortest_run_s`."""
    if sweep.time_budget_s is None:
        return
    need, how = shortest_run_s(sweep)
    left = sweep.time_budget_s - elapsed_s
    if need <= left:
        return
    given = (f"the {_seconds(left)} s left of {_seconds(sweep.time_budget_s)} s are too short"
             if elapsed_s else f"{_seconds(sweep.time_budget_s)} s is too short")
    raise ConfigError(field, f"{given}: the sweep needs at least {_seconds(need)} s: {how}; "
                      "give a longer time budget, or a profile with the trainable's real "
                      "step times")


def _seconds(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def space_size(sweep: SweepConfig) -> int | None:
    """How many distinct parameter sets the sweep's space holds (None: unbounded, a float
    dimension): the most trials a planner-chosen count may admit, since the sampler asks
    every set once before it repeats one."""
    size = 1
    for dim in sweep.space.values():
        if isinstance(dim, Grid):
            size *= len(dim.values)
        elif isinstance(dim, CategoricalDistribution):
            size *= len(dim.choices)
        elif isinstance(dim, IntDistribution):
            size *= (dim.high - dim.low) // dim.step + 1
        elif isinstance(dim, BaseDistribution):
            return None
    return size


def late_only(sweep: SweepConfig, plan: Plan) -> bool:
    """Whether ``plan`` (infeasible) misses only the time budget of a sweep of a given number
    of trials: its fastest plan ends after the deadline but fits the cost budget. Such a sweep
    runs that plan rather than being refused: the lateness is the profile's estimate (its
    ``seconds_per_step`` a prior, 1 s when not given), the re-planner learns the real step
    times from the first segments, and the controller ends the sweep at the time budget with
    the best result so far (measured: docs/benchmarks/tuning-log.md#late-on-estimate). A
    sweep whose number of trials the planner chooses runs, likewise, the plan made at the
    largest fraction of the profile's step times under which one trial ends in time
    (``inputs["step_scale"]``; its re-planner starts from that fraction and shrinks the job
    when what it measures does not fit the cost budget). A sweep whose plan is over the cost
    budget even so is still refused."""
    deadline, budget = sweep.time_budget_s, sweep.cost_budget_usd
    if "step_scale" in plan.inputs:     # the count chosen at a fraction of the step times
        return (deadline is not None
                and (budget is None or plan.predicted_cost_usd <= budget))
    return (sweep.num_trials is not None and deadline is not None
            and plan.predicted_wall_s > deadline
            and (budget is None or plan.predicted_cost_usd <= budget))


def shape_choice(sweep: SweepConfig) -> dict[str, Any]:
    """:func:`budgets.plan_accuracy_max`'s shape arguments for a sweep whose number of trials
    it chooses: when the sweep leaves the first rung to it too (:func:`may_raise_min_resource`)
    and runs synchronous halving, a first cut of 1/2 at ``min_resource`` (breadth, and a second
    look for the trials a first rung ranks unreliably: see ``plan_accuracy_max``); for ASHA
    (whose promotions are asynchronous) it may start one rung up instead; else the sweep's own
    first cut."""
    s = sweep.scheduler
    if s.brackets > 1:
        return {"brackets": s.brackets}
    if may_raise_min_resource(sweep) and s.type == "sha" and s.first_reduction is None:
        return {"first_reduction": 2}
    if may_raise_min_resource(sweep):
        return {"raise_min_resource": True}
    return {"first_reduction": s.first_reduction} if s.type == "sha" else {}


def may_raise_min_resource(sweep: SweepConfig) -> bool:
    """Whether the planner may choose the first rung too: the sweep leaves both the number of
    trials and ``scheduler.min_resource`` to it (what the user sets is kept), the scheduler
    is one the planner models (Hyperband runs its own brackets, as ASHA with ``brackets`` does),
    and the sampler is not a grid (which runs its whole grid)."""
    s = sweep.scheduler
    return (sweep.num_trials is None and "min_resource" not in s.model_fields_set
            and s.type != "hyperband" and s.brackets == 1 and sweep.sampler != "grid")


def plan_instance(sweep: SweepConfig, plan: Plan, book: PriceBook | None = None
                  ) -> InstanceType:
    """The priced instance type ``plan`` rents (the first of the sweep's when it rents none)."""
    types = instance_types_for(sweep, book)
    name = plan.timeline[0].instance_type if plan.timeline else types[0].name
    return next((t for t in types if t.name == name), types[0])


def cheapest_hourly(sweep: SweepConfig, book: PriceBook | None = None) -> float:
    """The lowest $/h one worker of this sweep can cost (spot where the sweep allows it)."""
    spot = sweep.provider.spot is not False and sweep.provider.type not in ("local", "pool")
    return min(t.hourly(spot, fallback=True) for t in instance_types_for(sweep, book))


def _planner_kwargs(sweep: SweepConfig) -> dict[str, object]:
    local = sweep.provider.type in ("local", "pool")
    return dict(gpus_per_trial=gpus_per_trial(sweep),
                spot=sweep.provider.spot is True and not local,
                billing_minimum_s=sweep.provider.billing_minimum_s,
                max_workers=sweep.provider.workers if local else None)


def replanner_for(sweep: SweepConfig, plan: Plan, book: PriceBook | None = None, *,
                  chosen: bool = False) -> Replanner:
    """The online re-planner for a sweep about to run ``plan``'s shape on its instance type;
    when the planner chose the number of trials, it may shrink it to keep within the cost
    budget (see :class:`budgets.Replanner`). ``chosen`` says the planner chose it although
    neither the sweep nor the plan shows it (a resumed sweep stores the chosen count)."""
    chosen = chosen or sweep.num_trials is None or plan.planner == "accuracy-max"
    policy = spot_policy_for(sweep)
    margin = {} if policy is None else {"margin": policy.margin}
    profile = profile_for(sweep)
    if "step_scale" in plan.inputs:   # planned at a fraction of the profile's step times
        profile = profile.scaled(float(plan.inputs["step_scale"]))
    return Replanner(shape_for(sweep, plan.num_trials), profile,
                     plan_instance(sweep, plan, book), sweep.time_budget_s,
                     cost_budget_usd=sweep.cost_budget_usd if chosen else None,
                     max_trials=space_size(sweep) if chosen else None,
                     **margin, **_planner_kwargs(sweep))


def spot_policy_for(sweep: SweepConfig) -> SpotPolicy | None:
    """The market policy of a sweep whose ``provider.spot`` names one (None: one market)."""
    spot = sweep.provider.spot
    return SpotPolicy(spot) if isinstance(spot, str) and sweep.provider.type != "local" else None


def static_plan_for(sweep: SweepConfig, workers: int, book: PriceBook | None = None,
                    instance: InstanceType | None = None) -> Plan:
    """What the model predicts for a fixed cluster of ``workers`` of ``instance`` (default:
    the sweep's first priced type), stored for planned vs actual when a sweep does not follow
    a plan."""
    if sweep.num_trials is None:
        raise ValueError("static_plan_for needs the sweep's num_trials")
    kwargs = _planner_kwargs(sweep)
    kwargs.pop("max_workers")
    instance = instance or instance_types_for(sweep, book)[0]
    plan = plan_static(shape_for(sweep, sweep.num_trials), profile_for(sweep), instance,
                       workers, deadline_s=sweep.time_budget_s, **kwargs)  # type: ignore[arg-type]
    return replace(plan, inputs={**plan.inputs, "sweep": sweep.name,
                                 "scheduler": sweep.scheduler.type,
                                 "time_budget_s": sweep.time_budget_s,
                                 "cost_budget_usd": sweep.cost_budget_usd})
