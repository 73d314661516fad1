"""What the planner saves, measured by replaying learning curves through the real controller.

Every run is a sweep as a user writes it, run by ``tuner.sim.simulate`` (planned and built as
``tune()`` builds it, on a simulated clock, cloud and workers); nothing here wires or
re-implements control logic. Per task of ``--data`` (discovered from the files) and per seed:

- job: synchronous SHA, eta 3, rungs 1/3/9/27 (fewer where the curves are shorter), n = 81
  trials (the largest 3^k <= the task's configs where it has fewer); ``profile: {boot_s: [60,
  180]}`` (the simulated boot's range), step noise +-20 %, the price book's cheapest AWS 1-GPU
  type on demand (``provider.instance_types``), ``billing_minimum_s: 60``, ``max_failures: 0``
  (a diverged curve fails the same way again). Tasks whose full trial (median over configs) is
  shorter than 10 mean boot latencies are slowed down by ``time_scale`` = 1200 s / that.
- deadlines: 1.25x, 1.5x, 3x and 6x the makespan with one worker per trial, *measured* as the
  ``wall_s`` of a fixed cluster of n (``provider: {scaling: static, workers: n}``) with the
  same seed (so it includes one boot latency).
- policies: the planner (the sweep with the time budget, following the planner's plan,
  re-planned by the controller at rung boundaries and when step times drift; its re-plans'
  times count in ``replan_s_p95``); Static-min (the smallest fixed cluster that finishes by the
  deadline, found in hindsight by bisection over 1..n); Static-max (n workers); naive elastic
  (``scaling: release-idle, workers: n``); and a lower bound (the GPU-seconds of the planner
  run's segments at the per-GPU price).
- accuracy: with cost budgets 0.75x, 1x and 1.5x Static-min's cost, the sweep with
  ``num_trials`` left out, as ``elastune run`` runs it (the planner chooses the count with
  ``plan_accuracy_max``: SHA from rung 1 with the best half of the first stage going on;
  ``--accuracy-shape fixed``: ``min_resource: 1``, 1/eta at every rung; re-planned online,
  another bracket while time and budget are left), against ASHA with n trials on the largest
  fixed cluster whose price for the whole deadline fits the budget (at least one worker: where
  not even one fits, the cost budget ends that ASHA sweep early); a win is a best value at
  least as good.
- where each run's bill goes: GPU-seconds booting, busy and idle (``bill`` per run,
  ``details.bill_shares_by_deadline``).

- solve times, per task, for a job of 1,000 trials (the size the targets name):
  ``plan_solve_s_p95`` over its ``plan_cost_min`` plans at the four deadline factors (of the
  planner's own fastest plan), its ``plan_accuracy_max`` plans at the three budget factors and
  its sweeps' first plans; ``replan_s_p95`` over every re-plan, each a whole re-planner call
  as the controller makes it, of the sweeps above and of two replayed sweeps of the
  1,000-trial job (3x deadline, without a cost budget and with 0.75x its plan's cost, which
  the product refuses: no plan for that many trials fits it; skipped with ``--quick``).

A policy "meets the deadline" when its sweep *finished* (outcome ``done``) by the deadline: a
sweep cut off at the deadline ends on time but did not do the job. Static and naive runs do not
see the deadline, so each is run once per (task, seed, cluster) without one (under a cost cap
far above its bill) and compared with every deadline afterwards; a run that finishes before a
deadline is the same run with or without it (the controller reads the deadline only to stop).

    python benchmarks/planner.py [--data DIR] [--quick] [--max-tasks 8] [--seeds 5]
                                 [--jobs N] [--full-fits]
                                 [--profile median|fitted|shaped|carried] [--hindsight]
                                 [--accuracy-shape gentle|fixed] [--early-promotion] [--json]

``--profile carried``: each case's sweeps start from the profile an earlier sweep of the same
task measured (the job on n workers, seed + 1000), as ``profile: {from: DIR}`` takes it;
the summary's ``profile`` says ``carried`` (``cold`` otherwise). ``--hindsight``: each case's
cheapest per-stage cluster is searched as ``benchmarks/hindsight.py`` does, and the summary
gains ``cost_ratio_vs_hindsight_median_by_deadline`` (the planner's bill over it, median over
the cases whose deadline both met; None without the flag); about 13x the simulations.

``--max-tasks`` (default 8) keeps the full run to minutes: tasks are taken round-robin over the
sets in sorted order. Only resumable tasks (cost additive over steps, the job the planner's
profile models) run unless ``--full-fits`` adds those whose every fidelity is a fit from scratch
(which curves are replayed, not a setting of the sweep). Options no sweep can say are gone:
``--straggler`` (the re-planner's allowance; the product's is 0, the old default),
``--brackets one`` (a sweep whose count the planner chooses starts more brackets) and
``--accuracy-shape raise`` (the planner raises the first rung only for ASHA or a sweep with a
first cut of its own, neither the old shape)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from budgets import BootLatency, InstanceType, Plan, PriceBook, Profile  # noqa: E402
from budgets._planner import JobShape, plan_accuracy_max, plan_cost_min  # noqa: E402
from tuner import ConfigError  # noqa: E402
from tuner.sim import (  # noqa: E402
    SimInstanceType,
    SimResult,
    default_data_dir,
    discover,
    load_curves,
    simulate,
    uniform_boot,
)

FACTORS = (1.25, 1.5, 3.0, 6.0)
CARRIED_SEED = 1000           # --profile carried: the earlier sweep's seed is the case's + this
BUDGET_FACTORS = (0.75, 1.0, 1.5)
ETA = 3
MAX_TRIALS = 81
MAX_RESOURCE = 27
THOUSAND = 1000               # the job whose solve times the targets name
BOOT = BootLatency(60.0, 180.0)
BOOTS_PER_TRIAL = 10          # a full trial shorter than this many mean boots is slowed down
STEP_NOISE = 0.2
BILLING_MINIMUM_S = 60.0
# The cost budget of the runs without a deadline (a sweep needs one budget): far above any of
# their bills, so it never stops one.
NO_CAP_USD = 1e6

TARGETS: dict[str, tuple[str, float]] = {
    "1.25": ("<=", 0.50), "1.5": ("<=", 0.65), "3": ("<=", 0.90), "6": ("<=", 1.00),
    "cost_ratio_vs_static_min_max": ("<=", 1.02),
    "cost_ratio_vs_lower_bound_median": ("<=", 1.10),
    "deadline_met_frac": (">=", 0.99),
    "budget_overruns": ("<=", 0),
    "accuracy_win_frac_vs_asha_fixed": (">=", 0.8),
    "plan_solve_s_p95": ("<=", 1.0),
    "replan_s_p95": ("<=", 0.1),
}


def factor_key(f: float) -> str:
    """``1.25 -> "1.25"``, ``3.0 -> "3"``: the keys INTERFACES.md names."""
    return f"{f:g}"


# -- the tasks ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    name: str
    configs: int
    resumable: bool
    num_trials: int           # n
    max_resource: int         # R
    full_trial_s: float       # median over configs of cost_s(c, 0, R), unscaled
    time_scale: float
    s_per_step: float         # the profile's prior: step_seconds_median() * time_scale
    fit_s_per_step: float     # --profile fitted: mean over configs of steps 2..R, per step
    fit_first_s: float        # --profile fitted: mean extra seconds of step 1 over that
    shaped_s_per_step: float  # --profile shaped: the median config's last-stage step
    step_costs: tuple[float, ...]  # --profile shaped: mean cost of steps 1..R, relative


def largest_power(base: int, limit: float) -> int:
    """The largest ``base**k <= limit`` (k >= 0); 0 when ``limit < 1``."""
    if limit < 1:
        return 0
    p = 1
    while p * base <= limit:
        p *= base
    return p


def make_task(data_dir: Path, name: str) -> Task | None:
    """The job shape and time scale of one task; None if it cannot hold a halving."""
    curves = load_curves(data_dir, name)
    usable = [c for c in curves.config_ids() if curves.last_step(c) > 0]
    n = min(MAX_TRIALS, largest_power(ETA, len(usable)))
    r = min(MAX_RESOURCE, largest_power(ETA, curves.max_step))
    if n < ETA or r < ETA:
        return None
    full = float(np.median([curves.cost_s(c, 0, r) for c in usable]))
    scale = (BOOTS_PER_TRIAL * BOOT.mean / full) if 0 < full < BOOTS_PER_TRIAL * BOOT.mean \
        else 1.0
    # A sum of segments grows with the mean, not the median; and some sets' first step carries
    # a start-up cost (the YAHPO surrogate's first epoch is 2-7x a later one).
    later = float(np.mean([curves.cost_s(c, 1, r) / (r - 1) for c in usable]))
    first = float(np.mean([curves.cost_s(c, 0, 1) for c in usable]))
    # --profile shaped: what each step costs, summed over the configurations (a stage's work
    # grows with the mean), relative to a step of the last stage (steps R/eta + 1 .. R); and
    # as the level, the median configuration's last-stage step (as the median profile).
    per_step = np.array([np.mean([curves.cost_s(c, k - 1, k) for c in usable
                                  if curves.last_step(c) >= k] or [0.0])
                         for k in range(1, r + 1)])
    last = float(np.mean(per_step[r // ETA:]))
    costs = tuple(float(max(v, 1e-6) / last) for v in per_step) if last > 0 else ()
    late = [c for c in usable if curves.last_step(c) >= r]
    base = float(np.median([curves.cost_s(c, r // ETA, r) / (r - r // ETA) for c in late])) \
        if late else last
    return Task(name, len(curves), curves.resumable, n, r, full, scale,
                curves.step_seconds_median() * scale, max(later, 1e-6) * scale,
                max(0.0, first - later) * scale, max(base, 1e-6) * scale, costs)


def select_tasks(data_dir: Path, *, quick: bool, max_tasks: int | None,
                 full_fits: bool, log: Callable[[str], None]) -> list[Task]:
    """Per set (sorted) its tasks (sorted), resumable ones only unless ``full_fits``; ``quick``
    keeps the first 2 of each set. Then round-robin over the sets up to ``max_tasks``."""
    by_set: dict[str, list[str]] = {}
    for name in discover(data_dir):
        by_set.setdefault(name.split("/", 1)[0], []).append(name)
    per_set: list[list[Task]] = []
    want = 2 if quick else max_tasks
    for set_name in sorted(by_set):
        chosen: list[Task] = []
        for name in sorted(by_set[set_name], key=_natural):
            if want is not None and len(chosen) >= want:
                break
            task = make_task(data_dir, name)
            if task is None:
                log(f"skip {name}: too few configs or steps for a halving with eta {ETA}")
                continue
            if not task.resumable and not full_fits:
                log(f"skip set {set_name}: full fits (use --full-fits to include them)")
                break
            chosen.append(task)
        per_set.append(chosen)
    out: list[Task] = []
    for k in range(max((len(s) for s in per_set), default=0)):
        out += [s[k] for s in per_set if k < len(s)]
    return out[:max_tasks] if max_tasks is not None else out


def _natural(name: str) -> tuple:
    task = name.split("/", 1)[1]
    return (0, int(task), "") if task.isdigit() else (1, 0, task)


# -- the instance type ------------------------------------------------------------------------
def one_gpu_type() -> InstanceType:
    """The price book's cheapest AWS 1-GPU instance type on demand: a type a sweep can name."""
    return min((t for t in PriceBook().types("aws", min_gpus=1) if t.gpus == 1),
               key=lambda t: t.on_demand_per_hour)


