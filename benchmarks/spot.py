"""What spot capacity saves, and what it risks, replayed from measured spot-capacity traces.

Same job, simulator and tasks as ``benchmarks/planner.py`` (synchronous SHA, eta 3, 81 trials,
boot U(60, 180) s, step noise +-20 %, tasks discovered from ``--data`` and time-scaled as
there), on GCP: the price book's cheapest 1-GPU machine type in ``--region`` (us-central1),
on-demand at its catalog price everywhere, spot in each zone at the catalog spot price times
the zone's trace price over the region's. Spot capacity is replayed from ``--traces`` (a folder
laid out like ``../shared/data/spot_traces``; zones discovered from its files): per zone a
launch gets what the trace's count leaves beside the VMs the sweep holds there, a zone whose
count falls below what is held takes its youngest VMs back with GCE's 30 s notice, and each
seed starts the trace at its own offset. A sweep is short beside the trace's spells (hours),
so trace time runs ``compression`` times faster than the sweep's clock: the on-demand
makespan covers ``--trace-hours`` of trace (printed per case).

Per task, seed and deadline (1.5x and 3x the makespan with one worker per trial), sweeps run
through ``tuner.sim.simulate`` as a user writes them (gcp, that type, ``provider.zones``,
``provider.spot``; a cost budget of twice the on-demand run's spend, to count overruns),
following the planner's plan, re-planned online:

- ``on-demand``: ``spot: false``;
- ``spot-1-zone``: ``spot: true`` in one zone, no fallback (each (task, seed) the next zone
  whose spot price is below on-demand);
- ``uniform-progress-1-zone``, ``uniform-progress``: Can't Be Late's Uniform Progress
  (``spot: uniform-progress``) in that zone, and over every zone (cheapest first; the
  summary's ``uniform_progress_*`` keys);
- ``deadline-safe``, ``exploratory``, ``tuning-aware`` (elastune's default here): over every
  zone.

Printed per policy: the median cost over the on-demand run's (same case), the fraction of
deadlines met (a sweep that *finished* by its deadline), preemptions and budget overruns.

    python benchmarks/spot.py [--traces DIR] [--data DIR] [--quick] [--max-tasks 4]
                              [--seeds 3] [--trace-hours 6] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks.planner import (  # noqa: E402
    BILLING_MINIMUM_S,
    BOOT,
    STEP_NOISE,
    Task,
    select_tasks,
    sha_scheduler,
)
from budgets import InstanceType, PriceBook  # noqa: E402
from tuner.sim import (  # noqa: E402
    SimFaults,
    default_data_dir,
    default_traces_dir,
    load_curves,
    load_spot_traces,
    replay_for,
    simulate,
    zone_price_factors,
)

FACTORS = (1.5, 3.0)
DEFAULT_POLICY = "tuning-aware"
# name: (provider.spot, every zone? else the seed's home zone)
POLICIES: dict[str, tuple[bool | str, bool]] = {
    "on-demand": (False, True),
    "spot-1-zone": (True, False),
    "uniform-progress-1-zone": ("uniform-progress", False),
    "uniform-progress": ("uniform-progress", True),
    "deadline-safe": ("deadline-safe", True),
    "exploratory": ("exploratory", True),
    "tuning-aware": ("tuning-aware", True),
}
# The summary's Uniform Progress: over the same zones as elastune's policies (the published
# rule is for one zone; that run is in the table too).
UP_BASELINE = "uniform-progress"
NOTICE_S = 30.0       # GCE's preemption notice
BUDGET_X = 2.0        # the spot runs' cost budget, times the on-demand run's spend
# The makespan run has no deadline, and a sweep needs a budget: a cap it never reaches.
NO_CAP_USD = 1e9


def one_gpu_type(region: str) -> InstanceType:
    """The price book's cheapest GCP 1-GPU machine type with a spot price in ``region``."""
    return min((t for t in PriceBook().types("gcp", region, min_gpus=1)
                if t.gpus == 1 and t.spot_per_hour is not None),
               key=lambda t: t.on_demand_per_hour)


