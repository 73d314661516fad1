"""Sustained report load through the real path, and ``status`` on a 10,000-trial store.

1. ``--workers`` real ``elastune worker`` processes on the embedded Redis, driven by the real
   controller through ``tuner.tune()``, run one segment each of a trainable
   (``benchmarks._load_trainable:paced``) that reports on a fixed schedule: ``--rate``
   reports per second across all workers for ``--seconds`` seconds, from a start shared by all
   of them. Each trainable counts what it emitted in a file of its own; afterwards that count
   is compared with the rows of the experiment store (``lost``, ``duplicates``), and the
   time from each report's timestamp to the commit of its row is the controller lag.
2. ``elastune status DIR --json`` on a store of ``--status-trials`` trials (made by the real
   controller in simulation, or reused from ``--status-store``), in this process (best of 3)
   and as a subprocess (best of 3).

    python benchmarks/load.py [--rate 2000] [--seconds 60] [--workers 4] [--metrics 3]
                              [--status-trials 10000] [--status-store DIR] [--out DIR]
                              [--profile FILE] [--json]

A table goes to stdout; with ``--json`` stdout holds one JSON object ``{"summary", "details"}``
and nothing else. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks._load_trainable` importable
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks._runner import emit, run_quietly  # noqa: E402
from tuner import tune, uniform  # noqa: E402
from tuner._store import STORE_NAME, Store  # noqa: E402

TRAINABLE = "benchmarks._load_trainable:paced"
STATUS_LIMIT_S = 1.0

_err = Console(stderr=True, width=200)


def _say(message: str) -> None:
    _err.print(f"[dim]load:[/dim] {message}", highlight=False)


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


class CommitLog:
    """When each batch of report rows was committed to the store (wraps ``Store.add_reports``
    of this process, where the controller runs): the controller lag of every row is its commit
    time minus its timestamp."""

    def __init__(self) -> None:
        self.batches: list[tuple[float, list[float]]] = []
        self._original = Store.add_reports

    def __enter__(self) -> CommitLog:
        original, batches = self._original, self.batches

        def add_reports(store: Store, rows: Any) -> None:
            rows = list(rows)
            original(store, rows)
            batches.append((time.time(), [r[5] for r in rows]))

        Store.add_reports = add_reports  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Store.add_reports = self._original  # type: ignore[method-assign]

    def lags(self) -> np.ndarray:
        return np.fromiter((t - ts for t, tss in self.batches for ts in tss), dtype=float)

    def last_commit(self) -> float | None:
        return self.batches[-1][0] if self.batches else None


class LiveStatus(threading.Thread):
    """Once the reporting phase is half done, time ``elastune status --json`` on the store
    the controller is writing (a subprocess, as a user would run it)."""

    def __init__(self, exp_dir: Path, ready: Path, peers: int, seconds: float) -> None:
        super().__init__(name="live-status", daemon=True)
        self.exp_dir, self.ready, self.peers, self.seconds = exp_dir, ready, peers, seconds
        self.result: dict[str, Any] | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            if self.ready.is_dir():
                entries = list(os.scandir(self.ready))
                if len(entries) >= self.peers:
                    t0 = max(e.stat().st_mtime for e in entries)
                    break
            self._halt.wait(0.2)
        else:
            return
        if self._halt.wait(max(0.0, t0 + self.seconds / 2 - time.time())):
            return
        t = time.perf_counter()
        proc = subprocess.run(_status_command(self.exp_dir), capture_output=True, text=True,
                              timeout=120)
        elapsed = time.perf_counter() - t
        doc = json.loads(proc.stdout) if proc.returncode == 0 else None
        self.result = {"s": elapsed, "returncode": proc.returncode,
                       "state": doc["state"] if doc else None,
                       "stderr": proc.stderr[-500:] if proc.returncode else None}

    def stop(self) -> None:
        self._halt.set()


# Segment states whose reports the controller drops: the trial re-runs from its last
# checkpoint, so what such a run reported is superseded (a lost, preempted or hung worker).
DROPPED_STATES = ("lost", "preempted", "stale")


def _surviving_runs(runs: list[dict[str, Any]], segments: list[tuple[Any, ...]]
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split the trainables' counts into the segment runs whose reports the store keeps and
    those it dropped by design: a run on a segment given up as lost, and every earlier run of
    a segment delivered again to the same worker (only its last run counts)."""
    dropped = {(t, s, i) for t, s, i, state in segments if state in DROPPED_STATES}
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    superseded = []
    for run in sorted(runs, key=lambda r: r["first_ts"] or 0.0):
        key = (run["trial_id"], run["start_step"], run["worker"])
        if key in dropped:
            superseded.append(run)
            continue
        if key in latest:
            superseded.append(latest[key])
        latest[key] = run
    return list(latest.values()), superseded