def sim_type(t: InstanceType) -> SimInstanceType:
    return SimInstanceType(t.name, slots=1, on_demand_per_hour=t.on_demand_per_hour,
                           spot_per_hour=t.spot_per_hour)


# -- one (task, seed): every case of it -------------------------------------------------------
def _run_summary(r: SimResult | None, error: str | None = None) -> dict[str, Any]:
    if r is None:
        return {"error": error, "done": False, "reason": "error", "spend_usd": None,
                "wall_s": None, "best_value": None, "budget_respected": None,
                "trials_started": 0, "bill": None}
    return {"done": r.outcome.reason == "done", "reason": r.outcome.reason,
            "spend_usd": r.spend_usd, "wall_s": r.wall_s, "best_value": r.best_value,
            "budget_respected": r.budget_respected, "trials_started": len(r.trials),
            "bill": _bill(r)}


def _met(run: dict[str, Any], deadline: float) -> bool:
    return bool(run.get("done")) and run["wall_s"] is not None and run["wall_s"] <= deadline


def _gpu_seconds(r: SimResult) -> float:
    return sum((s["finished_at"] - s["started_at"]) * (s["gpus"] or 1)
               for s in r.store.segments()
               if s["started_at"] is not None and s["finished_at"] is not None)


def _bill(r: SimResult) -> dict[str, float] | None:
    """Where a run's bill went, in GPU-seconds: ``billed_s`` (every instance from launch to
    termination, at least the billing minimum), of which ``boot_s`` (launch to ready, the
    worker not up yet), ``busy_s`` (segments running) and ``idle_s`` (the rest: up with
    nothing to run, e.g. behind a stage's straggler). None without a simulated provider."""
    if r.provider is None:
        return None
    billed = boot = 0.0
    for inst in r.provider.list():
        end = inst.terminated_at if inst.terminated_at is not None else r.wall_s
        billed += max(BILLING_MINIMUM_S, end - inst.launched_at) * inst.slots
        up = min(r.provider.ready_at(inst.instance_id), end)
        boot += max(0.0, up - inst.launched_at) * inst.slots
    busy = _gpu_seconds(r)
    return {"billed_s": billed, "boot_s": boot, "busy_s": busy,
            "idle_s": max(0.0, billed - boot - busy)}


