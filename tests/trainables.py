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
    for step in ctx.steps():
        ctx.report(step, score=float("nan") if params["x"] > 0.5 else params["x"])
    ctx.checkpoint(None)
