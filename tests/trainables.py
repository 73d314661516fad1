"""Trainables the tests run on real workers (importable as ``tests.trainables:NAME``)."""

from __future__ import annotations

import os
import time


def quadratic(params, ctx):
    """value = -(x - 0.3)^2 + step / 100: better x is better at every step."""
    state = ctx.restore() or {"steps": []}
    for step in ctx.steps():
        state["steps"].append(step)
        time.sleep(float(params.get("sleep", 0.0)))
        ctx.report(step, score=-(params["x"] - 0.3) ** 2 + step / 100.0)
    ctx.checkpoint(state)


def warming(params, ctx):
    """``quadratic`` whose first two steps cost more (``first``, ``second``: their sleep over
    a later step's ``sleep``), as a first epoch that fills caches does."""
    costs = [params.get("first", 1.0), params.get("second", 1.0)]
    for step in ctx.steps():
        cost = costs[step - 1] if step <= len(costs) else 1.0
        time.sleep(float(params["sleep"]) * cost)
        ctx.report(step, score=-(params["x"] - 0.3) ** 2 + step / 100.0)
    ctx.checkpoint({"at": ctx.current_step})


def slow(params, ctx):
    for step in ctx.steps():
        time.sleep(float(params.get("sleep", 0.2)))
        ctx.report(step, score=float(step))
    ctx.checkpoint({"at": ctx.current_step})


def gpu_probe(params, ctx):
    for step in ctx.steps():
        time.sleep(float(params.get("sleep", 0.0)))
        ctx.report(step, ngpus=len(ctx.gpus), first=ctx.gpus[0] if ctx.gpus else -1,
                   env=len(os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")))


def failing(params, ctx):
    for step in ctx.steps():
        if step >= params.get("fail_at", 1):
            raise RuntimeError(f"boom at step {step}")
        ctx.report(step, score=0.0)


def nan_reporter(params, ctx):
    """NaN when x > 0.5, +inf when x > 0.9, else x."""
    for step in ctx.steps():
        bad = float("inf") if params["x"] > 0.9 else float("nan")
        ctx.report(step, score=bad if params["x"] > 0.5 else params["x"])
    ctx.checkpoint(None)


def careless(params, ctx):
    """``quadratic``, written the way a careless trainable might be: it prints its
    environment and command line to the worker's log and keeps them in its checkpoint. The
    broker password must not be there to find."""
    import json
    import sys

    seen = {"env": dict(os.environ), "argv": list(sys.argv)}
    print(json.dumps(seen), flush=True)
    for step in ctx.steps():
        ctx.report(step, score=-(params["x"] - 0.3) ** 2 + step / 100.0)
    ctx.checkpoint(seen)


def counted(params, ctx):
    """``quadratic`` that also logs, per run, every report it sent and whether it ended, to
    ``params["log"]/<pid>-<n>.txt``: the tests compare the store against what was emitted."""
    import uuid
    from pathlib import Path

    log = Path(params["log"]) / f"{uuid.uuid4().hex}.txt"
    with open(log, "a") as f:
        f.write(f"start {ctx.trial_id} {ctx.start_step}\n")
        f.flush()
        for step in ctx.steps():
            time.sleep(float(params.get("sleep", 0.0)))
            ctx.report(step, score=-(params["x"] - 0.3) ** 2 + step / 100.0)
            f.write(f"report {step}\n")
            f.flush()
        ctx.checkpoint({"at": ctx.current_step})
        f.write("end\n")


def stuck(params, ctx):
    """``kind`` ok: a normal trial; slow: each step takes ``sleep`` s but it stops when asked;
    hang: at step 2 it blocks for good, deaf to stop requests."""
    for step in ctx.steps():
        if params["kind"] == "hang" and step == 2:
            time.sleep(3600)
        if params["kind"] == "slow":
            time.sleep(float(params.get("sleep", 1.0)))
        ctx.report(step, score=float(step) + (1.0 if params["kind"] == "ok" else 0.0))
    ctx.checkpoint({"at": ctx.current_step})


def disk_filler(params, ctx):
    """``quadratic`` whose checkpoint meets a full disk once the trial reaches ``full_at``:
    the worker process's file-size limit is lowered below the checkpoint's size (a real
    write failure, EFBIG, as a full disk gives ENOSPC)."""
    import resource
    import signal

    for step in ctx.steps():
        ctx.report(step, score=-(params["x"] - 0.3) ** 2 + step / 100.0)
    if ctx.current_step >= params["full_at"]:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # fail the write, not the process
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, hard))
    ctx.checkpoint({"at": ctx.current_step, "pad": "x" * 4096})


def _load_rows(path):
    raise FileNotFoundError(f"no data set at {path}")


def broken(params, ctx):
    """Fails in every trial before its first report: a data set that is not there."""
    for step in ctx.steps():
        _load_rows(params.get("data", "/nowhere/train.csv"))
        ctx.report(step, score=0.0)


def misnamed(params, ctx):
    """Reports ``acc`` and ``loss``: a sweep whose metric is another name gets no value."""
    for step in ctx.steps():
        time.sleep(float(params.get("sleep", 0.0)))
        ctx.report(step, acc=0.5 + step / 100.0, loss=1.0 / step)
    ctx.checkpoint({"at": ctx.current_step})
