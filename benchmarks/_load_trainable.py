"""The trainable of ``benchmarks/load.py`` (``benchmarks._load_trainable:paced``), run on real
workers.

It reports once per step on a fixed schedule, ``rate`` reports per second from a start time
shared by all trainables of the run, and counts its own reports: each run of a segment writes
what it emitted to a file of its own (with the worker that ran it), a count independent of the
broker, the controller and the store.

Parameters (fixed values in the sweep's space):
    out      the run's folder: ``ready/`` (the start barrier) and ``emitted/`` (the counts)
    rate     reports per second of this trainable
    peers    how many trainables start together (the barrier waits for all of them)
    metrics  how many metrics each report carries (``score`` and ``m1`` ... ``m{n-1}``)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

BARRIER_TIMEOUT_S = 180.0
START_MARGIN_S = 0.5


def _start_time(ready: Path, name: str, peers: int) -> float:
    """Wait until ``peers`` trainables are ready; the start is the same instant for all of
    them: a margin after the last one arrived (file modification times, one clock)."""
    ready.mkdir(parents=True, exist_ok=True)
    (ready / name).touch()
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while True:
        entries = list(os.scandir(ready))
        if len(entries) >= peers or time.monotonic() > deadline:
            return max(e.stat().st_mtime for e in entries) + START_MARGIN_S
        time.sleep(0.01)


def paced(params: dict[str, Any], ctx: Any) -> None:
    out = Path(params["out"])
    rate = float(params["rate"])
    peers = int(params["peers"])
    extra = [f"m{i}" for i in range(1, int(params.get("metrics", 1)))]
    x = float(params.get("x", 0.5))
    name = f"{ctx.trial_id}-{ctx.start_step}-{os.getpid()}"
    t0 = _start_time(out / "ready", name, peers)
    delay = t0 - time.time()
    if delay > 0:
        time.sleep(delay)
    emitted = 0
    first_ts = last_ts = None
    behind_max = 0.0
    first_step = ctx.start_step + 1
    for step in ctx.steps():
        due = t0 + (step - first_step) / rate
        now = time.time()
        if due > now:
            time.sleep(due - now)
        else:
            behind_max = max(behind_max, now - due)
        metrics = {"score": x * step}
        for k in extra:
            metrics[k] = float(step)
        ctx.report(step, **metrics)
        emitted += 1
        last_ts = time.time()
        if first_ts is None:
            first_ts = last_ts
    ctx.checkpoint(None)
    folder = out / "emitted"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.tmp"
    tmp.write_text(json.dumps({
        "trial_id": ctx.trial_id, "start_step": ctx.start_step, "stop_step": ctx.stop_step,
        "last_step": ctx.current_step, "emitted": emitted, "t0": t0, "first_ts": first_ts,
        "last_ts": last_ts, "behind_max_s": behind_max, "pid": os.getpid(),
        "worker": os.environ.get("ELASTUNE_WORKER_NAME")}))
    tmp.replace(folder / f"{name}.json")
