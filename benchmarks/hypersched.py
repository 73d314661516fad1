"""HyperSched's paper check: ASHA against ASHA with the deadline policy, on measured ImageNet
curves, in simulation.

The setting of Liaw et al., "HyperSched: Dynamic Resource Reallocation for Model Development on
a Deadline" (SoCC '19): a fixed cluster of 8 GPUs (``--layout``, default one instance of 8;
``2x4`` is two of 4), deadlines of 900, 1800 and 3600 s, eta = 4, the per-trial speedup of
ResNet-50 (``budgets.RESNET50_CIFAR10``: s(2) = 1.87, s(4) = 3.42, s(8) = 5.60). Every run is
a sweep through ``tuner.sim.simulate`` (the real controller and ASHA on a simulated clock): a
static AWS cluster (``provider.scaling: static``) of the V100 type with that many GPUs
(p3.16xlarge for 8; else the cheapest priced type with that many), ``profile.speedup:
resnet50_cifar10``, and for the policy ``scheduler.deadline_policy: hypersched``, whose
restart cost is the profile's (``setup_s``, then the step given up); nothing here decides.

Per task (the ImageNet tasks of ``--data``, found from the files: a task whose name says
``imagenet``; if there is none, those of the shipped sample ``budgets.SAMPLE_DIR``, and the
output says so):

- job: ASHA, eta 4, rungs 1, 4, 16, ... up to R, the largest power of 4 not above the median
  curve length (at most 64), and as many trials as the task has configurations (ASHA explores
  until the deadline, as in the paper; a trial that fails is not retried); step noise +-10 %;
  the cluster is up before the clock starts (no boot latency); every segment pays
  ``restart_s`` = 10 % of a median step before its first step (start-up and checkpoint
  restore: ``profile.setup_s``), and a step takes the median step (``profile.seconds_per_step``).
- deadlines: the paper's seconds scaled to the data's step times by
  ``scale = median seconds per step / REFERENCE_STEP_S``, where ``REFERENCE_STEP_S`` = 30 s is
  an assumed epoch of ResNet-50 on CIFAR-10 on one GPU (our assumption, not a figure from the
  paper); the factor is printed. On the OPDA AlexNet curves (298.6 s a step) it is about 10.
- figures per deadline: the best accuracy at the deadline (mean over seeds; the value each
  trial had reached, whether or not it finished), the number of trials evaluated (started),
  and for the policy the segments that ran on more than one GPU.

    python benchmarks/hypersched.py [--data DIR] [--seeds 3] [--layout 1x8|2x4]
                                    [--max-configs N] [--deadlines 900,1800,3600] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks.planner import largest_power  # noqa: E402
from budgets import RESNET50_CIFAR10, InstanceType, PriceBook  # noqa: E402
from tuner.sim import (  # noqa: E402
    SAMPLE_DIR,
    default_data_dir,
    discover,
    load_curves,
    simulate,
)

PAPER_DEADLINES_S = (900.0, 1800.0, 3600.0)
ETA = 4
MAX_R = 64
STEP_NOISE = 0.1
REFERENCE_STEP_S = 30.0       # assumed seconds of one epoch of the paper's workload on one GPU
RESTART_FRACTION = 0.1        # restart cost as a fraction of a median step
SPEEDUP = RESNET50_CIFAR10
SPEEDUP_KEY = "resnet50_cifar10"   # the sweep's profile.speedup naming SPEEDUP
POLICIES = ("asha", "hypersched")
REGION = "us-east-1"
V100 = "V100-16GB"                 # the GPU of AWS's p3 family (p3.16xlarge: 8 of them)


@dataclass(frozen=True)
class Task:
    name: str
    configs: int
    max_resource: int         # R
    s_per_step: float         # median seconds per step of the data
    scale: float              # paper seconds -> this task's seconds
    restart_s: float


def imagenet_tasks(data_dir: Path) -> tuple[Path, list[str], str | None]:
    """The resumable ImageNet tasks of ``data_dir``, else of the shipped sample (with a note
    saying so), else every resumable task of the sample."""
    def found(d: Path) -> list[str]:
        return [n for n in discover(d) if "imagenet" in n.lower() and load_curves(d, n).resumable]
    names = found(data_dir)
    if names:
        return data_dir, names, None
    names = found(SAMPLE_DIR)
    if names:
        return SAMPLE_DIR, names, (f"no ImageNet curve set in {data_dir}: using the shipped "
                                   f"sample {SAMPLE_DIR}")
    names = [n for n in discover(SAMPLE_DIR) if load_curves(SAMPLE_DIR, n).resumable]
    return SAMPLE_DIR, names, (f"no ImageNet curve set in {data_dir} or the shipped sample: "
                               "using the sample's other tasks")


def make_task(data_dir: Path, name: str, max_configs: int | None) -> Task:
    curves = load_curves(data_dir, name, max_configs=max_configs)
    lengths = [curves.last_step(c) for c in curves.config_ids() if curves.last_step(c) > 0]
    r = largest_power(ETA, min(MAX_R, float(np.median(lengths))))
    step = curves.step_seconds_median()
    return Task(name, len(curves), r, step, step / REFERENCE_STEP_S, RESTART_FRACTION * step)


def layout(text: str) -> tuple[int, int]:
    try:
        instances, gpus = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"layout is {text!r}, but must be like 1x8 or 2x4") from None
    if instances < 1 or gpus < 1:
        raise argparse.ArgumentTypeError(f"layout is {text!r}, but both numbers must be >= 1")
    return instances, gpus


def instance_type(gpus: int) -> InstanceType:
    """The AWS type of ``gpus`` GPUs the cluster rents: the V100 one, else the cheapest
    priced one; ValueError when none has that many."""
    types = [t for t in PriceBook().types("aws", REGION) if t.gpus == gpus]
    if not types:
        raise ValueError(f"no priced aws instance type in {REGION} has {gpus} GPUs")
    return min(types, key=lambda t: (t.gpu != V100, t.on_demand_per_hour))


def run_one(data_dir: Path, task: Task, deadline_s: float, policy: str, seed: int,
            instances: int, gpus: int, max_configs: int | None) -> dict[str, Any]:
    curves = load_curves(data_dir, task.name, max_configs=max_configs)
    scheduler = {"type": "asha", "min_resource": 1, "max_resource": task.max_resource,
                 "reduction_factor": ETA,
                 **({"deadline_policy": "hypersched"} if policy == "hypersched" else {})}
    sweep = {"scheduler": scheduler, "num_trials": len(curves), "max_failures": 0,
             "provider": {"type": "aws", "region": REGION,
                          "instance_types": [instance_type(gpus).name],
                          "scaling": "static", "workers": instances},
             "profile": {"seconds_per_step": task.s_per_step, "setup_s": task.restart_s,
                         "boot_s": 0, "speedup": SPEEDUP_KEY}}
    r = simulate(sweep, curves, seed=seed, boot_s=lambda rng: 0.0, step_noise=STEP_NOISE,
                 speedup=SPEEDUP, setup_s=task.restart_s, time_budget=deadline_s,
                 cost_budget=None)
    segments = r.store.segments()
    top = sum(s["stop_step"] == task.max_resource and s["state"] == "done" for s in segments)
    return {"best_value": r.best_value, "trials": len(r.trials), "segments": len(segments),
            "wide_segments": sum((s["gpus"] or 1) > 1 for s in segments),
            "max_gpus": max([s["gpus"] or 1 for s in segments], default=0),
            "top_rung_done": int(top),
            "admission_closed": any(e["kind"] == "close" for e in r.store.journal()),
            "reason": r.outcome.reason, "wall_s": r.wall_s}


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(np.mean(vals)) if vals else None


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per paper deadline (keyed ``"900"``, ...): each policy's mean best accuracy and trials
    over tasks and seeds; and how often the policy was at least as good as ASHA."""
    by: dict[str, Any] = {}
    pairs = 0
    wins = 0
    for d in sorted({r["deadline_paper_s"] for r in runs}):
        key = f"{d:g}"
        row: dict[str, Any] = {}
        for p in POLICIES:
            sel = [r for r in runs if r["deadline_paper_s"] == d and r["policy"] == p]
            row[p] = {"best_accuracy_mean": _mean([r["best_value"] for r in sel]),
                      "trials_mean": _mean([r["trials"] for r in sel]),
                      "wide_segments_mean": _mean([r["wide_segments"] for r in sel])}
        by[key] = row
        plain = {(r["task"], r["seed"]): r["best_value"] for r in runs
                 if r["deadline_paper_s"] == d and r["policy"] == "asha"}
        for r in runs:
            if r["deadline_paper_s"] == d and r["policy"] == "hypersched":
                pairs += 1
                a, b = r["best_value"], plain.get((r["task"], r["seed"]))
                wins += b is None or (a is not None and a >= b)
    best = {k: {p: v[p]["best_accuracy_mean"] for p in POLICIES} for k, v in by.items()}
    trials = {k: {p: v[p]["trials_mean"] for p in POLICIES} for k, v in by.items()}
    gain = {k: (None if None in (v["hypersched"], v["asha"]) else v["hypersched"] - v["asha"])
            for k, v in best.items()}
    return {"best_accuracy_mean_by_deadline": best, "trials_mean_by_deadline": trials,
            "accuracy_gain_by_deadline": gain,
            "win_frac_vs_asha": wins / pairs if pairs else None, "runs": len(runs)}


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def table(runs: list[dict[str, Any]], tasks: list[Task]) -> Table:
    t = Table(title="Best accuracy at the deadline and trials evaluated (mean over seeds)")
    for col in ("task", "deadline (paper s)", "deadline (sim s)", "ASHA best", "HyperSched best",
                "ASHA trials", "HyperSched trials", "wide segments", "top rung reached"):
        t.add_column(col, justify="left" if col == "task" else "right")
    for task in tasks:
        for d in sorted({r["deadline_paper_s"] for r in runs}):
            sel = {p: [r for r in runs if r["task"] == task.name and r["policy"] == p
                       and r["deadline_paper_s"] == d] for p in POLICIES}
            t.add_row(task.name, f"{d:g}", f"{d * task.scale:.0f}",
                      _fmt(_mean([r["best_value"] for r in sel["asha"]])),
                      _fmt(_mean([r["best_value"] for r in sel["hypersched"]])),
                      _fmt(_mean([r["trials"] for r in sel["asha"]]), 1),
                      _fmt(_mean([r["trials"] for r in sel["hypersched"]]), 1),
                      _fmt(_mean([r["wide_segments"] for r in sel["hypersched"]]), 1),
                      "/".join(_fmt(_mean([r["top_rung_done"] for r in sel[p]]), 1)
                               for p in POLICIES))
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None,
                    help="curve directory (default: ../shared/data if present, else the sample)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    ap.add_argument("--layout", type=layout, default=(1, 8),
                    help="instances x GPUs per instance (default 1x8)")
    ap.add_argument("--max-configs", type=int, default=None,
                    help="a random subset of this many configurations per task (default: all)")
    ap.add_argument("--deadlines", default=",".join(f"{d:g}" for d in PAPER_DEADLINES_S),
                    help="the paper's deadlines in seconds, before scaling (default "
                         "900,1800,3600)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error(f"--seeds is {args.seeds}, but must be >= 1")
    if args.max_configs is not None and args.max_configs < 1:
        ap.error(f"--max-configs is {args.max_configs}, but must be >= 1")
    try:
        deadlines = [float(x) for x in args.deadlines.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--deadlines is {args.deadlines!r}, but must be numbers separated by commas")
    if not deadlines or any(d <= 0 for d in deadlines):
        ap.error(f"--deadlines is {args.deadlines!r}, but each must be > 0")
    data_dir = args.data if args.data is not None else default_data_dir()
    if not data_dir.is_dir():
        ap.error(f"--data {str(data_dir)!r} is not a directory")
    instances, gpus = args.layout
    try:
        itype = instance_type(gpus)
    except ValueError as exc:
        ap.error(f"--layout {instances}x{gpus}: {exc}")

    out = Console(stderr=True, width=160) if args.json else Console(width=160)
    started = time.perf_counter()
    used_dir, names, note = imagenet_tasks(data_dir)
    if note:
        out.print(f"[yellow]{note}[/]")
    if not names:
        out.print("no resumable task to run")
        return 1
    tasks = [make_task(used_dir, n, args.max_configs) for n in names]
    out.print(f"data: {used_dir}; {instances} x {gpus} GPUs ({itype.name}, fixed), eta {ETA}, "
              f"speedup {SPEEDUP.name} {dict(SPEEDUP.table)}, {args.seeds} seed(s)")
    for t in tasks:
        out.print(f"{t.name}: {t.configs} configs, R = {t.max_resource}, median step "
                  f"{t.s_per_step:.1f} s, restart {t.restart_s:.1f} s; deadline scale factor "
                  f"{t.scale:.3f} (= step / {REFERENCE_STEP_S:g} s): "
                  + ", ".join(f"{d:g} s -> {d * t.scale:.0f} s" for d in deadlines))
    runs = []
    for t in tasks:
        for d in deadlines:
            for seed in range(args.seeds):
                for p in POLICIES:
                    r = run_one(used_dir, t, d * t.scale, p, seed, instances, gpus,
                                args.max_configs)
                    runs.append({"task": t.name, "deadline_paper_s": d,
                                 "deadline_s": d * t.scale, "policy": p, "seed": seed, **r})
    summary = summarise(runs)
    wall = time.perf_counter() - started
    if args.json:
        details = {"data_dir": str(used_dir), "note": note, "layout": [instances, gpus],
                   "instance_type": itype.name,
                   "reference_step_s": REFERENCE_STEP_S,
                   "eta": ETA, "speedup": {"name": SPEEDUP.name, "table": dict(SPEEDUP.table)},
                   "seeds": args.seeds, "paper_deadlines_s": deadlines,
                   "tasks": [vars(t) for t in tasks], "runs": runs, "wall_s": wall}
        print(json.dumps({"summary": summary, "details": details}))
    else:
        out.print(table(runs, tasks))
        out.print(f"HyperSched at least as good as ASHA in "
                  f"{summary['win_frac_vs_asha']:.0%} of {len(runs) // 2} (task, deadline, "
                  f"seed) cases; {len(runs)} simulations in {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