def _better_or_equal(a: float | None, b: float | None, mode: str) -> bool:
    """``a`` at least as good as ``b``; no value is worse than any value."""
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return True
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return False
    return a >= b if mode == "max" else a <= b


def sim_setting(curves: Any, task: Task, seed: int, itype: InstanceType) -> dict[str, Any]:
    """The simulated world of a task and seed as keyword arguments of a run wired by hand
    (``benchmarks/spot.py`` and ``faults.py`` use it; this benchmark's sweeps do not)."""
    return dict(metric=curves.metric, mode=curves.mode, instance_type=sim_type(itype),
                boot_s=uniform_boot(BOOT.low, BOOT.high), step_noise=STEP_NOISE, seed=seed,
                time_scale=task.time_scale, billing_minimum_s=BILLING_MINIMUM_S)


def sim_world(task: Task, seed: int) -> dict[str, Any]:
    """What every simulated run of a task and seed shares that is no setting of its sweep
    (``simulate`` keyword arguments): the seed, the step noise and the time scale. (A VM's
    boot is drawn from the sweep's ``profile.boot_s``.)"""
    return dict(seed=seed, step_noise=STEP_NOISE, time_scale=task.time_scale)


def sha_scheduler(task: Task) -> dict[str, Any]:
    """The job's scheduler: synchronous SHA, rungs 1 .. the task's max resource, eta 3."""
    return {"type": "sha", "min_resource": 1, "max_resource": task.max_resource,
            "reduction_factor": ETA}


def accuracy_scheduler(task: Task, accuracy_shape: str) -> dict[str, Any]:
    """The accuracy sweeps' scheduler (``--accuracy-shape``): ``gentle`` leaves
    ``min_resource`` to the planner, which then starts at rung 1 with the best half of the
    first stage going on; ``fixed`` sets ``min_resource: 1`` (``1/eta`` at every rung)."""
    sched = {"type": "sha", "max_resource": task.max_resource, "reduction_factor": ETA}
    return sched if accuracy_shape == "gentle" else {**sched, "min_resource": 1}


def profile_section(task: Task, kind: str) -> dict[str, Any]:
    """The sweep's ``profile`` section for ``--profile``: the planners' step times, and the
    boot latency the simulated cloud draws from. ``fitted`` gives the first step's extra as
    ``step_costs``; ``carried`` is measured per case (:func:`carried_profile`); its
    planners' prior elsewhere (the 1,000-trial job's solve times) is ``median``'s."""
    boot = [BOOT.low, BOOT.high]
    if kind == "fitted":
        return {"seconds_per_step": float(task.fit_s_per_step), "boot_s": boot,
                "step_costs": [1.0 + float(task.fit_first_s / task.fit_s_per_step)]}
    if kind == "shaped":
        return {"seconds_per_step": float(task.shaped_s_per_step), "boot_s": boot,
                "step_costs": [float(c) for c in task.step_costs]}
    return {"seconds_per_step": float(task.s_per_step), "boot_s": boot}


def task_profile(task: Task, kind: str) -> Profile:
    """The profile the planners see for ``--profile``: what a sweep's section says."""
    p = profile_section(task, kind)
    return Profile(p["seconds_per_step"], step_costs=tuple(p.get("step_costs", ())), boot=BOOT)


def sweep_of(task: Task, itype: InstanceType, profile_kind: str, scheduler: dict[str, Any],
             num_trials: int | None, *, profile: dict[str, Any] | None = None,
             **provider: Any) -> dict[str, Any]:
    """A sweep of ``task`` as a user writes it (``simulate`` fills in the trainable, space,
    metric and mode from the curves): one AWS type, billed per second after the minimum;
    ``provider`` adds ``scaling`` and ``workers`` (default: follow the planner's plan);
    ``num_trials`` None leaves the count to the planner; ``profile``: the section to give
    (``--profile carried``: what an earlier sweep measured) instead of ``profile_kind``'s."""
    sweep: dict[str, Any] = {
        "scheduler": scheduler,
        "profile": profile if profile is not None else profile_section(task, profile_kind),
        "provider": {"type": "aws", "region": itype.region, "instance_types": [itype.name],
                     "billing_minimum_s": BILLING_MINIMUM_S, **provider},
        # A diverged curve fails at the same step however often it is retried.
        "max_failures": 0}
    if num_trials is not None:
        sweep["num_trials"] = num_trials
    return sweep


