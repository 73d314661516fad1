"""The simulated executor: segments replay real learning curves on a simulated clock.

It stands beside ``CeleryExecutor`` with the same interface, so the real controller, schedulers,
sampler, ledger and store run unchanged. Replay rule (see the data sets' README): a segment of
configuration ``c`` from step ``a`` to ``b`` takes ``cost_s(c, a, b)`` seconds, divided by the
speed-up on its GPUs and scaled by noise; its metric after step ``s`` is ``value(c, s)``; a run
whose curve ends early (diverged) fails there.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from budgets import SimClock
from records import Event, Instance, Report, Segment, SegmentFinished, SegmentStarted


class Curves(Protocol):
    def value(self, config_id: str, step: int) -> float | None: ...

    def cost_s(self, config_id: str, start: int, stop: int) -> float: ...

    def last_step(self, config_id: str) -> int: ...


class InstanceClock(Protocol):
    """What the simulated provider tells the executor about its instances."""

    def ready_at(self, instance_id: str) -> float: ...

    def ended_at(self, instance_id: str) -> float | None: ...

    def next_change(self, after: float) -> float | None: ...


@dataclass
class _Sim:
    segment: Segment
    instance_id: str
    version: int = 0
    # (end time, step) of every step, in order; the step starts when the previous one ends.
    steps: list[tuple[float, int]] = field(default_factory=list)
    start: float = 0.0
    finished: bool = False


class SimExecutor:
    """Replays ``curves``; the trial's configuration is its param ``config_param``."""

    def __init__(
        self,
        clock: SimClock,
        provider: InstanceClock,
        curves: Curves,
        *,
        metric: str,
        config_param: str = "config",
        step_noise: float = 0.0,
        speedup: Callable[[int], float] | None = None,
        setup_s: float = 0.0,
        checkpoint_s: float = 0.0,
        time_scale: float = 1.0,
        seed: int = 0,
        config_ids: list[str] | None = None,
    ) -> None:
        self._clock = clock
        self._provider = provider
        self._curves = curves
        self._metric = metric
        self._config_param = config_param
        self._noise = step_noise
        self._speedup = speedup or (lambda g: 1.0)
        self._setup_s = setup_s
        self._checkpoint_s = checkpoint_s
        self._time_scale = time_scale
        self._rng = random.Random(seed)
        self._heap: list[tuple[float, int, str, int, Event]] = []
        self._seq = itertools.count()
        self._sims: dict[str, _Sim] = {}
        self._config_ids = config_ids

    # -- the Executor interface -------------------------------------------------------------
    def submit(self, segment: Segment, instance: Instance) -> None:
        now = self._clock.now()
        sim = _Sim(segment, instance.instance_id, start=now + self._setup_s)
        self._sims[segment.segment_id] = sim
        config = self._config(segment)
        factor = self._time_scale * self._rng.uniform(1 - self._noise, 1 + self._noise)
        factor /= max(self._speedup(max(1, segment.gpus)), 1e-9)
        a, b = segment.start_step, segment.stop_step
        last_ok = self._curves.last_step(config)
        self._push(sim, now, SegmentStarted(segment_id=segment.segment_id,
                                            trial_id=segment.trial_id, worker=instance.instance_id,
                                            gpus=list(range(segment.gpus)), ts=now))
        t = sim.start
        for step in range(a + 1, min(b, last_ok) + 1):
            t = sim.start + self._curves.cost_s(config, a, step) * factor
            sim.steps.append((t, step))
        for end, step in sim.steps:
            self._push(sim, end, self._report(sim, step, end))
        if last_ok < b:  # a diverged run: the trainable raises where its curve ends
            self._finish(sim, "failed", max(a, last_ok), t,
                         error=f"the run diverged after step {last_ok}")
        else:
            self._finish(sim, "done", b, t + self._checkpoint_s, checkpoint_step=b)

    def poll(self, timeout_s: float) -> list[Event]:
        now = self._clock.now()
        target = now + max(0.0, timeout_s)
        change = self._provider.next_change(now)
        if change is not None:
            target = min(target, change)
        self._drop_stale()
        if self._heap and self._heap[0][0] <= target:
            first = max(now, self._heap[0][0])
            self._clock.advance_to(first)
            events = []
            while self._heap and self._heap[0][0] <= first:
                _, _, seg_id, version, event = heapq.heappop(self._heap)
                if self._live(seg_id, version, event):
                    events.append(event)
                self._drop_stale()
            return events
        self._clock.advance_to(target)
        return []

    def request_stop(self, segment_ids: list[str]) -> None:
        now = self._clock.now()
        for seg_id in segment_ids:
            sim = self._sims.get(seg_id)
            if sim is None or sim.finished:
                continue
            # A step already started runs to its end; the next one does not start.
            kept, prev_end = [], sim.start
            for end, step in sim.steps:
                if prev_end > now:
                    break
                kept.append((end, step))
                prev_end = end
            sim.version += 1
            for end, step in kept:
                if end > now:
                    self._push(sim, end, self._report(sim, step, end))
            last_end, last_step = kept[-1] if kept else (now, sim.segment.start_step)
            self._finish(sim, "stopped", last_step, max(now, last_end) + self._checkpoint_s,
                         checkpoint_step=last_step)

    def ready(self, instance: Instance) -> bool:
        ended = self._provider.ended_at(instance.instance_id)
        now = self._clock.now()
        return self._provider.ready_at(instance.instance_id) <= now and (
            ended is None or ended > now)

    def close(self) -> None:
        self._heap.clear()

    # -- inside -----------------------------------------------------------------------------
    def _report(self, sim: _Sim, step: int, t: float) -> Report:
        value = self._curves.value(self._config(sim.segment), step)
        metrics: dict[str, Any] = {self._metric: float("nan") if value is None else value}
        return Report(segment_id=sim.segment.segment_id, trial_id=sim.segment.trial_id,
                      step=step, metrics=metrics, ts=t)

    def _config(self, segment: Segment) -> str:
        """The curve a trial replays: its ``config`` param, an id or an index into the ids."""
        chosen = segment.params[self._config_param]
        if self._config_ids is not None and isinstance(chosen, int):
            return self._config_ids[chosen]
        return str(chosen)

    def _finish(self, sim: _Sim, status: str, last_step: int, t: float,
                checkpoint_step: int | None = None, error: str | None = None) -> None:
        self._push(sim, t, SegmentFinished(
            segment_id=sim.segment.segment_id, trial_id=sim.segment.trial_id,
            status=status, last_step=last_step,  # type: ignore[arg-type]
            checkpoint_step=checkpoint_step, error=error, ts=t))

    def _push(self, sim: _Sim, t: float, event: Event) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), sim.segment.segment_id, sim.version,
                                    event))

    def _live(self, seg_id: str, version: int, event: Event) -> bool:
        sim = self._sims.get(seg_id)
        if sim is None or version != sim.version or sim.finished:
            return False
        ended = self._provider.ended_at(sim.instance_id)
        if ended is not None and ended <= event.ts:
            return False  # its machine is gone: the controller finds the segment lost
        if isinstance(event, SegmentFinished):
            sim.finished = True
            del self._sims[seg_id]
        return True

    def _drop_stale(self) -> None:
        while self._heap:
            _, _, seg_id, version, _ = self._heap[0]
            sim = self._sims.get(seg_id)
            if sim is not None and version == sim.version:
                return
            heapq.heappop(self._heap)
