"""What spot capacity saves, and what it risks, with the planner's deadline-safe policies.

Same job, simulator and tasks as ``benchmarks/planner.py`` (synchronous SHA, eta 3, 81 trials,
one 1-GPU type from the price book with its on-demand and spot prices, boot U(60, 180) s, step
noise +-20 %, tasks discovered from ``--data`` and time-scaled as there), plus spot preemptions:
each spot VM is taken back at ``--preemptions-per-hour`` (a Poisson process; a preempted
segment loses its work since the last checkpoint, and the controller buys a replacement).
Per task, seed and deadline (1.5x and 3x the makespan with one worker per trial, as measured
there), four sweeps run through ``tuner.sim.simulate`` as a user writes them (AWS, that type,
``profile.seconds_per_step`` the task's median step and ``profile.boot_s`` [60, 180]), each
following the planner's plan, re-planned online, and differing only in ``provider.spot``:

- ``on-demand``: every instance on-demand (``false``, the planner benchmark's policy);
- ``spot``: every instance on spot (``true``), no fallback;
- ``deadline-safe``: spot until the slack before the deadline could not absorb one more
  preemption, then on-demand (``"deadline-safe"``, Can't Be Late's safety net);
- ``exploratory``: the same, and the last rung's survivors on on-demand (``"exploratory"``).

The spot policies plan with :attr:`SpotPolicy.margin` of the time left kept free. Printed per
policy: the median cost over the on-demand run's (same case), the fraction of deadlines met (a
sweep that *finished* by its deadline) and the preemptions seen.

    python benchmarks/spot.py [--data DIR] [--quick] [--max-tasks 4] [--seeds 3]
                              [--preemptions-per-hour 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
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
    one_gpu_type,
    select_tasks,
    sha_scheduler,
)
from budgets import InstanceType  # noqa: E402
from tuner.sim import default_data_dir, load_curves, simulate  # noqa: E402

FACTORS = (1.5, 3.0)
POLICIES = ("on-demand", "spot", "deadline-safe", "exploratory")
SPOT = {"on-demand": False, "spot": True, "deadline-safe": "deadline-safe",
        "exploratory": "exploratory"}
# The makespan run has no deadline, and a sweep needs a budget: a cap it never reaches.
NO_CAP_USD = 1e9


def run_task_seed(data_dir: str, task: Task, seed: int, itype: InstanceType,
                  rate: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    curves = load_curves(data_dir, task.name)
    n = task.num_trials
    provider = {"type": "aws", "region": itype.region, "instance_types": [itype.name],
                "billing_minimum_s": BILLING_MINIMUM_S}
    # A trial that fails is not retried (max_failures 0), as in the planner benchmark's runs:
    # a diverged curve replays its failure at the same step every time.
    sweep = {"scheduler": sha_scheduler(task), "num_trials": n, "provider": provider,
             "max_failures": 0,
             "profile": {"seconds_per_step": task.s_per_step, "boot_s": [BOOT.low, BOOT.high]}}
    world = dict(seed=seed, step_noise=STEP_NOISE, time_scale=task.time_scale)
    base = simulate({**sweep, "provider": {**provider, "scaling": "static", "workers": n}},
                    curves, **world, time_budget=None, cost_budget=NO_CAP_USD)
    cases = []
    for f in FACTORS:
        deadline = f * base.wall_s
        runs: dict[str, dict[str, Any]] = {}
        for name in POLICIES:
            r = simulate({**sweep, "provider": {**provider, "spot": SPOT[name]}}, curves,
                         **world, preemptions_per_hour=rate, time_budget=deadline,
                         cost_budget=None)
            instances = r.store.instances()
            runs[name] = {
                "outcome": r.outcome.reason, "wall_s": r.wall_s, "spend_usd": r.spend_usd,
                "met": r.outcome.reason == "done" and r.wall_s <= deadline,
                "best_value": r.best_value,
                "instances": len(instances),
                "spot_instances": sum(bool(i["spot"]) for i in instances),
                "preemptions": int(r.provider.fault_counts.get("preemptions", 0))
                if r.provider else 0,
            }
        od = runs["on-demand"]["spend_usd"]
        for run in runs.values():
            run["cost_vs_on_demand"] = run["spend_usd"] / od if od > 0 else None
        cases.append({"task": task.name, "seed": seed, "factor": f, "deadline_s": deadline,
                      "runs": runs})
    return {"task": task.name, "seed": seed, "cases": cases,
            "elapsed_s": time.perf_counter() - t0}


def summarise(cases: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"cases": len(cases)}
    for name in POLICIES:
        runs = [c["runs"][name] for c in cases]
        ratios = [r["cost_vs_on_demand"] for r in runs if r["cost_vs_on_demand"] is not None]
        by_factor = {}
        for f in FACTORS:
            sub = [c["runs"][name] for c in cases if c["factor"] == f]
            rs = [r["cost_vs_on_demand"] for r in sub if r["cost_vs_on_demand"] is not None]
            by_factor[f"{f:g}"] = {
                "cost_vs_on_demand_median": statistics.median(rs) if rs else None,
                "deadline_met_frac": sum(r["met"] for r in sub) / len(sub) if sub else None}
        out[name] = {
            "cost_vs_on_demand_median": statistics.median(ratios) if ratios else None,
            "deadline_met_frac": sum(r["met"] for r in runs) / len(runs) if runs else None,
            "preemptions": sum(r["preemptions"] for r in runs),
            "by_deadline": by_factor,
        }
    return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def summary_table(summary: dict[str, Any]) -> Table:
    t = Table(title="Spot policies against on-demand (same planner, same cases)")
    t.add_column("policy")
    for f in FACTORS:
        t.add_column(f"cost/on-demand @{f:g}x", justify="right")
        t.add_column(f"met @{f:g}x", justify="right")
    t.add_column("cost/on-demand", justify="right")
    t.add_column("met", justify="right")
    t.add_column("preemptions", justify="right")
    for name in POLICIES:
        s = summary[name]
        cells = []
        for f in FACTORS:
            b = s["by_deadline"][f"{f:g}"]
            cells += [_fmt(b["cost_vs_on_demand_median"]), _fmt(b["deadline_met_frac"])]
        t.add_row(name, *cells, _fmt(s["cost_vs_on_demand_median"]),
                  _fmt(s["deadline_met_frac"]), str(s["preemptions"]))
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None,
                    help="curve directory (default: ../shared/data if present, else the sample)")
    ap.add_argument("--quick", action="store_true", help="1 task per set, 1 seed")
    ap.add_argument("--max-tasks", type=int, default=None,
                    help="at most this many tasks, round-robin over sets (default 4)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 3)")
    ap.add_argument("--preemptions-per-hour", type=float, default=0.5,
                    help="rate at which each spot VM is taken back (default 0.5)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                    help="worker processes (default: min(4, CPUs))")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    for name in ("max_tasks", "seeds", "jobs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')} is {v}, but must be >= 1")
    rate = args.preemptions_per_hour
    if not (rate >= 0 and rate < float("inf")):
        ap.error(f"--preemptions-per-hour is {rate}, but must be a finite number >= 0")
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
    if args.quick:
        seen: set[str] = set()
        tasks = [t for t in tasks if not (t.name.split("/")[0] in seen
                                          or seen.add(t.name.split("/")[0]))]
    if not tasks:
        err.print(f"no usable task in {data_dir}")
        return 1
    itype = one_gpu_type()
    out.print(f"data: {data_dir}; {len(tasks)} task(s) x {seeds} seed(s) x {len(FACTORS)} "
              f"deadlines; {itype.name} at ${itype.on_demand_per_hour:.3f}/h on demand, "
              f"${itype.spot_per_hour:.3f}/h spot; {rate:g} preemptions per spot VM-hour")
    units = [(t, s) for t in tasks for s in range(seeds)]
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, min(args.jobs, len(units)))) as pool:
        futures = {pool.submit(run_task_seed, str(data_dir), t, s, itype, rate): (t, s)
                   for t, s in units}
        for i, fut in enumerate(as_completed(futures), 1):
            results.append(fut.result())
            t, s = futures[fut]
            err.print(f"[{i}/{len(units)}] {t.name} seed {s}: "
                      f"{results[-1]['elapsed_s']:.1f} s")
    order = {(t.name, s): i for i, (t, s) in enumerate(units)}
    results.sort(key=lambda r: order[(r["task"], r["seed"])])
    cases = [c for r in results for c in r["cases"]]
    summary = summarise(cases)
    wall = time.perf_counter() - started
    if args.json:
        print(json.dumps({"summary": summary, "details": {
            "data_dir": str(data_dir), "seeds": seeds, "preemptions_per_hour": rate,
            "deadline_factors": list(FACTORS), "policies": list(POLICIES),
            "tasks": [t.name for t in tasks], "wall_s": wall, "cases": cases}}))
    else:
        out.print(summary_table(summary))
        out.print(f"{len(cases)} cases x {len(POLICIES)} policies in {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