def carried_profile(curves: Any, task: Task, seed: int, itype: InstanceType
                    ) -> dict[str, Any]:
    """``--profile carried``: the profile an earlier sweep of the task measured, as
    ``elastune profile`` prints it and ``profile: {from: DIR}`` takes it. The earlier sweep is
    the job on a fixed cluster of n workers with another seed (``seed + CARRIED_SEED``: other
    step noise and boots), planned cold (``median``)."""
    from tuner._measure import measure

    earlier = simulate(sweep_of(task, itype, "median", sha_scheduler(task), task.num_trials,
                                scaling="static", workers=task.num_trials), curves,
                       **sim_world(task, seed + CARRIED_SEED), time_budget=None,
                       cost_budget=NO_CAP_USD)
    found = measure(earlier.store)
    if found is None:
        raise RuntimeError(f"{task.name}: the earlier sweep measured nothing")
    return found["profile"]


def _plan_record(plan: dict[str, Any]) -> dict[str, Any]:
    """What a stored plan (``store.plans()``) tells of the plan a sweep started from."""
    return {"plan_feasible": plan["feasible"],
            "plan_workers": [r["workers"] for r in plan["rungs"]],
            "predicted_cost_usd": plan["predicted_cost_usd"],
            "predicted_wall_s": plan["predicted_wall_s"], "solve_s": plan["inputs"]["solve_s"]}


def run_task_seed(data_dir: str, task: Task, seed: int, itype: InstanceType,
                  profile_kind: str = "median", accuracy_shape: str = "gentle",
                  early_promotion: bool = False, hindsight: bool = False) -> dict[str, Any]:
    """All cases (one per deadline factor) of one task and seed; ``early_promotion``: the
    job's synchronous halving promotes early (every run of the given job: planner and
    baselines; not the accuracy sweeps, whose re-planner may cut a stage); ``hindsight``:
    also search each case's cheapest per-stage cluster (``benchmarks/hindsight.py``)."""
    t0 = time.perf_counter()
    curves = load_curves(data_dir, task.name)
    price = itype.on_demand_per_hour / itype.gpus
    sched_asha = {**sha_scheduler(task), "type": "asha"}
    sched_job = {**sha_scheduler(task), "early_promotion": early_promotion}
    world = sim_world(task, seed)
    carried = None
    if profile_kind == "carried":
        carried = carried_profile(curves, task, seed, itype)
        # The simulated cloud boots VMs as in every other mode (not at the measured range).
        world["boot_s"] = uniform_boot(BOOT.low, BOOT.high)
    n = task.num_trials
    solve_s: list[float] = []     # the plans made before a sweep starts
    replan_s: list[float] = []    # the re-plans of the sweeps under way (whole calls)
    sims = 0

    def sim(sweep: dict[str, Any], time_budget: float | None, cost_budget: float | None
            ) -> tuple[SimResult | None, str | None]:
        nonlocal sims
        sims += 1
        try:
            return simulate(sweep, curves, **world, time_budget=time_budget,
                            cost_budget=cost_budget), None
        except RuntimeError as exc:  # e.g. a budget below one worker's billing minimum
            return None, f"{type(exc).__name__}: {exc}"

    def job(**provider: Any) -> dict[str, Any]:
        return sweep_of(task, itype, profile_kind, sched_job, n, profile=carried, **provider)

    static: dict[int, dict[str, Any]] = {}

    def static_run(w: int) -> dict[str, Any]:
        if w not in static:
            r, err = sim(job(scaling="static", workers=w), None, NO_CAP_USD)
            static[w] = _run_summary(r, err)
        return static[w]

    def static_min(deadline: float) -> int | None:
        """Smallest W in 1..n that finishes by ``deadline``, by bisection (assumes that more
        workers never finish later, which holds up to the noise)."""
        if not _met(static_run(n), deadline):
            return None
        lo, hi = 1, n
        while lo < hi:
            mid = (lo + hi) // 2
            if _met(static_run(mid), deadline):
                hi = mid
            else:
                lo = mid + 1
        return lo

    base = static_run(n)
    naive_r, naive_err = sim(job(scaling="release-idle", workers=n), None, NO_CAP_USD)
    naive = _run_summary(naive_r, naive_err)
    cases = []
    for f in FACTORS:
        deadline = f * base["wall_s"]
        # (1) the planner: the sweep follows its plan, re-planned at rung boundaries and on
        # drift (its first plan's solve time is the plan made before it starts)
        pr, perr = sim(job(), deadline, None)
        prun = _run_summary(pr, perr)
        plans = pr.store.plans() if pr is not None else []
        replans = plans[1:]
        replan_s.extend(p["inputs"]["solve_s"] for p in replans)
        if plans:
            solve_s.append(plans[0]["inputs"]["solve_s"])
        gpu_s = _gpu_seconds(pr) if pr is not None else None
        prun.update(met=_met(prun, deadline), **(_plan_record(plans[0]) if plans else {}),
                    replans=len(replans),
                    gpu_s=gpu_s,
                    lower_bound_usd=None if gpu_s is None else gpu_s * price / 3600.0)
        # (2) Static-min, (3) Static-max, (4) naive elastic
        w_min = static_min(deadline)
        smin = None if w_min is None else {"workers": w_min, **static_run(w_min)}
        smax = {"workers": n, **base, "met": _met(base, deadline)}
        nv = {**naive, "met": _met(naive, deadline)}
        feasible = prun["met"] or smin is not None or smax["met"] or nv["met"]

        def ratio(num: float | None, den: float | None) -> float | None:
            return None if num is None or not den else num / den

        ratios = {
            "vs_static_min": ratio(prun["spend_usd"], smin and smin["spend_usd"]),
            "vs_static_max": ratio(prun["spend_usd"], smax["spend_usd"]),
            "vs_naive": ratio(prun["spend_usd"], nv["spend_usd"]),
            "vs_lower_bound": ratio(prun["spend_usd"], prun["lower_bound_usd"]),
            "naive_vs_static_min": ratio(nv["spend_usd"], smin and smin["spend_usd"]),
            # What a plan costing exactly the lower bound would score against Static-min.
            "lower_bound_vs_static_min": ratio(prun["lower_bound_usd"],
                                               smin and smin["spend_usd"]),
        }
        # accuracy under a cost budget
        accuracy = []
        if smin is not None:
            for bf in BUDGET_FACTORS:
                budget = bf * smin["spend_usd"]
                # As `elastune run` runs a sweep with num_trials left out: the planner chooses
                # the count (and first cut), re-planned online, more brackets while time and
                # budget are left.
                sweep = sweep_of(task, itype, profile_kind,
                                 accuracy_scheduler(task, accuracy_shape), None,
                                 profile=carried)
                try:
                    ar, aerr = sim(sweep, deadline, budget)
                except ConfigError as exc:
                    if exc.field != "budget":
                        raise
                    ar, aerr = None, f"plan infeasible: {exc.message}"
                arun = _run_summary(ar, aerr)
                aplans = ar.store.plans() if ar is not None else []
                first = aplans[0] if aplans else None
                arun["brackets"] = 0 if ar is None else 1 + sum(
                    e["kind"] == "bracket" for e in ar.store.journal())
                if ar is not None:
                    replan_s.extend(p["inputs"]["solve_s"] for p in aplans[1:])
                if first is not None:
                    solve_s.append(first["inputs"]["solve_s"])
                k = first["num_trials"] if first is not None else None
                arun.update(num_trials=k, run_trials=k,
                            plan_feasible=first["feasible"] if first is not None else False,
                            step_scale=first["inputs"].get("step_scale") if first else None,
                            min_resource=first["rungs"][0]["resource"]
                            if first and first["rungs"] else None,
                            plan_workers=[r["workers"] for r in first["rungs"]] if first
                            else [],
                            solve_s=first["inputs"]["solve_s"] if first else None,
                            overrun=arun["spend_usd"] is not None
                            and arun["spend_usd"] > budget + 1e-9)
                # The largest cluster the budget pays until the deadline; at least one worker
                # (then the cost budget, not the deadline, ends the sweep), since a baseline
                # that cannot start would hand the planner a free win.
                affordable = min(n, int(budget * 3600.0 / (price * deadline) + 1e-9))
                w = max(1, affordable)
                xr, xerr = sim(sweep_of(task, itype, profile_kind, sched_asha, n,
                                        profile=carried, scaling="static", workers=w),
                               deadline, budget)
                xrun = _run_summary(xr, xerr)
                xrun.update(workers=w, affordable_workers=affordable)
                accuracy.append({
                    "budget_factor": bf, "budget_usd": budget, "planner": arun, "asha": xrun,
                    "win": _better_or_equal(arun["best_value"], xrun["best_value"],
                                            curves.mode),
                    "tie_without_values": arun["best_value"] is None
                    and xrun["best_value"] is None,
                })
        cases.append({"task": task.name, "seed": seed, "factor": factor_key(f),
                      "deadline_s": deadline, "base_wall_s": base["wall_s"],
                      "feasible": bool(feasible), "planner": prun, "static_min": smin,
                      "static_max": smax, "naive": nv, "ratios": ratios,
                      "accuracy": accuracy})
    if hindsight:
        sims += _hindsight(data_dir, task, seed, cases, early_promotion)
    return {"task": task.name, "seed": seed, "cases": cases, "solve_s": solve_s,
            "replan_s": replan_s, "simulations": sims, "elapsed_s": time.perf_counter() - t0,
            "static_runs": {str(w): v for w, v in sorted(static.items())},
            "carried_profile": carried}


