"""How close the planner comes to the cheapest per-stage cluster chosen in hindsight.

``benchmarks/planner.py`` scores the planner against Static-min, the smallest fixed cluster
that meets the deadline, found in hindsight. This asks the same of elastic clusters. For each
case of a planner benchmark's ``--json`` output (task, seed, deadline, and what Static-min and
the planner paid), it searches for the cheapest ``StageWorkers`` cluster (a worker count per
stage, idle workers kept for the next stage or let go) that finishes by the deadline, every
candidate the planner benchmark's job as a sweep (``tuner.sim.simulate``, a fixed cluster of
the first stage's count) whose cluster the oracle then resizes per stage (``oracle_scaling``:
no sweep can name a cluster chosen in hindsight), with the case's own seed: the same step
times, boots and noise, known in advance. Its bill over Static-min's is what the cost targets could
ask of a per-stage cluster that knew the run before it began; the planner's bill over it is
what planning online from a prior costs; its bill over the lower bound (the planner run's
GPU-seconds at the per-GPU price, as the planner benchmark counts it) is what the lower-bound
target could ask.

The search (per case): counts are wave-aligned (``ceil(m / waves)`` for a stage of ``m``
trials); for each count of the first stage, each later stage in turn takes its cheapest count
that still meets the deadline (the stages after it at one worker per trial meanwhile), with
idle workers kept and let go; then up to two passes change one stage at a time from the best
found. It is not exhaustive, so a cheaper cluster may exist: the hindsight figures are upper
bounds on the cheapest per-stage cluster's bill. A case where no candidate finishes is left
out. Replays use the planner JSON's settings (early promotion, profile, the same tasks, time
scales and instance type); ``--data`` defaults to its data directory.

    python benchmarks/planner.py --data DIR --json > planner.json
    python benchmarks/hindsight.py planner.json [--data DIR] [--deadlines 1.25,1.5,3,6]
                                   [--seeds 0] [--max-tasks N] [--jobs N] [--json]

Hand-written search: the cluster is judged by whole simulated runs (boots, stragglers and the
controller's releases included), which no solver's model holds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks.planner import (  # noqa: E402
    BOOT,
    ETA,
    TARGETS,
    load_curves,
    make_task,
    one_gpu_type,
    sha_scheduler,
    sim_world,
    sweep_of,
)
from budgets import JobShape, StageWorkers  # noqa: E402
from tuner.sim import simulate  # noqa: E402

PASSES = 2   # single-stage changes tried from the best cluster of the first search


def wave_counts(m: int) -> list[int]:
    """Worker counts that give a stage of ``m`` trials a distinct number of waves."""
    return sorted({math.ceil(m / waves) for waves in range(1, m + 1)})


def search(run: Callable[[tuple[int, ...]], tuple[bool, float]],
           sizes: list[int]) -> tuple[tuple[int, ...], float] | None:
    """The cheapest (keep, *counts) found that meets the deadline, and its bill; ``run``
    maps such a tuple to (met, spend). None when no candidate meets it."""
    best: tuple[int, ...] | None = None
    cost = math.inf
    for keep in (1, 0):
        for first in wave_counts(sizes[0]):
            counts = [first, *sizes[1:]]
            met, spend = run((keep, *counts))
            if not met:
                continue
            for k in range(1, len(sizes)):
                for w in wave_counts(sizes[k]):
                    cand = [*counts[:k], w, *counts[k + 1:]]
                    ok, c = run((keep, *cand))
                    if ok and c < spend:
                        counts, spend = cand, c
            if spend < cost:
                best, cost = (keep, *counts), spend
    if best is None:
        return None
    for _ in range(PASSES):
        improved = False
        for k in range(len(sizes)):
            for w in wave_counts(sizes[k]):
                cand = (*best[:k + 1], w, *best[k + 2:])
                ok, c = run(cand)
                if ok and c < cost - 1e-9:
                    best, cost, improved = cand, c, True
        if not improved:
            break
    return best, cost


def oracle_sweep(task: Any, workers: int, early_promotion: bool, profile_kind: str
                 ) -> dict[str, Any]:
    """The planner benchmark's job as a sweep on a fixed cluster of ``workers`` (a per-stage
    cluster's first count), which the oracle's ``StageWorkers`` then resizes per stage."""
    sched = {**sha_scheduler(task), "early_promotion": early_promotion}
    return sweep_of(task, one_gpu_type(), profile_kind, sched, task.num_trials,
                    scaling="static", workers=workers)


def run_cases(data_dir: str, name: str, seed: int, cases: list[dict[str, Any]],
              early_promotion: bool, profile_kind: str = "median") -> list[dict[str, Any]]:
    """The hindsight search of each case of one task and seed."""
    task = make_task(Path(data_dir), name)
    assert task is not None, name
    curves = load_curves(data_dir, name)
    n = task.num_trials
    sizes = JobShape(n, 1, task.max_resource, ETA).stage_sizes()
    out = []
    for case in cases:
        t0 = time.perf_counter()
        deadline = case["deadline_s"]
        memo: dict[tuple[int, ...], tuple[bool, float]] = {}

        def run(cand: tuple[int, ...], deadline: float = deadline,
                memo: dict[tuple[int, ...], tuple[bool, float]] = memo) -> tuple[bool, float]:
            if cand not in memo:
                keep, *counts = cand
                r = simulate(oracle_sweep(task, counts[0], early_promotion, profile_kind),
                             curves, **sim_world(task, seed), time_budget=deadline,
                             cost_budget=None,
                             oracle_scaling=StageWorkers(counts, boot_s=BOOT.mean,
                                                         keep=bool(keep)))
                memo[cand] = (r.outcome.reason == "done" and r.wall_s <= deadline,
                              r.spend_usd)
            return memo[cand]

        found = search(run, sizes)
        smin = case["static_min"]["spend_usd"]
        plan = case["planner"]
        rec: dict[str, Any] = {
            "task": name, "seed": seed, "factor": case["factor"], "deadline_s": deadline,
            "static_min_usd": smin, "planner_usd": plan["spend_usd"],
            "planner_met": bool(plan.get("met")), "simulations": len(memo),
            "elapsed_s": round(time.perf_counter() - t0, 1), "hindsight": None}
        if found is not None:
            (keep, *counts), spend = found
            lower = plan.get("lower_bound_usd")
            rec["hindsight"] = {"workers": counts, "keep": bool(keep), "spend_usd": spend,
                                "vs_static_min": spend / smin,
                                "vs_lower_bound": spend / lower if lower else None,
                                "planner_vs_hindsight": plan["spend_usd"] / spend}
        out.append(rec)
    return out


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per deadline factor over the cases the search found a cluster for."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(r["factor"], []).append(r)
    out = {}
    for f in sorted(by, key=float):
        found = [r for r in by[f] if r["hindsight"] is not None]
        out[f] = {
            "cases": len(by[f]), "found": len(found),
            "hindsight_vs_static_min_median": _median([r["hindsight"]["vs_static_min"]
                                                       for r in found]),
            "planner_vs_static_min_median": _median([r["planner_usd"] / r["static_min_usd"]
                                                     for r in found]),
            "planner_vs_hindsight_median": _median([r["hindsight"]["planner_vs_hindsight"]
                                                    for r in found]),
            # The lower bound is the planner run's (its GPU-seconds at the per-GPU price).
            "hindsight_vs_lower_bound_median": _median(
                [r["hindsight"]["vs_lower_bound"] for r in found
                 if r["hindsight"]["vs_lower_bound"] is not None]),
            "target_vs_static_min": TARGETS[f][1] if f in TARGETS else None,
        }
    return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("planner_json", type=Path,
                    help="the output of benchmarks/planner.py --json")
    ap.add_argument("--data", type=Path, default=None,
                    help="curve directory (default: the one the planner JSON names)")
    ap.add_argument("--deadlines", default="1.25,1.5,3,6",
                    help="deadline factors to search, comma-separated (default: all four)")
    ap.add_argument("--seeds", default="0",
                    help="seeds of the planner JSON to search, comma-separated (default 0)")
    ap.add_argument("--max-tasks", type=int, default=None,
                    help="at most this many tasks, in the planner JSON's order")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                    help="worker processes (default: min(4, CPUs))")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    try:
        doc = json.loads(args.planner_json.read_text())
        details = doc["details"]
        all_cases = details["cases"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        ap.error(f"planner_json {str(args.planner_json)!r} is not a planner benchmark's "
                 f"--json output: {exc}")
    try:
        seeds = {int(s) for s in args.seeds.split(",")}
    except ValueError:
        ap.error(f"--seeds is {args.seeds!r}, but must be integers, comma-separated")
    factors = {f.strip() for f in args.deadlines.split(",")}
    known = {c["factor"] for c in all_cases}
    if not factors <= known:
        ap.error(f"--deadlines {args.deadlines!r}: the planner JSON has {sorted(known, key=float)}")
    for name in ("max_tasks", "jobs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')} is {v}, but must be >= 1")
    data_dir = args.data if args.data is not None else Path(details["data_dir"])
    if not data_dir.is_dir():
        ap.error(f"--data {str(data_dir)!r} is not a directory")
    tasks = list(dict.fromkeys(c["task"] for c in all_cases))[:args.max_tasks]
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for c in all_cases:
        if c["task"] in tasks and c["seed"] in seeds and c["factor"] in factors \
                and c.get("static_min") and c.get("planner"):
            groups.setdefault((c["task"], c["seed"]), []).append(c)
    err = Console(stderr=True, width=160)
    out = Console(stderr=True, width=160) if args.json else Console(width=160)
    if not groups:
        have = sorted({c["seed"] for c in all_cases})
        ap.error(f"--seeds {args.seeds!r}: no case of the planner JSON at those seeds and "
                 f"deadlines has a Static-min and a planner run (its seeds: {have})")
    started = time.perf_counter()
    early = bool(details.get("early_promotion", False))
    profile_kind = details.get("profile", "median")
    records: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=min(args.jobs, len(groups))) as pool:
        futures = {pool.submit(run_cases, str(data_dir), t, s, cs, early, profile_kind): (t, s)
                   for (t, s), cs in groups.items()}
        for i, fut in enumerate(as_completed(futures), 1):
            recs = fut.result()
            records.extend(recs)
            t, s = futures[fut]
            err.print(f"[{i}/{len(futures)}] {t} seed {s}: "
                      f"{sum(r['simulations'] for r in recs)} simulations")
    order = {k: i for i, k in enumerate(groups)}
    records.sort(key=lambda r: (order[(r["task"], r["seed"])], float(r["factor"])))
    summary = summarise(records)
    wall = time.perf_counter() - started

    table = Table(title="Per-stage cluster chosen in hindsight (medians over the cases found)")
    for col in ("deadline", "cases", "found", "hindsight/smin", "plan/smin", "plan/hindsight",
                "target plan/smin", "hindsight/LB"):
        table.add_column(col, justify="right")
    for f, row in summary.items():
        table.add_row(f"{f}x", str(row["cases"]), str(row["found"]),
                      _fmt(row["hindsight_vs_static_min_median"]),
                      _fmt(row["planner_vs_static_min_median"]),
                      _fmt(row["planner_vs_hindsight_median"]),
                      _fmt(row["target_vs_static_min"]),
                      _fmt(row["hindsight_vs_lower_bound_median"]))
    out.print(table)
    out.print(f"{len(records)} case(s), {sum(r['simulations'] for r in records)} simulations, "
              f"{wall:.0f} s")
    if args.json:
        print(json.dumps({"summary": summary,
                          "details": {"planner_json": str(args.planner_json),
                                      "data_dir": str(data_dir), "wall_s": wall,
                                      "cases": records}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