# -- 1. the load run ----------------------------------------------------------------------------
def run_load(rate: float, seconds: float, workers: int, metrics: int, out: Path,
             profile: str | None) -> dict[str, Any]:
    per_worker = rate / workers
    steps = max(1, round(per_worker * seconds))
    run_dir = out / "load-run"
    exp_dir = out / "load-experiment"
    run_dir.mkdir(parents=True)
    _say(f"{workers} workers x {steps} steps at {per_worker:g} reports/s each "
         f"({rate:g}/s in all for {seconds:g} s, {metrics} metric(s) per report)")
    sweep = {
        "trainable": TRAINABLE, "metric": "score", "mode": "max",
        "space": {"x": uniform(0.0, 1.0), "out": str(run_dir), "rate": per_worker,
                  "peers": workers, "metrics": metrics},
        "sampler": "random", "num_trials": workers,
        # min == max: one segment per trial, one trial per worker, all running at once.
        "scheduler": {"type": "asha", "min_resource": steps, "max_resource": steps,
                      "reduction_factor": 3},
        "provider": {"type": "local", "workers": workers, "slots": 1, "price_per_hour": 1.0},
        # The trainable's paced step, so that the time budget is checked against it.
        "profile": {"seconds_per_step": 1.0 / per_worker},
        # Generous: the run must never be cut by its budget.
        "budget": {"time": f"{int(seconds + 600)}s"},
    }
    live = LiveStatus(exp_dir, run_dir / "ready", workers, seconds)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    cpu0, children0 = time.process_time(), os.times()
    live.start()
    with CommitLog() as commits:
        t_call = time.time()
        if profiler is not None:
            profiler.enable()
        try:
            result = tune(sweep, seed=0, experiment_dir=exp_dir)
        finally:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(profile)
            live.stop()
        t_return = time.time()
    cpu1, children1 = time.process_time(), os.times()
    live.join(timeout=5)
    if result.state != "finished":
        raise RuntimeError(f"the load sweep ended {result.state!r} ({result.status.get('trials')})"
                           f"; see {exp_dir}")

    runs = [json.loads(p.read_text()) for p in sorted((run_dir / "emitted").glob("*.json"))]
    db = sqlite3.connect(f"file:{exp_dir / STORE_NAME}?mode=ro", uri=True)
    try:
        segments = db.execute(
            "SELECT trial_id, start_step, instance_id, state FROM segments").fetchall()
        stored = db.execute("SELECT COUNT(*) FROM reports").fetchone()[0]
        distinct = db.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT segment_id, step FROM reports)").fetchone()[0]
        first_ts, last_ts = db.execute("SELECT MIN(ts), MAX(ts) FROM reports").fetchone()
        per_trial_stored = dict(db.execute(
            "SELECT trial_id, COUNT(*) FROM reports GROUP BY trial_id").fetchall())
        seg_states = dict(db.execute(
            "SELECT state, COUNT(*) FROM segments GROUP BY state").fetchall())
        metrics_per_row = db.execute(
            "SELECT metrics FROM reports LIMIT 1").fetchone()
    finally:
        db.close()
    kept, superseded = _surviving_runs(runs, segments)
    emitted = sum(e["emitted"] for e in kept)
    per_trial_emitted: dict[str, int] = {}
    for e in kept:
        per_trial_emitted[e["trial_id"]] = per_trial_emitted.get(e["trial_id"], 0) + e["emitted"]
    mismatched = sorted(t for t in set(per_trial_emitted) | set(per_trial_stored)
                        if per_trial_emitted.get(t, 0) != per_trial_stored.get(t, 0))

    lags = commits.lags()
    last_commit = commits.last_commit()
    t0 = min((e["t0"] for e in kept), default=None)
    # The reporting phase: from the shared start of the trainables' schedule to the commit of
    # the last report row.
    phase_s = (last_commit - t0) if (last_commit is not None and t0 is not None) else None
    emission_s = (last_ts - first_ts) if stored > 1 else None
    return {
        "target_rate": rate, "seconds": seconds, "workers": workers, "steps_per_worker": steps,
        "metrics_per_report": len(json.loads(metrics_per_row[0])) if metrics_per_row else 0,
        "emitted": emitted, "stored": stored, "lost": emitted - stored,
        "duplicates": stored - distinct, "mismatched_trials": mismatched,
        "segment_runs": len(runs), "segment_states": seg_states,
        "superseded_runs": len(superseded),
        "emitted_superseded": sum(e["emitted"] for e in superseded),
        "reporting_phase_s": phase_s,
        "achieved_rate": stored / phase_s if phase_s else None,
        "emission_window_s": emission_s,
        "emission_rate": stored / emission_s if emission_s else None,
        "trainable_behind_max_s": max((e["behind_max_s"] for e in kept), default=None),
        "controller_lag_s": {
            "count": int(lags.size), "p50": _pct(lags, 50), "p90": _pct(lags, 90),
            "p99": _pct(lags, 99), "max": float(lags.max()) if lags.size else None},
        "commit_batches": len(commits.batches),
        "rows_per_commit_mean": (float(lags.size / len(commits.batches)) if commits.batches
                                 else None),
        "cpu_s": {"controller_process": cpu1 - cpu0,
                  "workers_and_redis": (children1.children_user - children0.children_user)
                  + (children1.children_system - children0.children_system)},
        "status_during_load": live.result,
        "tune_wall_s": t_return - t_call, "controller_wall_s": result.wall_s,
        "startup_s": (t0 - t_call) if t0 is not None else None,
        "experiment_dir": str(exp_dir),
    }