def _hindsight(data_dir: str, task: Task, seed: int, cases: list[dict[str, Any]],
               early_promotion: bool) -> int:
    """Each case's cheapest per-stage cluster found in hindsight (``benchmarks/hindsight.py``'s
    search, same seed and world), and the planner's bill over it (``ratios.vs_hindsight``).
    Returns the simulations it ran."""
    from benchmarks.hindsight import run_cases

    searchable = [c for c in cases if c["static_min"] is not None
                  and c["planner"]["spend_usd"] is not None]
    found = {r["factor"]: r for r in run_cases(data_dir, task.name, seed, searchable,
                                               early_promotion)}
    for c in cases:
        r = found.get(c["factor"])
        h = r["hindsight"] if r is not None else None
        c["hindsight"] = h
        c["ratios"]["vs_hindsight"] = (c["planner"]["spend_usd"] / h["spend_usd"]
                                       if h is not None and c["planner"]["met"] else None)
    return sum(r["simulations"] for r in found.values())


def run_thousand(data_dir: str, task: Task, itype: InstanceType, profile_kind: str = "median",
                 accuracy_shape: str = "gentle", sweeps: bool = True) -> dict[str, Any]:
    """Solve times for a job of ``THOUSAND`` trials on ``task``'s profile (the size the
    targets name; the benchmark's own jobs have 81): ``plan_cost_min`` at each deadline factor
    of the planner's own fastest plan, and ``plan_accuracy_max`` (up to ``THOUSAND`` trials)
    at each budget factor of the cheapest on-time plan's predicted cost at 3x; with
    ``sweeps``, two sweeps of the job (``num_trials: 1000``) replayed at the 3x deadline (seed
    0), without a cost budget and with 0.75x that cost, whose first plans and re-plans are
    timed as the controller makes them (each a whole :class:`budgets.Replanner` call). A
    sweep the product refuses (no plan fits its budgets) is recorded with its error. The
    task's configurations repeat after its count (the sampler cycles through them): these
    sweeps time the planner, they are not scored."""
    t0 = time.perf_counter()
    prof = task_profile(task, profile_kind)
    shape = JobShape(THOUSAND, 1, task.max_resource, ETA)
    kw: dict[str, Any] = dict(billing_minimum_s=BILLING_MINIMUM_S)
    fastest = plan_cost_min(shape, prof, itype, 1e-9, **kw).predicted_wall_s
    plan_s: list[float] = []
    plans: dict[str, Plan] = {}
    for f in FACTORS:
        t = time.perf_counter()
        plans[factor_key(f)] = plan_cost_min(shape, prof, itype, f * fastest, **kw)
        plan_s.append(time.perf_counter() - t)
    deadline, cost = 3.0 * fastest, plans["3"].predicted_cost_usd
    first_cut = {"first_reduction": 2} if accuracy_shape == "gentle" else {}
    for bf in BUDGET_FACTORS:
        t = time.perf_counter()
        plan_accuracy_max(1, task.max_resource, ETA, prof, itype, deadline, bf * cost,
                          max_trials=THOUSAND, **first_cut, **kw)
        plan_s.append(time.perf_counter() - t)
    replan_s: list[float] = []
    runs = []
    if sweeps:
        curves = load_curves(data_dir, task.name)
        sweep = sweep_of(task, itype, profile_kind, sha_scheduler(task), THOUSAND)
        for budget in (None, 0.75 * cost):
            try:
                r = simulate(sweep, curves, **sim_world(task, 0), time_budget=deadline,
                             cost_budget=budget)
            except (RuntimeError, ConfigError) as exc:
                runs.append({"cost_budget_usd": budget, "error": f"{exc}"})
                continue
            first, *later = r.store.plans()
            plan_s.append(first["inputs"]["solve_s"])
            times = [p["inputs"]["solve_s"] for p in later]
            replan_s += times
            runs.append({"cost_budget_usd": budget, "reason": r.outcome.reason,
                         "trials_started": len(r.trials), "replans": len(times),
                         "replan_s_max": max(times, default=None)})
    return {"task": task.name, "trials": THOUSAND, "fastest_wall_s": fastest,
            "plan_s": plan_s, "replan_s": replan_s, "sweeps": runs,
            "elapsed_s": time.perf_counter() - t0}


