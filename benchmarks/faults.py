"""Whether budgets and results survive faults, measured by replaying learning curves through the
real controller under random fault schedules.

Every schedule goes through ``tuner.sim.simulate`` (the real controller, scheduler,
sampler, planner, ledger, autoscaler and store on a simulated clock, provider and executor);
nothing here re-implements control logic. Per schedule, drawn from ``--seed`` and its index:

- the sweep, as a user writes it (AWS, the 1-GPU type of ``benchmarks/planner.py`` at its
  on-demand and spot prices, ``profile.seconds_per_step`` the replay's and ``profile.boot_s``
  [60, 180]): a task of ``--data`` (a set, then one of its tasks, both discovered from the
  files and drawn uniformly), eta 2 or 3, rungs up to 27 steps (fewer where the curves are
  shorter), 2..81 trials, step noise up to +-30 %, on demand or spot (``provider.spot``), and
  one of three ways to size the cluster (``provider.scaling``): the planner (``plan``,
  synchronous SHA, re-planned by the controller), a static cluster (``static``) or naive
  elastic (``release-idle``), the last two with SHA, ASHA or Hyperband on 1..n workers. Tasks
  whose full trial is short next to a boot are slowed down as in ``benchmarks/planner.py``.
- the budgets: the time budget is 1.5x-6x a planner estimate (``plan_static``'s predicted wall
  time with one worker per trial for the planner, with the sweep's own cluster otherwise), the
  cost budget 1.2x-3x the predicted cost of the plan the sweep starts with (for the planner,
  what ``elastune plan`` predicts for the sweep with that deadline; ``plan_static`` of the
  fixed cluster otherwise).
- the faults (each present in a part of the schedules, with random rates and times): boot
  latency U(60, 180) s; capacity errors at launch (a failure probability per launch call, and
  outage windows in which every launch fails); VMs whose worker never registers (replaced by
  the controller after the provider config's ``register_timeout_s``); spot preemptions, single
  (Poisson per VM) and in storms (at a moment, each live spot VM goes with some probability);
  VMs that die on their own; worker processes killed mid-segment (the segment is delivered
  again and re-runs from its last checkpoint); trainables that raise (counted against the
  sweep's ``max_failures``, 0..3); NaN reports; workers that hang for good mid-segment (no
  heartbeat, no end: the controller's lease gives the segment up as stale after the
  settings' ``heartbeat_timeout_s`` and replaces the VM); spot interruption notices 30 s (GCE)
  or 120 s (AWS) before a preemption, or none.

Figures (``summary``):

- ``budget_overruns``: schedules whose final ledger spend is above the cost budget (+1e-6 $).
  The provider's own bill (every instance it launched, from launch to termination, billed per
  second with the 60 s minimum) is checked against the ledger too (``ledger_mismatches``).
- ``deadline_met_frac``: schedules whose sweep ended, finished or stopped by the controller
  (at the time budget, or before the cost budget), without an error, within the time budget
  plus the controller's stop grace and one tick (``deadline_tolerance_s``): at the deadline the
  controller asks running segments to stop and gives them ``stop_grace_s`` to checkpoint,
  which is part of the design, then terminates the VMs.
- ``lost_results``: for every segment whose end the simulated executor delivered as a result
  (done, ended or stopped; a failed run is superseded by its retry), the reports it delivered
  for it minus the reports of it in the store (never below 0 per segment); both
  sides are counted, not assumed. Reports of segments whose VM went away, or that the
  controller gave up when their lease lapsed (stored ``stale``; a worker that was restarting
  may still deliver their stop), are excluded: the controller drops those on purpose, since
  the re-run from the last checkpoint supersedes them.

    python benchmarks/faults.py [--schedules 1000] [--seed 0] [--jobs N] [--data DIR] [--chosen]
                                [--json]

``--chosen`` runs every schedule (same draws and budgets otherwise) as a sweep whose number of
trials the planner chooses (``num_trials`` left out; at most the task's configurations):
synchronous SHA following a plan whose re-planner has the cost budget (it may close admission
early, promote fewer or more, decide a stage without its stragglers, and start more brackets
while time and budget are left; ``summary.more_brackets`` counts those).

Worker processes are started with a fixed ``PYTHONHASHSEED`` (unless one is set), since the
controller iterates over sets of instance ids and string hashing is randomised per process:
with it, ``--seed`` gives the same figures on every run.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing
import os
import random
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks.planner import (  # noqa: E402
    BILLING_MINIMUM_S,
    BOOT,
    BOOTS_PER_TRIAL,
    largest_power,
    one_gpu_type,
)
from budgets import (  # noqa: E402
    InstanceType,
    JobShape,
    Profile,
    billed,
    plan_static,
)
from tuner._config import ProviderConfig  # noqa: E402
from tuner._planning import plan_for  # noqa: E402
from tuner.sim import (  # noqa: E402
    SIM_SETTINGS,
    SimFaults,
    SimResult,
    default_data_dir,
    discover,
    load_curves,
    settings_grace,
    simulate,
    simulated_sweep,
    uniform_boot,
)

# What a cloud sweep uses: a VM whose worker has not registered this long after launch is
# replaced (the provider config's default), and the sweep gives up when no worker at all has
# registered for twice that (as tuner/_providers.py sets it for the clouds).
REGISTER_TIMEOUT_S = float(ProviderConfig.model_fields["register_timeout_s"].default)
SETTINGS = replace(SIM_SETTINGS, register_timeout_s=REGISTER_TIMEOUT_S,
                   boot_timeout_s=2 * REGISTER_TIMEOUT_S)
TOLERANCE_S = settings_grace(SETTINGS)
OVERRUN_EPS_USD = 1e-6
MAX_TRIALS = 81
MAX_RESOURCE = 27
DEADLINE_FACTORS = (1.5, 6.0)
BUDGET_FACTORS = (1.2, 3.0)
HASH_SEED = "0"

SUMMARY_KEYS = ("schedules", "budget_overruns", "deadline_met_frac", "lost_results")
TARGETS: dict[str, tuple[str, float]] = {
    "budget_overruns": ("<=", 0), "deadline_met_frac": (">=", 0.99), "lost_results": ("<=", 0),
    "duplicate_reports": ("<=", 0),
}
FAULT_KEYS = ("capacity_errors", "never_registered", "register_timeouts", "preemptions",
              "storm_preemptions", "vm_failures", "worker_losses", "hung_workers",
              "stale_segments", "app_errors", "nan_reports", "failed_trials")


# -- drawing a schedule -----------------------------------------------------------------------
def tasks_by_set(data_dir: Path) -> dict[str, list[str]]:
    """The tasks of ``data_dir``, per set, as the files list them."""
    by_set: dict[str, list[str]] = {}
    for name in discover(data_dir):
        by_set.setdefault(name.split("/", 1)[0], []).append(name)
    return {k: sorted(v) for k, v in sorted(by_set.items())}


def _maybe(rng: random.Random, p: float, low: float, high: float) -> float:
    """``U(low, high)`` with probability ``p``, else 0 (the fault is absent)."""
    return rng.uniform(low, high) if rng.random() < p else 0.0


def _windows(rng: random.Random, horizon: float, most: int, low: float,
             high: float) -> list[tuple[float, float]]:
    out = []
    for _ in range(rng.randint(0, most)):
        start = rng.uniform(0.0, horizon)
        out.append((start, start + rng.uniform(low, high)))
    return sorted(out)


def draw_schedule(data_dir: str, by_set: dict[str, list[str]], seed: int,
                  index: int) -> dict[str, Any]:
    """One schedule: the sweep, its budgets and its faults (plain values, for the report)."""
    rng = random.Random(f"faults:{seed}:{index}")
    for _ in range(100):
        set_name = rng.choice(sorted(by_set))
        task = rng.choice(by_set[set_name])
        curves = load_curves(data_dir, task)
        usable = [c for c in curves.config_ids() if curves.last_step(c) > 0]
        eta = rng.choice((2, 3, 3))
        resource = largest_power(eta, min(MAX_RESOURCE, curves.max_step))
        if len(usable) >= eta and resource >= eta:
            break
    else:
        raise RuntimeError(f"no task in {data_dir} holds a halving")
    n = rng.randint(eta, min(MAX_TRIALS, len(usable)))
    full = float(np.median([curves.cost_s(c, 0, resource) for c in usable]))
    scale = BOOTS_PER_TRIAL * BOOT.mean / full if 0 < full < BOOTS_PER_TRIAL * BOOT.mean else 1.0
    policy = rng.choices(("plan", "static", "naive"), weights=(2, 1, 1))[0]
    spot = rng.random() < 0.5
    sched = "sha" if policy == "plan" else rng.choice(("sha", "asha", "hyperband"))
    workers = n if policy == "plan" else rng.randint(1, n)
    schedule: dict[str, Any] = {
        "index": index, "task": task, "resumable": curves.resumable, "num_trials": n,
        "max_resource": resource, "reduction_factor": eta, "time_scale": scale,
        # What a step costs in the (scaled) replay: the median full trial over its steps. (The
        # data's own median step time can be far from it on full-fit sets, whose small
        # anchors fit in milliseconds, and the budgets would be off by orders of magnitude.)
        "s_per_step": full * scale / resource, "policy": policy,
        "scheduler": sched, "workers": workers, "spot": spot,
        "deadline_factor": rng.uniform(*DEADLINE_FACTORS),
        "budget_factor": rng.uniform(*BUDGET_FACTORS),
        "step_noise": rng.uniform(0.0, 0.3), "max_failures": rng.randint(0, 3),
        "sim_seed": rng.randrange(2**31),
        # The sampler's configurations, each drawn once: the most trials a chosen shape may
        # start, all brackets together.
        "configs": len(list(curves.config_ids())),
    }
    # Fault rates; times are drawn once the deadline is known (run_schedule), from this rng's
    # state carried in a seed.
    schedule["faults"] = {
        "capacity_failure_prob": _maybe(rng, 0.6, 0.0, 0.5),
        "outages": rng.random() < 0.3,
        "never_register_prob": _maybe(rng, 0.5, 0.0, 0.15),
        "preemptions_per_hour": _maybe(rng, 0.8, 0.0, 3.0) if spot else 0.0,
        "storms": rng.random() < 0.5 and spot,
        "vm_failures_per_hour": _maybe(rng, 0.4, 0.0, 0.5),
        "worker_losses_per_hour": _maybe(rng, 0.6, 0.0, 2.0),
        "app_error_prob": _maybe(rng, 0.6, 0.0, 0.1),
        "nan_prob": _maybe(rng, 0.5, 0.0, 0.05),
        "hang_prob": _maybe(rng, 0.3, 0.0, 0.05),
        "spot_notice_s": rng.choice((0.0, 30.0, 120.0)) if spot else 0.0,
        "times_seed": rng.randrange(2**31),
    }
    return schedule


def sweep_for(schedule: dict[str, Any], itype: InstanceType) -> dict[str, Any]:
    """The sweep of ``schedule`` as a user writes it: on ``itype`` (AWS), sized by the
    planner, a static cluster or naive elastic scaling; ``chosen``: the planner chooses the
    number of trials too."""
    provider: dict[str, Any] = {"type": "aws", "region": itype.region,
                                "instance_types": [itype.name], "spot": schedule["spot"],
                                "billing_minimum_s": BILLING_MINIMUM_S}
    if schedule["policy"] != "plan":
        provider.update(scaling="static" if schedule["policy"] == "static" else "release-idle",
                        workers=schedule["workers"])
    return {
        "scheduler": {"type": schedule["scheduler"], "min_resource": 1,
                      "max_resource": schedule["max_resource"],
                      "reduction_factor": schedule["reduction_factor"]},
        "num_trials": None if schedule.get("chosen") else schedule["num_trials"],
        "max_failures": schedule["max_failures"], "provider": provider,
        "profile": {"seconds_per_step": schedule["s_per_step"],
                    "boot_s": [BOOT.low, BOOT.high]},
    }


def budgets_for(schedule: dict[str, Any], curves: Any) -> dict[str, Any]:
    """The deadline and cost budget of ``schedule``: the deadline from ``plan_static``'s
    estimate; the cost budget from the predicted cost of the plan the sweep starts with."""
    itype = one_gpu_type()
    shape = JobShape(schedule["num_trials"], 1, schedule["max_resource"],
                     schedule["reduction_factor"])
    profile = Profile(schedule["s_per_step"], boot=BOOT)
    spot = schedule["spot"]
    estimate = plan_static(shape, profile, itype, schedule["workers"], spot=spot,
                           billing_minimum_s=BILLING_MINIMUM_S).predicted_wall_s
    deadline = schedule["deadline_factor"] * estimate
    if schedule["policy"] == "plan":
        # What ``elastune plan`` predicts for the sweep of the drawn number of trials at that
        # deadline (also for --chosen, whose sweep then chooses its count within the budget).
        given = {**sweep_for(schedule, itype), "num_trials": schedule["num_trials"]}
        predicted = plan_for(simulated_sweep(given, curves, time_budget=deadline,
                                             cost_budget=None)).predicted_cost_usd
    else:
        predicted = plan_static(shape, profile, itype, schedule["workers"], spot=spot,
                                billing_minimum_s=BILLING_MINIMUM_S).predicted_cost_usd
    return {"estimate_s": estimate, "deadline_s": deadline, "predicted_cost_usd": predicted,
            "cost_budget_usd": schedule["budget_factor"] * predicted}


def sim_faults(schedule: dict[str, Any], deadline: float) -> SimFaults:
    f = schedule["faults"]
    rng = random.Random(f["times_seed"])
    outages = _windows(rng, deadline, 2, 60.0, 900.0) if f["outages"] else []
    storms = ([(rng.uniform(0.0, deadline), rng.uniform(0.2, 1.0))
               for _ in range(rng.randint(1, 3))] if f["storms"] else [])
    f["capacity_outages"], f["preemption_storms"] = outages, sorted(storms)
    return SimFaults(capacity_outages=outages, never_register_prob=f["never_register_prob"],
                     preemption_storms=sorted(storms),
                     vm_failures_per_hour=f["vm_failures_per_hour"],
                     app_error_prob=f["app_error_prob"], nan_prob=f["nan_prob"],
                     worker_losses_per_hour=f["worker_losses_per_hour"],
                     worker_restart_s=uniform_boot(5.0, 60.0), hang_prob=f["hang_prob"],
                     spot_notice_s=f["spot_notice_s"])


# -- running one ------------------------------------------------------------------------------
def run_schedule(data_dir: str, by_set: dict[str, list[str]], seed: int,
                 index: int, chosen: bool = False) -> dict[str, Any]:
    """Draw schedule ``index`` and run it (``chosen``: as a chosen-shape sweep, see the module
    docstring); what it measured, as plain values."""
    t0 = time.perf_counter()
    logging.getLogger("tuner").setLevel(logging.ERROR)   # faults are expected here
    schedule = draw_schedule(data_dir, by_set, seed, index)
    if chosen:
        schedule.update(policy="plan", scheduler="sha", workers=schedule["num_trials"],
                        chosen=True)
    try:
        return _run(data_dir, schedule, t0)
    except Exception as exc:  # a crash of the benchmark itself, not an outcome of the sweep
        return {**schedule, "crash": "".join(traceback.format_exception(exc))[-3000:],
                "elapsed_s": time.perf_counter() - t0}


def _run(data_dir: str, schedule: dict[str, Any], t0: float) -> dict[str, Any]:
    curves = load_curves(data_dir, schedule["task"])
    b = budgets_for(schedule, curves)
    deadline, budget = b["deadline_s"], b["cost_budget_usd"]
    faults = sim_faults(schedule, deadline)
    f = schedule["faults"]
    r = simulate(sweep_for(schedule, one_gpu_type()), curves, seed=schedule["sim_seed"],
                 faults=faults, capacity_failure_prob=f["capacity_failure_prob"],
                 preemptions_per_hour=f["preemptions_per_hour"],
                 step_noise=schedule["step_noise"], time_scale=schedule["time_scale"],
                 settings=SETTINGS, raise_errors=False, time_budget=deadline,
                 cost_budget=budget)
    return {**schedule, **b, "start_workers": start_workers(r, schedule),
            **measure(r, deadline, budget), "elapsed_s": time.perf_counter() - t0}


def start_workers(r: SimResult, schedule: dict[str, Any]) -> int:
    """The workers the sweep started with: its first plan's first stage when it follows a
    plan, else its fixed or initial cluster."""
    plans = r.store.plans()
    if schedule["policy"] != "plan" or not plans:
        return schedule["workers"]
    rungs = plans[0]["rungs"]
    first = next((x["workers"] for x in rungs if x["rung"] == 0),
                 rungs[-1]["workers"] if rungs else 0)
    return max(1, first)


def measure(r: SimResult, deadline: float, budget: float) -> dict[str, Any]:
    """Budgets, deadline and results of one finished simulation, each counted from both
    sides where there are two (ledger and provider; executor and store)."""
    assert r.provider is not None and r.executor is not None
    end = r.outcome.finished_at
    # The provider's bill, instance by instance, independently of the ledger.
    bill, leaked, register_timeouts = 0.0, 0, 0
    for inst in r.provider.list():
        stop = inst.terminated_at
        if stop is None:
            leaked += 1
            stop = end
        bill += billed(inst.price_per_hour, stop - inst.launched_at, BILLING_MINIMUM_S)
        if (math.isinf(r.provider.ready_at(inst.instance_id)) and not inst.preempted
                and stop - inst.launched_at >= SETTINGS.register_timeout_s):
            register_timeouts += 1
    # Reports: delivered by the executor for segments whose end it delivered, against the
    # store's rows of those segments.
    stored = {row["segment_id"]: row["n"] for row in r.store.query(
        "SELECT segment_id, COUNT(*) AS n FROM reports GROUP BY segment_id")}
    states = {s["segment_id"]: s["state"] for s in r.store.segments()}
    delivered = lost = persisted = state_mismatches = 0
    for seg_id, status in r.executor.finished.items():
        if status == "failed":
            continue   # not a result: a retry supersedes it (and the store may drop it)
        if status == "stopped" and states.get(seg_id) == "stale":
            # Given up when its lease lapsed, and asked to stop: the controller dropped what
            # it reported and ignores what comes after (the re-run from the trial's last
            # checkpoint supersedes it), as for a segment whose VM went away.
            continue
        d, p = r.executor.delivered_reports[seg_id], stored.get(seg_id, 0)
        delivered += d
        persisted += p
        lost += max(0, d - p)
        # A segment stopped ahead of a spot interruption is stored as preempted.
        state_mismatches += states.get(seg_id) != status and not (
            status == "stopped" and states.get(seg_id) == "preempted")
    duplicates = r.store.query(
        "SELECT COALESCE(SUM(n - 1), 0) AS d FROM (SELECT COUNT(*) AS n FROM reports "
        "GROUP BY trial_id, step)")[0]["d"]
    faults = Counter(r.provider.fault_counts) + Counter(r.executor.fault_counts)
    faults["register_timeouts"] = register_timeouts
    faults["stale_segments"] = sum(s == "stale" for s in states.values())
    faults["failed_trials"] = int((r.trials["state"] == "failed").sum()) if len(r.trials) else 0
    wall = r.wall_s
    errored = r.outcome.state == "failed"
    return {
        "state": r.outcome.state, "reason": r.outcome.reason, "message": r.outcome.message,
        "wall_s": wall, "late_s": wall - deadline, "spend_usd": r.spend_usd,
        "provider_bill_usd": bill, "overrun": r.spend_usd > budget + OVERRUN_EPS_USD,
        "bill_overrun": bill > budget + OVERRUN_EPS_USD,
        "ledger_mismatch": abs(bill - r.spend_usd) > OVERRUN_EPS_USD,
        "leaked_instances": leaked,
        "met": not errored and wall <= deadline + TOLERANCE_S,
        "instances": len(r.store.instances()), "segments": len(states),
        "delivered_reports": delivered, "persisted_reports": persisted, "lost_results": lost,
        "duplicate_reports": int(duplicates), "segment_state_mismatches": state_mismatches,
        "trials": len(r.trials), "best_value": r.best_value,
        "brackets": 1 + sum(e["kind"] == "bracket" for e in r.store.journal()),
        "faults": {k: int(faults.get(k, 0)) for k in FAULT_KEYS},
    }


# -- summary ----------------------------------------------------------------------------------
def summarise(runs: list[dict[str, Any]], wall_s: float, jobs: int) -> dict[str, Any]:
    ok = [r for r in runs if "crash" not in r]
    n = len(runs)
    faults = Counter()
    for r in ok:
        faults.update(r["faults"])
    reasons = Counter(r["reason"] for r in ok)
    late = [r["late_s"] for r in ok]
    return {
        "schedules": n,
        "budget_overruns": sum(bool(r["overrun"]) for r in ok),
        "deadline_met_frac": sum(bool(r["met"]) for r in ok) / n if n else None,
        "lost_results": sum(r["lost_results"] for r in ok),
        "crashes": n - len(ok),
        "errors": reasons.get("error", 0),
        "reasons": dict(sorted(reasons.items())),
        "finished_frac": reasons.get("done", 0) / n if n else None,
        "deadline_tolerance_s": TOLERANCE_S,
        "late_s_max": max(late) if late else None,
        "overrun_usd_max": max((r["spend_usd"] - r["cost_budget_usd"] for r in ok),
                               default=None),
        "bill_overruns": sum(bool(r["bill_overrun"]) for r in ok),
        "ledger_mismatches": sum(bool(r["ledger_mismatch"]) for r in ok),
        "leaked_instances": sum(r["leaked_instances"] for r in ok),
        "delivered_reports": sum(r["delivered_reports"] for r in ok),
        "persisted_reports": sum(r["persisted_reports"] for r in ok),
        "duplicate_reports": sum(r["duplicate_reports"] for r in ok),
        "segment_state_mismatches": sum(r["segment_state_mismatches"] for r in ok),
        "faults": {k: int(faults.get(k, 0)) for k in FAULT_KEYS},
        "schedules_with": {k: sum(r["faults"][k] > 0 for r in ok) for k in FAULT_KEYS},
        "more_brackets": sum(r["brackets"] - 1 for r in ok),
        "wall_s": wall_s,
        "jobs": jobs,
    }


def targets_report(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for key, (op, limit) in TARGETS.items():
        v = summary[key]
        met = None if v is None else (v <= limit if op == "<=" else v >= limit)
        out[key] = {"value": v, "target": f"{op} {limit:g}", "met": met}
    return out


# -- output -----------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def summary_table(summary: dict[str, Any]) -> Table:
    t = Table(title=f"elastune under faults: {summary['schedules']} random schedules "
                    "(simulation, real controller)")
    for col in ("figure", "value", "target", "met"):
        t.add_column(col, justify="left" if col == "figure" else "right")
    for key, row in targets_report(summary).items():
        met = {True: "[green]yes[/]", False: "[red]NO[/]", None: "n/a"}[row["met"]]
        t.add_row(key, _fmt(row["value"]), row["target"], met)
    for key in ("crashes", "errors", "finished_frac", "deadline_tolerance_s", "late_s_max",
                "overrun_usd_max", "bill_overruns", "ledger_mismatches", "leaked_instances",
                "delivered_reports", "persisted_reports", "duplicate_reports",
                "segment_state_mismatches"):
        t.add_row(key, _fmt(summary[key]), "", "")
    t.add_row("reasons", ", ".join(f"{k} {v}" for k, v in summary["reasons"].items()), "", "")
    return t


def faults_table(summary: dict[str, Any]) -> Table:
    t = Table(title="Faults that struck")
    for col in ("fault", "count", "schedules"):
        t.add_column(col, justify="left" if col == "fault" else "right")
    for key in FAULT_KEYS:
        t.add_row(key, str(summary["faults"][key]), str(summary["schedules_with"][key]))
    return t


def misses_table(runs: list[dict[str, Any]], limit: int = 20) -> Table | None:
    bad = [r for r in runs if "crash" in r or r["overrun"] or not r["met"] or r["lost_results"]]
    if not bad:
        return None
    t = Table(title=f"Schedules that missed a target (first {min(limit, len(bad))} of "
                    f"{len(bad)})")
    for col in ("#", "task", "policy", "reason", "late s", "spend / budget", "lost", "message"):
        t.add_column(col)
    for r in bad[:limit]:
        if "crash" in r:
            t.add_row(str(r["index"]), r["task"], r["policy"], "crash", "", "", "",
                      r["crash"].strip().splitlines()[-1][:80])
            continue
        t.add_row(str(r["index"]), r["task"], r["policy"], r["reason"], f"{r['late_s']:.0f}",
                  f"{r['spend_usd']:.3f} / {r['cost_budget_usd']:.3f}", str(r["lost_results"]),
                  (r["message"] or "")[:80])
    return t


# -- main -------------------------------------------------------------------------------------
def run_all(data_dir: Path, schedules: int, seed: int, jobs: int,
            log: Any = None, chosen: bool = False) -> list[dict[str, Any]]:
    by_set = tasks_by_set(data_dir)
    if not by_set:
        raise SystemExit(f"no task in {data_dir}")
    runs: list[dict[str, Any]] = []
    step = max(1, schedules // 10)
    # Spawned workers with a fixed hash seed: the same --seed gives the same figures.
    saved = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = saved if saved is not None else HASH_SEED
    try:
        with ProcessPoolExecutor(max_workers=max(1, min(jobs, schedules)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(run_schedule, str(data_dir), by_set, seed, i, chosen)
                       for i in range(schedules)]
            for k, fut in enumerate(as_completed(futures), 1):
                runs.append(fut.result())
                if log is not None and (k % step == 0 or k == schedules):
                    log(f"[{k}/{schedules}] schedules run")
    finally:
        if saved is None:
            os.environ.pop("PYTHONHASHSEED", None)
    runs.sort(key=lambda r: r["index"])
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedules", type=int, default=1000, help="random fault schedules")
    ap.add_argument("--seed", type=int, default=0, help="draws the schedules")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="worker processes (default: the CPUs)")
    ap.add_argument("--data", type=Path, default=None,
                    help="curve directory (default: ../shared/data if present, else the sample)")
    ap.add_argument("--chosen", action="store_true",
                    help="run every schedule as a sweep whose number of trials the planner "
                         "chose (SHA, the re-planner with the cost budget, more brackets)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    for name in ("schedules", "jobs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} is {getattr(args, name)}, but must be >= 1")
    data_dir = args.data if args.data is not None else default_data_dir()
    if not data_dir.is_dir():
        ap.error(f"--data {str(data_dir)!r} is not a directory")
    err = Console(stderr=True, width=160)
    out = Console(stderr=True, width=160) if args.json else Console(width=160)
    started = time.perf_counter()
    out.print(f"data: {data_dir}; {args.schedules} schedule(s), seed {args.seed}, "
              f"{args.jobs} process(es)")
    runs = run_all(data_dir, args.schedules, args.seed, args.jobs,
                   log=lambda m: err.print(f"[dim]{m}[/]"), chosen=args.chosen)
    wall = time.perf_counter() - started
    summary = summarise(runs, wall, args.jobs)
    if args.json:
        details = {"data_dir": str(data_dir), "seed": args.seed, "chosen": args.chosen,
                   "targets": targets_report(summary),
                   "settings": {"register_timeout_s": SETTINGS.register_timeout_s,
                                "boot_timeout_s": SETTINGS.boot_timeout_s,
                                "stop_grace_s": SETTINGS.stop_grace_s,
                                "tick_s": SETTINGS.tick_s, "reaction_s": SETTINGS.reaction_s},
                   "runs": runs}
        print(json.dumps({"summary": summary, "details": details}, default=_json_default))
    else:
        out.print(summary_table(summary))
        out.print(faults_table(summary))
        misses = misses_table(runs)
        if misses is not None:
            out.print(misses)
        out.print(f"{args.schedules} schedules in {wall:.1f} s wall ({args.jobs} process(es))")
    return 0


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


if __name__ == "__main__":
    sys.exit(main())
