"""Trivial trainables the benchmarks run on real workers (``benchmarks._trainables:NAME``).

They do next to no work, so what a benchmark measures with them is elastune's own overhead:
dispatch, event streaming and the store.
"""

from __future__ import annotations

import time
from typing import Any


def noop(params: dict[str, Any], ctx: Any) -> None:
    """One report per step, no work: a segment takes as long as elastune makes it take."""
    for step in ctx.steps():
        ctx.report(step, score=float(params["x"]) * step)
    ctx.checkpoint(None)


def chatty(params: dict[str, Any], ctx: Any) -> None:
    """Reports every step as fast as it can; checkpoints once at the end."""
    x = float(params["x"])
    for step in ctx.steps():
        ctx.report(step, score=x * step)
    ctx.checkpoint(None)


def paced(params: dict[str, Any], ctx: Any) -> None:
    """Sleeps ``step_s`` per step, then reports; checkpoints once at the end: segments of a
    known length, so that what the benchmark measures beyond it is elastune's."""
    x, step_s = float(params["x"]), float(params["step_s"])
    for step in ctx.steps():
        time.sleep(step_s)
        ctx.report(step, score=x * step)
    ctx.checkpoint(None)