# -- summary ----------------------------------------------------------------------------------
def _median(xs: Iterable[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return float(np.median(v)) if v else None


def _p95(xs: list[float]) -> float | None:
    return float(np.percentile(xs, 95)) if xs else None


def summarise(cases: list[dict[str, Any]], plan_s: list[float],
              replan_s: list[float], profile: str = "cold") -> dict[str, Any]:
    """The summary keys; ``plan_s``: the solve times of the plans for a ``THOUSAND``-trial job
    (:func:`run_thousand`), ``replan_s``: every re-plan's, each a whole call."""
    feasible = [c for c in cases if c["feasible"]]
    by_deadline = {factor_key(f): _median(c["ratios"]["vs_static_min"] for c in feasible
                                          if c["factor"] == factor_key(f))
                   for f in FACTORS}
    vs_min = [c["ratios"]["vs_static_min"] for c in feasible
              if c["ratios"]["vs_static_min"] is not None]
    acc = [a for c in cases for a in c["accuracy"]]
    budgeted = [a["planner"] for a in acc]
    searched = any("vs_hindsight" in c["ratios"] for c in cases)
    return {
        "cost_ratio_vs_static_min_median_by_deadline": by_deadline,
        # (--hindsight: the cheapest per-stage cluster found in hindsight, as hindsight.py)
        "cost_ratio_vs_hindsight_median_by_deadline": {
            factor_key(f): _median(c["ratios"].get("vs_hindsight") for c in feasible
                                   if c["factor"] == factor_key(f))
            for f in FACTORS} if searched else None,
        "cost_ratio_vs_static_min_max": float(max(vs_min)) if vs_min else None,
        "cost_ratio_vs_lower_bound_median": _median(c["ratios"]["vs_lower_bound"]
                                                    for c in feasible),
        "deadline_met_frac": (sum(c["planner"]["met"] for c in feasible) / len(feasible)
                              if feasible else None),
        "budget_overruns": int(sum(bool(r["overrun"]) for r in budgeted)),
        "accuracy_win_frac_vs_asha_fixed": (sum(a["win"] for a in acc) / len(acc)
                                            if acc else None),
        "plan_solve_s_p95": _p95(plan_s),
        "replan_s_p95": _p95(replan_s),
        "cases": len(cases),
        "infeasible_cases": len(cases) - len(feasible),
        "profile": profile,
    }


def lower_bound_floor(cases: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per deadline factor, the median cost ratio vs Static-min that a plan costing exactly
    the lower bound (no boot, no idle instance) would score: how far below each target the
    physical limit lies. Not a target."""
    feasible = [c for c in cases if c["feasible"]]
    return {factor_key(f): _median(c["ratios"].get("lower_bound_vs_static_min")
                                   for c in feasible if c["factor"] == factor_key(f))
            for f in FACTORS}


def bill_shares(cases: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per deadline factor and policy (the planner, Static-min), the mean share of the
    GPU-seconds billed that went to booting instances, to segments, and to instances idle:
    where a plan loses against the lower bound (which counts the segments only)."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for f in FACTORS:
        key = factor_key(f)
        fe = [c for c in cases if c["feasible"] and c["factor"] == key]
        out[key] = {}
        for policy in ("planner", "static_min"):
            bills = [c[policy]["bill"] for c in fe
                     if c[policy] and c[policy].get("bill") and c[policy]["bill"]["billed_s"]]
            out[key][policy] = {
                part: (float(np.mean([b[f"{part}_s"] / b["billed_s"] for b in bills]))
                       if bills else None)
                for part in ("boot", "busy", "idle")}
    return out


def _check(value: float | None, target: tuple[str, float]) -> bool | None:
    if value is None:
        return None
    op, limit = target
    return value <= limit if op == "<=" else value >= limit


def targets_report(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for key, target in TARGETS.items():
        if key in summary:
            value = summary[key]
            name = key
        else:
            value = summary["cost_ratio_vs_static_min_median_by_deadline"][key]
            name = f"cost_ratio_vs_static_min_median @{key}x"
        out[name] = {"value": value, "target": f"{target[0]} {target[1]:g}",
                     "met": _check(value, target)}
    return out


# -- output -----------------------------------------------------------------------------------
def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, int):
        return str(v)
    return f"{v:.{digits}f}"


def tasks_table(tasks: list[Task]) -> Table:
    t = Table(title="Tasks (job: synchronous SHA, eta 3)")
    for col in ("task", "configs", "n", "rungs to R", "full trial s", "time scale",
                "s/step (scaled)"):
        t.add_column(col, justify="left" if col == "task" else "right")
    for k in tasks:
        t.add_row(k.name, str(k.configs), str(k.num_trials), str(k.max_resource),
                  f"{k.full_trial_s:.1f}", f"{k.time_scale:.2f}", f"{k.s_per_step:.2f}")
    return t


def deadline_table(cases: list[dict[str, Any]]) -> Table:
    t = Table(title="Planner cost vs baselines, by deadline (medians over feasible cases)",
              caption="plan = planner (scaling: plan); smin / smax = Static-min / "
                      "Static-max; naive = scaling: release-idle, n workers; LB = the planner "
                      "run's GPU-seconds at the per-GPU price (LB/smin: what a plan costing LB "
                      "would score); "
                      "(met): only cases where the planner's sweep finished by the deadline (a "
                      "sweep cut off at it is cheaper)")
    cols = ("deadline", "cases", "infeasible", "plan/smin", "target", "max plan/smin",
            "plan/smin (met)", "plan/smax", "plan/naive", "naive/smin", "plan/LB", "LB/smin",
            "plan met", "smin W")
    for col in cols:
        t.add_column(col, justify="right")
    for f in FACTORS:
        key = factor_key(f)
        cs = [c for c in cases if c["factor"] == key]
        fe = [c for c in cs if c["feasible"]]
        r = [c["ratios"]["vs_static_min"] for c in fe if c["ratios"]["vs_static_min"]]
        met = sum(c["planner"]["met"] for c in fe)
        t.add_row(
            f"{key}x", str(len(cs)), str(len(cs) - len(fe)),
            _fmt(_median(r)), f"{TARGETS[key][0]} {TARGETS[key][1]:.2f}",
            _fmt(max(r) if r else None),
            _fmt(_median(c["ratios"]["vs_static_min"] for c in fe if c["planner"]["met"])),
            _fmt(_median(c["ratios"]["vs_static_max"] for c in fe)),
            _fmt(_median(c["ratios"]["vs_naive"] for c in fe)),
            _fmt(_median(c["ratios"]["naive_vs_static_min"] for c in fe)),
            _fmt(_median(c["ratios"]["vs_lower_bound"] for c in fe)),
            _fmt(_median(c["ratios"].get("lower_bound_vs_static_min") for c in fe)),
            f"{met}/{len(fe)}",
            _fmt(_median(c["static_min"]["workers"] for c in fe if c["static_min"]), 1))
    return t


def bill_table(cases: list[dict[str, Any]]) -> Table:
    t = Table(title="Where the bill goes (mean share of the GPU-seconds billed)",
              caption="boot: launched, worker not up yet; busy: segments running (what the "
                      "lower bound counts); idle: up with nothing to run")
    for col in ("deadline", "plan boot", "plan busy", "plan idle", "smin boot", "smin busy",
                "smin idle"):
        t.add_column(col, justify="right")
    for key, row in bill_shares(cases).items():
        t.add_row(f"{key}x", *(_fmt(row[p][part]) for p in ("planner", "static_min")
                               for part in ("boot", "busy", "idle")))
    return t


def accuracy_table(cases: list[dict[str, Any]]) -> Table:
    t = Table(title="Accuracy under a cost budget: plan_accuracy_max (SHA) vs ASHA on the "
                    "largest affordable fixed cluster")
    for col in ("budget x static-min", "runs", "planner wins (>=)", "median planner trials",
                "median ASHA workers", "planner overruns", "ASHA overruns"):
        t.add_column(col, justify="right")
    for bf in BUDGET_FACTORS:
        acc = [a for c in cases for a in c["accuracy"] if a["budget_factor"] == bf]
        t.add_row(f"{bf:g}x", str(len(acc)), str(sum(a["win"] for a in acc)),
                  _fmt(_median(a["planner"]["num_trials"] for a in acc), 0),
                  _fmt(_median(a["asha"]["workers"] for a in acc), 0),
                  str(sum(bool(a["planner"]["overrun"]) for a in acc)),
                  str(sum(a["asha"]["budget_respected"] is False for a in acc)))
    return t


def summary_table(summary: dict[str, Any]) -> Table:
    t = Table(title="Summary against targets")
    for col in ("figure", "value", "target", "met"):
        t.add_column(col, justify="left" if col == "figure" else "right")
    for name, row in targets_report(summary).items():
        met = {True: "[green]yes[/]", False: "[red]NO[/]", None: "n/a"}[row["met"]]
        t.add_row(name, _fmt(row["value"]), row["target"], met)
    t.add_row("cases", str(summary["cases"]), "", "")
    t.add_row("infeasible_cases", str(summary["infeasible_cases"]), "", "")
    return t


# -- main -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None,
                    help="curve directory (default: ../shared/data if present, else the sample)")
    ap.add_argument("--quick", action="store_true",
                    help="the first 2 tasks of each set and 2 seeds")
    ap.add_argument("--max-tasks", type=int, default=None,
                    help="at most this many tasks, round-robin over sets (default 8; "
                         "--quick: no cap beyond 2 per set)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 5; quick 2)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                    help="worker processes (default: min(4, CPUs))")
    ap.add_argument("--full-fits", action="store_true",
                    help="also run tasks whose fidelities are fits from scratch")
    ap.add_argument("--profile", choices=("median", "fitted", "shaped", "carried"),
                    default="median",
                    help="the sweeps' profile section: 'median' seconds per step (default); "
                         "'fitted': mean seconds per later step, and the first step's extra "
                         "as its step_costs entry (as `elastune profile` writes it); 'shaped': "
                         "the mean cost of each step relative to a last-stage step "
                         "(step_costs), as a profile from an earlier run would know it; "
                         "'carried': what an earlier sweep of the task (another seed) "
                         "measured, as `profile: {from: DIR}` takes it")
    ap.add_argument("--hindsight", action="store_true",
                    help="also search each case's cheapest per-stage cluster in hindsight "
                         "(benchmarks/hindsight.py; many more simulations) for "
                         "cost_ratio_vs_hindsight_median_by_deadline")
    ap.add_argument("--accuracy-shape", choices=("gentle", "fixed"), default="gentle",
                    help="the accuracy sweeps' scheduler: 'gentle' leaves min_resource to the "
                         "planner, which starts at 1 and lets the best half of the first "
                         "stage go on (default); 'fixed' sets min_resource: 1, 1/eta at "
                         "every rung")
    ap.add_argument("--early-promotion", action="store_true",
                    help="the given job's synchronous halving promotes a trial before its "
                         "stage is decided once it is certain to go on (scheduler."
                         "early_promotion; planner and baselines alike)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    for name in ("max_tasks", "seeds", "jobs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')} is {v}, but must be >= 1")
    data_dir = args.data if args.data is not None else default_data_dir()
    if not data_dir.is_dir():
        ap.error(f"--data {str(data_dir)!r} is not a directory")
    seeds = args.seeds or (2 if args.quick else 5)
    max_tasks = args.max_tasks if args.max_tasks is not None else (None if args.quick else 8)

    # Wide enough for the tables when stdout is a file or a pipe (rich would use 80 columns).
    err = Console(stderr=True, width=160)
    out = Console(stderr=True, width=160) if args.json else Console(width=160)
    started = time.perf_counter()
    tasks = select_tasks(data_dir, quick=args.quick, max_tasks=max_tasks,
                         full_fits=args.full_fits, log=lambda m: err.print(f"[dim]{m}[/]"))
    if not tasks:
        err.print(f"no usable task in {data_dir}")
        return 1
    itype = one_gpu_type()
    out.print(f"data: {data_dir}; {len(tasks)} task(s) x {seeds} seed(s) x "
              f"{len(FACTORS)} deadlines; instance {itype.name} at "
              f"${itype.on_demand_per_hour:.3f}/GPU-h on demand")
    out.print(tasks_table(tasks))

    # Each (task, seed) runs its cases; each task (seed None) also times a THOUSAND-trial job
    # (with --quick: its plans only, not its sweeps).
    units = [(t, s) for t in tasks for s in range(seeds)] + [(t, None) for t in tasks]

    def submit(run: Callable[..., Any], t: Task, s: int | None) -> Any:
        if s is None:
            return run(run_thousand, str(data_dir), t, itype, args.profile,
                       args.accuracy_shape, not args.quick)
        return run(run_task_seed, str(data_dir), t, s, itype, args.profile,
                   args.accuracy_shape, args.early_promotion, args.hindsight)

    def label(t: Task, s: int | None, r: dict[str, Any]) -> str:
        what = f"seed {s}" if s is not None else f"a {THOUSAND}-trial job"
        return f"{t.name} {what}: {r['elapsed_s']:.1f} s"

    results: list[dict[str, Any]] = []
    thousand: list[dict[str, Any]] = []
    if args.jobs == 1:
        for i, (t, s) in enumerate(units, 1):
            r = submit(lambda f, *a: f(*a), t, s)
            (thousand if s is None else results).append(r)
            err.print(f"[{i}/{len(units)}] {label(t, s, r)}")
    else:
        with ProcessPoolExecutor(max_workers=min(args.jobs, len(units))) as pool:
            futures = {submit(pool.submit, t, s): (t, s) for t, s in units}
            for i, fut in enumerate(as_completed(futures), 1):
                r = fut.result()
                t, s = futures[fut]
                (thousand if s is None else results).append(r)
                err.print(f"[{i}/{len(units)}] {label(t, s, r)}")
    order = {(t.name, s): i for i, (t, s) in enumerate(units)}
    results.sort(key=lambda r: order[(r["task"], r["seed"])])
    thousand.sort(key=lambda r: order[(r["task"], None)])
    cases = [c for r in results for c in r["cases"]]
    replan_s = [x for r in results + thousand for x in r["replan_s"]]
    summary = summarise(cases, [x for r in thousand for x in r["plan_s"]], replan_s,
                        "carried" if args.profile == "carried" else "cold")
    wall = time.perf_counter() - started

    if args.json:
        details = {
            # (straggler and brackets: the product's, no longer options)
            "data_dir": str(data_dir), "seeds": seeds, "straggler": 0.0,
            "profile": args.profile, "accuracy_shape": args.accuracy_shape,
            "brackets": "more", "early_promotion": args.early_promotion,
            "deadline_factors": list(FACTORS),
            "budget_factors": list(BUDGET_FACTORS),
            "instance_type": asdict(itype), "tasks": [asdict(t) for t in tasks],
            "targets": targets_report(summary),
            "lower_bound_vs_static_min_median_by_deadline": lower_bound_floor(cases),
            "bill_shares_by_deadline": bill_shares(cases),
            # The benchmark's own jobs' plans (81 trials) and re-plans, apart.
            "benchmark_jobs_plan_solve_s_p95": _p95([x for r in results
                                                     for x in r["solve_s"]]),
            "benchmark_jobs_replan_s_p95": _p95([x for r in results for x in r["replan_s"]]),
            "thousand_trial_jobs": thousand,
            "wall_s": wall,
            "simulations": sum(r["simulations"] for r in results),
            "cases": cases,
            "static_runs": {f"{r['task']}#{r['seed']}": r["static_runs"] for r in results},
            # --profile carried: what each task and seed's earlier sweep measured
            "carried_profiles": {f"{r['task']}#{r['seed']}": r["carried_profile"]
                                 for r in results if r["carried_profile"] is not None},
        }
        print(json.dumps({"summary": summary, "details": details}, default=_json_default))
    else:
        out.print(deadline_table(cases))
        out.print(bill_table(cases))
        out.print(accuracy_table(cases))
        out.print(summary_table(summary))
        out.print(f"{sum(r['simulations'] for r in results)} simulations in {wall:.1f} s "
                  f"({args.jobs} process(es))")
    return 0


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


if __name__ == "__main__":
    sys.exit(main())
