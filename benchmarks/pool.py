"""A shared pool of workers against the embedded default, on the same sweep, side by side.

1. embedded: the sweep with ``provider: {type: local, workers: N}`` through ``tuner.tune()``,
   on the embedded default (a private Redis on a unix socket; the sweep starts its N workers);
2. pool: one password-protected ``redis-server`` on a loopback TCP port, N ``elastune worker
   --pool`` processes started beforehand as a user would (each its own process group), and the
   same sweep with ``provider: {type: pool}`` through ``tuner.tune(..., broker_url=...)``.

The sweep: ``--trials`` trials of ``benchmarks._trainables:paced`` (``--step-s`` of sleep per
step), ASHA 1..9 eta 3, random sampler, seed 0. For each run, from its experiment store:
dispatch latency (segment submitted -> trainable started, ``started_at - submitted_at``) p50
and p99, and segments per second (segments over the window from the first dispatch to the last
segment's end); then the ratios pool / embedded.

    python benchmarks/pool.py [--workers 4] [--trials 256] [--step-s 0.01] [--json] [--out DIR]

A table goes to stdout; with ``--json`` stdout holds one JSON object ``{"summary", "details"}``
and nothing else. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks._trainables` importable
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import redis  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks._runner import emit, run_quietly  # noqa: E402
from tuner import tune, uniform  # noqa: E402
from tuner._store import Store  # noqa: E402
from worker._embedded import redis_server_binary  # noqa: E402
from worker.records import members_key  # noqa: E402

TRAINABLE = "benchmarks._trainables:paced"
POOL = "bench"
TIME_BUDGET = "30m"  # generous: no benchmark run should be cut by its budget

_err = Console(stderr=True, width=200)


def _say(message: str) -> None:
    _err.print(f"[dim]pool:[/dim] {message}", highlight=False)


def sweep(trials: int, step_s: float, provider: dict[str, Any]) -> dict[str, Any]:
    return {
        "trainable": TRAINABLE, "metric": "score", "mode": "max",
        "space": {"x": uniform(0.0, 1.0), "step_s": step_s}, "sampler": "random",
        "num_trials": trials,
        "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                      "reduction_factor": 3},
        "profile": {"seconds_per_step": step_s},
        "provider": {"price_per_hour": 1.0, **provider},
        "budget": {"time": TIME_BUDGET},
    }


# -- the pool's broker and workers --------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_on_loopback(folder: Path) -> Iterator[str]:
    """A ``redis-server`` on 127.0.0.1 with a random password (in a 0600 config file, not on
    the command line); yields its URL."""
    folder.mkdir(mode=0o700)
    password = secrets.token_hex(16)
    port = _free_port()
    conf = folder / "redis.conf"
    conf.write_text(f"port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir {folder}\n"
                    f"requirepass {password}\n")
    os.chmod(conf, 0o600)
    proc = subprocess.Popen([redis_server_binary(), str(conf)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, password=password)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        client.close()
        yield f"redis://:{password}@127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def pool_workers(url: str, n: int, logs: Path) -> Iterator[dict[str, Any]]:
    """``n`` workers that joined the pool (``python -m worker --pool``, the broker URL in
    their environment); yields how long they took to join; stops them (SIGTERM, then
    SIGKILL) at the end."""
    logs.mkdir()
    env = dict(os.environ, ELASTUNE_BROKER_URL=url,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])))
    procs: dict[str, subprocess.Popen[bytes]] = {}
    t0 = time.perf_counter()
    try:
        for i in range(n):
            name = f"pool-w{i + 1}"
            with open(logs / f"{name}.log", "wb") as out:
                procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "worker", "--pool", POOL, "--name", name,
                     "--slots", "1"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True)
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 120
        while True:
            joined = {k.decode() for k in client.hkeys(members_key(POOL))}
            if set(procs) <= joined:
                break
            dead = [w for w, p in procs.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                tail = (logs / f"{(dead or sorted(set(procs) - joined))[0]}.log").read_text()
                raise RuntimeError(f"pool workers did not join: {tail[-2000:]}")
            time.sleep(0.05)
        client.close()
        yield {"join_s": time.perf_counter() - t0}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# -- one run ------------------------------------------------------------------------------------
def _percentiles_ms(values_s: list[float]) -> dict[str, Any]:
    ms = np.asarray(values_s, dtype=float) * 1000.0
    if ms.size == 0:
        return {"count": 0, "p50_ms": None, "p99_ms": None}
    return {"count": int(ms.size), "p50_ms": float(np.percentile(ms, 50)),
            "p90_ms": float(np.percentile(ms, 90)), "p99_ms": float(np.percentile(ms, 99)),
            "min_ms": float(ms.min()), "max_ms": float(ms.max()), "mean_ms": float(ms.mean())}


def run_sweep(what: str, config: dict[str, Any], exp_dir: Path,
              broker_url: str | None = None) -> dict[str, Any]:
    t_call = time.time()
    result = tune(config, seed=0, experiment_dir=exp_dir, broker_url=broker_url)
    t_return = time.time()
    if result.state != "finished":
        raise RuntimeError(f"{what}: tune() ended in state {result.state!r} "
                           f"({result.status.get('trials')}); see {exp_dir}")
    store = Store(exp_dir, readonly=True)
    try:
        segs = store.segments()
        workers = store.workers()
    finally:
        store.close()
    started = [s for s in segs if s["started_at"] is not None and s["submitted_at"] is not None]
    latencies = [s["started_at"] - s["submitted_at"] for s in started]
    first = min(s["submitted_at"] for s in segs)
    last = max(s["finished_at"] for s in segs if s["finished_at"] is not None)
    states: dict[str, int] = {}
    for s in segs:
        states[s["state"]] = states.get(s["state"], 0) + 1
    return {
        "segments": len(segs), "segment_states": states,
        "trials": result.status.get("trials"),
        "dispatch_latency": _percentiles_ms(latencies),
        # The controller's own measure (first starts only), for comparison.
        "dispatch_latency_controller": _percentiles_ms(list(result.dispatch_latencies_s)),
        "window_s": last - first,
        "segments_per_s": len(segs) / (last - first) if last > first else None,
        "segments_per_controller_s": len(segs) / result.wall_s if result.wall_s else None,
        "first_dispatch_s": first - t_call,
        "tune_wall_s": t_return - t_call, "controller_wall_s": result.wall_s,
        "spend_usd": result.spend_usd,
        "workers": [{k: w[k] for k in ("name", "slots", "segments_run")} for w in workers],
        "experiment_dir": str(exp_dir),
    }


# -- the run ------------------------------------------------------------------------------------
def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    n, trials, step_s = args.workers, args.trials, args.step_s
    _say(f"embedded: {trials} trials, ASHA 1..9 eta 3, {n} local workers, {step_s:g} s/step")
    embedded = run_sweep("embedded", sweep(trials, step_s, {"type": "local", "workers": n}),
                         out / "embedded")
    _say(f"pool: one redis-server on loopback TCP, {n} pool workers, the same sweep")
    with redis_on_loopback(out / "redis") as url, \
            pool_workers(url, n, out / "worker-logs") as started:
        _say(f"pool: {n} workers joined in {started['join_s']:.1f} s")
        pooled = run_sweep("pool", sweep(trials, step_s, {
            "type": "pool", "name": POOL, "min_workers": n, "wait_for_workers": "2m"}),
            out / "pool", broker_url=url)
    pooled["workers_join_s"] = started["join_s"]
    p, e = pooled["dispatch_latency"], embedded["dispatch_latency"]
    summary = {
        "workers": n, "trials": trials,
        "pool_segments": pooled["segments"], "embedded_segments": embedded["segments"],
        "pool_dispatch_p50_ms": p["p50_ms"], "pool_dispatch_p99_ms": p["p99_ms"],
        "embedded_dispatch_p50_ms": e["p50_ms"], "embedded_dispatch_p99_ms": e["p99_ms"],
        "pool_segments_per_s": pooled["segments_per_s"],
        "embedded_segments_per_s": embedded["segments_per_s"],
        "ratio_dispatch_p50": _ratio(p["p50_ms"], e["p50_ms"]),
        "ratio_dispatch_p99": _ratio(p["p99_ms"], e["p99_ms"]),
        "ratio_segments_per_s": _ratio(pooled["segments_per_s"], embedded["segments_per_s"]),
    }
    details = {
        "options": {"workers": n, "trials": trials, "step_s": step_s},
        "environment": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": os.cpu_count()},
        "pool": pooled, "embedded": embedded,
    }
    return {"summary": summary, "details": details}


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def print_table(doc: dict[str, Any]) -> None:
    s, d = doc["summary"], doc["details"]
    table = Table(title=f"elastune pool against the embedded default ({s['workers']} workers, "
                        f"{s['trials']} trials, {d['options']['step_s']:g} s/step)")
    table.add_column("figure")
    for col in ("pool", "embedded", "pool / embedded"):
        table.add_column(col, justify="right")
    table.add_row("dispatch p50", f"{_fmt(s['pool_dispatch_p50_ms'])} ms",
                  f"{_fmt(s['embedded_dispatch_p50_ms'])} ms", _fmt(s["ratio_dispatch_p50"]))
    table.add_row("dispatch p99", f"{_fmt(s['pool_dispatch_p99_ms'])} ms",
                  f"{_fmt(s['embedded_dispatch_p99_ms'])} ms", _fmt(s["ratio_dispatch_p99"]))
    table.add_row("segments/s", _fmt(s["pool_segments_per_s"]),
                  _fmt(s["embedded_segments_per_s"]), _fmt(s["ratio_segments_per_s"]))
    table.add_row("segments", str(s["pool_segments"]), str(s["embedded_segments"]), "")
    table.add_row("first dispatch after tune()", f"{_fmt(d['pool']['first_dispatch_s'])} s",
                  f"{_fmt(d['embedded']['first_dispatch_s'])} s", "")
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python benchmarks/pool.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=4, help="pool workers, and local workers")
    p.add_argument("--trials", type=int, default=256, help="trials of the sweep")
    p.add_argument("--step-s", type=float, default=0.01, help="seconds of sleep per step")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--out", default=None,
                   help="keep the experiment dirs under DIR (default: a temp dir, deleted after)")
    args = p.parse_args(argv)
    for name in ("workers", "trials"):
        if getattr(args, name) <= 0:
            p.error(f"--{name} must be > 0, got {getattr(args, name)}")
    if args.step_s < 0:
        p.error(f"--step-s must be >= 0, got {args.step_s}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    doc = run_quietly("pool", args.out, lambda out: run(args, out), _say)
    if args.out is None:
        for side in ("pool", "embedded"):
            doc["details"][side].pop("experiment_dir", None)
    emit(doc, args.json, print_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
