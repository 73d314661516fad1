"""How the real controller scales, measured in simulation (``tuner.sim.simulate``).

Two sweeps, each built as a user's (a fixed cluster of ``provider.workers`` AWS g4dn.xlarge
VMs, a cost cap it never reaches) and run through the same controller, scheduler, sampler,
ledger and store as a real sweep:
1. ``--trials`` trials (ASHA 1..27, eta 3) on ``--workers`` simulated workers that boot in
   U(60, 180) s (a cloud's default ``profile.boot_s``): wall time of the whole simulation
   (planning included) and peak memory of this process;
2. ``--segments`` one-second segments on ``--small-workers`` workers that boot at once: the
   simulated finish time against the ideal (segments / workers seconds) and the CPU time this
   process spent per segment (controller, simulator and store together: an upper bound on the
   controller's own share).

    python benchmarks/scale.py [--trials 10000] [--workers 1000] [--segments 10000]
                               [--small-workers 16] [--json]

The curves are synthetic (seeded power laws), since no measured set has 10,000 configurations;
this benchmark is about the control plane's cost, not about accuracy.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tuner.sim import simulate  # noqa: E402

# Neither sweep has a deadline, and a sweep needs a budget: a cap it never reaches.
NO_CAP_USD = 1e9
# A cloud's fixed cluster: up to tuner._config.MAX_WORKERS VMs (a local one is capped lower).
PROVIDER = {"type": "aws", "instance_types": ["g4dn.xlarge"], "scaling": "static"}


class PowerLawCurves:
    """``n`` seeded curves acc(s) = a - b * s^-c, each step taking ``step_s`` seconds."""

    name = "synthetic/power-law"
    metric = "acc"
    mode = "max"

    def __init__(self, n: int, max_step: int, step_s: float, seed: int = 0) -> None:
        rng = random.Random(seed)
        self._ids = [f"c{i}" for i in range(n)]
        self._abc = {i: (rng.uniform(0.6, 0.95), rng.uniform(0.2, 0.5), rng.uniform(0.3, 1.2))
                     for i in self._ids}
        self._max = max_step
        self._step_s = step_s

    def config_ids(self) -> list[str]:
        return self._ids

    def value(self, config_id: str, step: int) -> float | None:
        a, b, c = self._abc[config_id]
        return a - b * math.pow(max(step, 1), -c)

    def cost_s(self, config_id: str, start: int, stop: int) -> float:
        return self._step_s * (stop - start)

    def last_step(self, config_id: str) -> int:
        return self._max

    def diverged(self, config_id: str) -> bool:
        return False


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def sweep(max_resource: int, trials: int, workers: int, **profile: Any) -> dict[str, Any]:
    """ASHA 1..``max_resource`` (eta 3) over ``trials`` trials on a fixed cluster."""
    return {"scheduler": {"type": "asha", "min_resource": 1, "max_resource": max_resource,
                          "reduction_factor": 3},
            "num_trials": trials, "provider": {**PROVIDER, "workers": workers},
            "profile": profile}


def run_large(trials: int, workers: int) -> dict[str, Any]:
    curves = PowerLawCurves(trials, 27, step_s=60.0)
    t0 = time.perf_counter()
    c0 = time.process_time()
    r = simulate(sweep(27, trials, workers), curves, seed=0, time_budget=None,
                 cost_budget=NO_CAP_USD)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    segments = len(r.store.segments())
    return {"trials": trials, "workers": workers, "wall_s": wall, "cpu_s": cpu,
            "segments": segments, "sim_s": r.wall_s, "state": r.outcome.state,
            "reason": r.outcome.reason, "trials_run": len(r.trials),
            "best_value": r.best_value, "peak_rss_mb": _rss_mb()}


def run_small(segments: int, workers: int) -> dict[str, Any]:
    curves = PowerLawCurves(segments, 1, step_s=1.0)
    t0 = time.perf_counter()
    c0 = time.process_time()
    r = simulate(sweep(1, segments, workers, boot_s=0), curves, seed=0,
                 boot_s=lambda rng: 0.0, time_budget=None, cost_budget=NO_CAP_USD)
    cpu = time.process_time() - c0
    ran = len(r.store.segments())
    ideal = segments / workers
    return {"segments": ran, "workers": workers, "wall_s": time.perf_counter() - t0,
            "sim_s": r.wall_s, "ideal_sim_s": ideal, "ratio_vs_ideal": r.wall_s / ideal,
            "cpu_ms_per_segment": cpu * 1000.0 / max(ran, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=10_000)
    p.add_argument("--workers", type=int, default=1_000)
    p.add_argument("--segments", type=int, default=10_000)
    p.add_argument("--small-workers", type=int, default=16)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    err = Console(stderr=True)
    err.print(f"scale: {args.trials} trials on {args.workers} simulated workers ...")
    large = run_large(args.trials, args.workers)
    err.print(f"scale: {args.segments} one-second segments on {args.small_workers} workers ...")
    small = run_small(args.segments, args.small_workers)
    summary = {
        "trials": large["trials"], "workers": large["workers"], "wall_s": large["wall_s"],
        "sim_time_ratio_vs_ideal": small["ratio_vs_ideal"],
        "controller_ms_per_segment": small["cpu_ms_per_segment"],
        "peak_rss_mb": large["peak_rss_mb"],
    }
    if args.json:
        print(json.dumps({"summary": summary, "details": {"large": large, "small": small}}))
        return 0
    table = Table(title="elastune scale (simulation, real controller)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("measured on")
    table.add_row("wall time", f"{large['wall_s']:.1f} s",
                  f"{large['trials']} trials ({large['segments']} segments) on "
                  f"{large['workers']} workers, {large['sim_s'] / 3600:.1f} simulated hours")
    table.add_row("peak RSS", f"{large['peak_rss_mb']:.0f} MB", "this process")
    table.add_row("simulated time vs ideal", f"{small['ratio_vs_ideal']:.3f}",
                  f"{small['segments']} one-second segments on {small['workers']} workers "
                  f"({small['sim_s']:.0f} s vs {small['ideal_sim_s']:.0f} s)")
    table.add_row("CPU per segment", f"{small['cpu_ms_per_segment']:.2f} ms",
                  "controller + simulator + store, this process")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