# -- 2. status on a large store -----------------------------------------------------------------
def _status_command(exp_dir: Path) -> list[str]:
    script = Path(sys.executable).parent / "elastune"
    if script.exists():
        return [str(script), "status", str(exp_dir), "--json"]
    return [sys.executable, "-m", "tuner.cli", "status", str(exp_dir), "--json"]


def build_status_store(exp_dir: Path, trials: int) -> float:
    """A store of ``trials`` trials written by the real controller in simulation (the sweep of
    ``benchmarks/scale.py``: ASHA 1..27 on 200 workers); in memory, then one copy to disk."""
    from benchmarks.scale import NO_CAP_USD, PowerLawCurves, sweep
    from tuner.sim import simulate

    t = time.perf_counter()
    r = simulate(sweep(27, trials, min(200, max(1, trials // 10))),
                 PowerLawCurves(trials, 27, step_s=60.0), seed=0, time_budget=None,
                 cost_budget=NO_CAP_USD, experiment_id=f"sim-{trials}")
    exp_dir.mkdir(parents=True, exist_ok=True)
    r.store.query("VACUUM INTO ?", (str(exp_dir / STORE_NAME),))
    r.store.close()
    return time.perf_counter() - t


def run_status(exp_dir: Path, trials: int, repeats: int = 3) -> dict[str, Any]:
    from tuner.cli import main as cli_main

    built_s = None
    if not (exp_dir / STORE_NAME).exists():
        _say(f"status: building a {trials}-trial store in simulation at {exp_dir}")
        built_s = build_status_store(exp_dir, trials)
    else:
        _say(f"status: reusing the store at {exp_dir}")
    store = Store(exp_dir, readonly=True)
    try:
        counts = store.trial_counts()
        reports = store.query("SELECT COUNT(*) FROM reports")[0][0]
    finally:
        store.close()

    in_process: list[float] = []
    doc_in = None
    for _ in range(repeats):
        buf = io.StringIO()
        t = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            code = cli_main(["status", str(exp_dir), "--json"])
        in_process.append(time.perf_counter() - t)
        if code != 0:
            raise RuntimeError(f"elastune status exited {code}")
        doc_in = json.loads(buf.getvalue())

    subproc: list[float] = []
    doc_sub = None
    for _ in range(repeats):
        t = time.perf_counter()
        proc = subprocess.run(_status_command(exp_dir), capture_output=True, text=True,
                              timeout=120)
        subproc.append(time.perf_counter() - t)
        if proc.returncode != 0:
            raise RuntimeError(f"elastune status exited {proc.returncode}: {proc.stderr[-2000:]}")
        doc_sub = json.loads(proc.stdout)
    return {
        "store": str(exp_dir), "trials": counts["total"], "reports": reports,
        "store_mb": (exp_dir / STORE_NAME).stat().st_size / 1e6, "built_s": built_s,
        "in_process_s": in_process, "subprocess_s": subproc,
        "status_s": min(in_process), "status_subprocess_s": min(subproc),
        "same_document": doc_in == doc_sub, "document": doc_sub,
    }


# -- the run ------------------------------------------------------------------------------------
def run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    load = run_load(args.rate, args.seconds, args.workers, args.metrics, out, args.profile)
    status_dir = Path(args.status_store) if args.status_store else out / "status-store"
    status = run_status(status_dir, args.status_trials)
    lag = load["controller_lag_s"]
    summary = {
        "target_rate": float(args.rate),
        "achieved_rate": load["achieved_rate"],
        "seconds": float(args.seconds),
        "emitted": load["emitted"],
        "stored": load["stored"],
        "lost": load["lost"],
        "duplicates": load["duplicates"],
        "controller_lag_p99_s": lag["p99"],
        "status_s": status["status_s"],
        "status_subprocess_s": status["status_subprocess_s"],
    }
    details = {
        "options": {"rate": args.rate, "seconds": args.seconds, "workers": args.workers,
                    "metrics": args.metrics, "status_trials": args.status_trials},
        "environment": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": os.cpu_count()},
        "load": load, "status": status,
    }
    return {"summary": summary, "details": details}


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def print_table(doc: dict[str, Any]) -> None:
    s, d = doc["summary"], doc["details"]
    load, st = d["load"], d["status"]
    lag = load["controller_lag_s"]
    table = Table(title="elastune load (real workers, Redis, controller, store)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("measured on")
    table.add_row("target rate", f"{s['target_rate']:,.0f} /s",
                  f"{load['workers']} workers x {load['steps_per_worker']} steps, "
                  f"{load['metrics_per_report']} metrics per report, {s['seconds']:g} s")
    table.add_row("achieved rate", f"{_fmt(s['achieved_rate'], ',.0f')} /s",
                  f"{s['stored']} rows / {_fmt(load['reporting_phase_s'], '.3f')} s "
                  "(shared start -> last row committed)")
    table.add_row("emitted / stored", f"{s['emitted']} / {s['stored']}",
                  "counted by the trainables / rows in the store")
    table.add_row("lost", str(s["lost"]), "emitted - stored")
    table.add_row("duplicates", str(s["duplicates"]), "rows - distinct (segment, step)")
    table.add_row("controller lag p99", f"{_fmt(lag['p99'], '.3f')} s",
                  f"report ts -> row committed; p50 {_fmt(lag['p50'], '.3f')} s, max "
                  f"{_fmt(lag['max'], '.3f')} s")
    cpu = load["cpu_s"]
    table.add_row("CPU", f"{cpu['controller_process']:.1f} s",
                  f"controller process; workers + Redis {cpu['workers_and_redis']:.1f} s")
    live = load["status_during_load"]
    if live:
        table.add_row("status during load", f"{_fmt(live['s'], '.3f')} s",
                      "elastune status --json on the store being written (subprocess)")
    table.add_row("status", f"{s['status_s'] * 1000:.1f} ms",
                  f"in-process, best of {len(st['in_process_s'])}, {st['trials']} trials, "
                  f"{st['reports']} reports")
    table.add_row("status (subprocess)", f"{s['status_subprocess_s']:.3f} s",
                  f"elastune status DIR --json, best of {len(st['subprocess_s'])} "
                  f"(limit {STATUS_LIMIT_S:g} s)")
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python benchmarks/load.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, default=2000.0, help="reports per second, all workers")
    p.add_argument("--seconds", type=float, default=60.0, help="length of the reporting phase")
    p.add_argument("--workers", type=int, default=4, help="local worker processes")
    p.add_argument("--metrics", type=int, default=3, help="metrics per report")
    p.add_argument("--status-trials", type=int, default=10_000,
                   help="trials of the store that status is timed on")
    p.add_argument("--status-store", default=None, metavar="DIR",
                   help="time status on this experiment dir; built there if it holds none")
    p.add_argument("--profile", default=None, metavar="FILE",
                   help="cProfile the controller process during the load run into FILE")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--out", default=None,
                   help="keep the experiment dirs under DIR (default: a temp dir, deleted after)")
    args = p.parse_args(argv)
    for name in ("rate", "seconds", "workers", "metrics", "status_trials"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    doc = run_quietly("load", args.out, lambda out: run(args, out), _say)
    if args.out is None:
        doc["details"]["load"].pop("experiment_dir", None)
        if args.status_store is None:
            doc["details"]["status"].pop("store", None)
    emit(doc, args.json, print_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