def home_zones(traces: dict[str, Any], itype: InstanceType) -> list[str]:
    """The zones a one-zone sweep may be given: those whose spot price is below on-demand
    (nobody buys spot dearer than on-demand), all of them if none is."""
    assert itype.spot_per_hour is not None
    factors = zone_price_factors(traces, itype.region)
    cheaper = [z for z in traces if itype.spot_per_hour * factors[z] < itype.on_demand_per_hour]
    return cheaper or list(traces)


def run_task_seed(data_dir: str, traces_dir: str, task: Task, seed: int, unit: int,
                  itype: InstanceType, trace_hours: float,
                  policies: list[str]) -> dict[str, Any]:
    """Every case of one (task, seed); ``unit`` (its index) picks the one-zone runs' zone, in
    turn over :func:`home_zones`."""
    t0 = time.perf_counter()
    logging.getLogger("tuner").setLevel(logging.ERROR)   # (interruption notices: many)
    curves = load_curves(data_dir, task.name)
    traces = load_spot_traces(traces_dir)
    zones = list(traces)
    homes = home_zones(traces, itype)
    home = homes[unit % len(homes)]
    n = task.num_trials
    provider = {"type": "gcp", "region": itype.region, "machine_types": [itype.name],
                "billing_minimum_s": BILLING_MINIMUM_S}
    sweep = {"scheduler": sha_scheduler(task), "num_trials": n, "provider": provider,
             "max_failures": 0,
             "profile": {"seconds_per_step": task.s_per_step, "boot_s": [BOOT.low, BOOT.high]}}
    static = {**sweep, "provider": {**provider, "scaling": "static", "workers": n}}
    base = simulate(static, curves, seed=seed, step_noise=STEP_NOISE,
                    time_scale=task.time_scale, time_budget=None, cost_budget=NO_CAP_USD)
    compression = max(1.0, trace_hours * 3600.0 / base.wall_s)
    replay = replay_for(traces, None, seed=seed, compression=compression)
    faults = SimFaults(spot_notice_s=NOTICE_S)
    cases = []
    for f in FACTORS:
        deadline = f * base.wall_s
        runs: dict[str, dict[str, Any]] = {}
        od_spend = None
        for name in policies:
            spot, everywhere = POLICIES[name]
            budget = None if od_spend is None else BUDGET_X * od_spend
            r = simulate({**sweep, "provider": {**provider, "spot": spot,
                                                "zones": zones if everywhere else [home]}},
                         curves, seed=seed, step_noise=STEP_NOISE, time_scale=task.time_scale,
                         spot_traces=replay, faults=faults, time_budget=deadline,
                         cost_budget=budget, raise_errors=False)
            if name == "on-demand":
                od_spend = r.spend_usd
            instances = r.store.instances()
            runs[name] = {
                "outcome": r.outcome.reason, "wall_s": r.wall_s, "spend_usd": r.spend_usd,
                "met": r.outcome.reason == "done" and r.wall_s <= deadline,
                "budget_respected": r.budget_respected, "best_value": r.best_value,
                "instances": len(instances),
                "spot_instances": sum(bool(i["spot"]) for i in instances),
                "zones_used": len({i["zone"] for i in instances if i["spot"]}),
                "preemptions": int(r.provider.fault_counts.get("preemptions", 0))
                if r.provider else 0,
            }
        od = runs["on-demand"]["spend_usd"]
        for run in runs.values():
            run["cost_vs_on_demand"] = run["spend_usd"] / od if od > 0 else None
        cases.append({"task": task.name, "seed": seed, "factor": f, "deadline_s": deadline,
                      "home_zone": home, "offset_s": replay.offset_s,
                      "compression": compression, "runs": runs})
    return {"task": task.name, "seed": seed, "cases": cases,
            "elapsed_s": time.perf_counter() - t0}


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarise(cases: list[dict[str, Any]], policies: list[str]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for name in policies:
        runs = [c["runs"][name] for c in cases]
        by_factor = {}
        for f in FACTORS:
            sub = [c["runs"][name] for c in cases if c["factor"] == f]
            by_factor[f"{f:g}"] = {
                "cost_vs_on_demand_median": _median(
                    [r["cost_vs_on_demand"] for r in sub if r["cost_vs_on_demand"] is not None]),
                "deadline_met_frac": sum(r["met"] for r in sub) / len(sub) if sub else None}
        per[name] = {
            "deadline_met_frac": sum(r["met"] for r in runs) / len(runs) if runs else None,
            "preemptions": sum(r["preemptions"] for r in runs),
            "budget_overruns": sum(not r["budget_respected"] for r in runs),
            "by_deadline": by_factor,
        }
    d, up = per[DEFAULT_POLICY], per[UP_BASELINE]
    return {
        "cost_ratio_vs_on_demand_median_by_deadline": {
            k: v["cost_vs_on_demand_median"] for k, v in d["by_deadline"].items()},
        "uniform_progress_cost_ratio_vs_on_demand_median_by_deadline": {
            k: v["cost_vs_on_demand_median"] for k, v in up["by_deadline"].items()},
        "deadline_met_frac": d["deadline_met_frac"],
        "uniform_progress_deadline_met_frac": up["deadline_met_frac"],
        "uniform_progress_1_zone_cost_ratio_vs_on_demand_median_by_deadline": {
            k: v["cost_vs_on_demand_median"]
            for k, v in per["uniform-progress-1-zone"]["by_deadline"].items()}
        if "uniform-progress-1-zone" in per else None,
        "budget_overruns": d["budget_overruns"],
        "cases": len(cases),
        "default_policy": DEFAULT_POLICY,
        "policies": per,
    }


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def summary_table(summary: dict[str, Any], policies: list[str]) -> Table:
    t = Table(title="Spot policies on replayed capacity against on-demand (same cases)")
    t.add_column("policy")
    for f in FACTORS:
        t.add_column(f"cost/on-demand @{f:g}x", justify="right")
        t.add_column(f"met @{f:g}x", justify="right")
    t.add_column("preemptions", justify="right")
    t.add_column("overruns", justify="right")
    for name in policies:
        s = summary["policies"][name]
        cells = []
        for f in FACTORS:
            b = s["by_deadline"][f"{f:g}"]
            cells += [_fmt(b["cost_vs_on_demand_median"]), _fmt(b["deadline_met_frac"])]
        label = name + (" (default)" if name == DEFAULT_POLICY else "")
        t.add_row(label, *cells, str(s["preemptions"]), str(s["budget_overruns"]))
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=None,
                    help="spot-trace folder (default: ../shared/data/spot_traces if present, "
                         "else the sample)")
    ap.add_argument("--data", type=Path, default=None,
                    help="curve directory (default: ../shared/data if present, else the sample)")
    ap.add_argument("--quick", action="store_true", help="1 task per set, 1 seed")
    ap.add_argument("--max-tasks", type=int, default=None,
                    help="at most this many tasks, round-robin over sets (default 4)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 3)")
    ap.add_argument("--trace-hours", type=float, default=6.0,
                    help="hours of trace the on-demand makespan covers (default 6)")
    ap.add_argument("--region", default="us-central1",
                    help="the catalog region of the machine type and its prices")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="comma-separated subset of the policies (on-demand, "
                         f"{UP_BASELINE} and {DEFAULT_POLICY} always run)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                    help="worker processes (default: min(4, CPUs))")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    for name in ("max_tasks", "seeds", "jobs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')} is {v}, but must be >= 1")
    hours = args.trace_hours
    if not (hours > 0 and hours < float("inf")):
        ap.error(f"--trace-hours is {hours}, but must be a finite number > 0")
    asked = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in asked if p not in POLICIES]
    if unknown:
        ap.error(f"--policies names {', '.join(unknown)}; known: {', '.join(POLICIES)}")
    policies = [p for p in POLICIES
                if p in asked or p in ("on-demand", UP_BASELINE, DEFAULT_POLICY)]
    traces_dir = args.traces if args.traces is not None else default_traces_dir()
    try:
        zones = list(load_spot_traces(traces_dir))
    except (OSError, ValueError) as exc:
        ap.error(f"--traces {str(traces_dir)!r}: {exc}")
    data_dir = args.data if args.data is not None else default_data_dir()
    if not data_dir.is_dir():
        ap.error(f"--data {str(data_dir)!r} is not a directory")
    seeds = args.seeds or (1 if args.quick else 3)
    max_tasks = args.max_tasks if args.max_tasks is not None else (None if args.quick else 4)
    err = Console(stderr=True, width=160)
    out = Console(stderr=True, width=160) if args.json else Console(width=160)
    started = time.perf_counter()
    tasks = select_tasks(data_dir, quick=args.quick, max_tasks=max_tasks, full_fits=False,
                         log=lambda m: err.print(f"[dim]{m}[/]"))
    if args.quick:   # one task per set
        firsts: dict[str, Task] = {}
        for t in tasks:
            firsts.setdefault(t.name.split("/")[0], t)
        tasks = list(firsts.values())
    if not tasks:
        err.print(f"no usable task in {data_dir}")
        return 1
    try:
        itype = one_gpu_type(args.region)
    except ValueError:
        ap.error(f"--region {args.region!r}: no priced GCP 1-GPU type with a spot price there")
    out.print(f"data: {data_dir}; traces: {traces_dir} ({len(zones)} zones); {len(tasks)} "
              f"task(s) x {seeds} seed(s) x {len(FACTORS)} deadlines; {itype.name} at "
              f"${itype.on_demand_per_hour:.3f}/h on demand, ${itype.spot_per_hour:.3f}/h spot "
              f"in {itype.region}; trace time compressed so that the on-demand makespan covers "
              f"{hours:g} trace hours")
    units = [(t, s) for t in tasks for s in range(seeds)]
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, min(args.jobs, len(units)))) as pool:
        futures = {pool.submit(run_task_seed, str(data_dir), str(traces_dir), t, s, k, itype,
                               hours, policies): (t, s)
                   for k, (t, s) in enumerate(units)}
        for i, fut in enumerate(as_completed(futures), 1):
            results.append(fut.result())
            t, s = futures[fut]
            err.print(f"[{i}/{len(units)}] {t.name} seed {s}: "
                      f"{results[-1]['elapsed_s']:.1f} s")
    order = {(t.name, s): i for i, (t, s) in enumerate(units)}
    results.sort(key=lambda r: order[(r["task"], r["seed"])])
    cases = [c for r in results for c in r["cases"]]
    summary = summarise(cases, policies)
    wall = time.perf_counter() - started
    if args.json:
        print(json.dumps({"summary": summary, "details": {
            "data_dir": str(data_dir), "traces_dir": str(traces_dir), "zones": zones,
            "seeds": seeds, "trace_hours": hours, "instance_type": itype.name,
            "notice_s": NOTICE_S, "deadline_factors": list(FACTORS), "policies": policies,
            "tasks": [t.name for t in tasks], "wall_s": wall, "cases": cases}}))
    else:
        for c in cases:
            out.print(f"[dim]{c['task']} seed {c['seed']} @{c['factor']:g}x: home zone "
                      f"{c['home_zone']}, trace offset {c['offset_s'] / 3600:.1f} h, "
                      f"compression {c['compression']:.1f}x[/]")
        out.print(summary_table(summary, policies))
        out.print(f"{len(cases)} cases x {len(policies)} policies in {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
