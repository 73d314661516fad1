"""The simulated executor: segments replay real learning curves on a simulated clock.

It stands beside ``CeleryExecutor`` with the same interface, so the real controller, schedulers,
sampler, ledger and store run unchanged. Replay rule (see the data sets' README): a segment of
configuration ``c`` from step ``a`` to ``b`` takes ``cost_s(c, a, b)`` seconds, divided by the
speed-up on its GPUs and scaled by noise; its metric after step ``s`` is ``value(c, s)``; a run
whose curve ends early fails there if it diverged, and otherwise ends there (its run planned no
more steps: a real trainable that returns early ends its trial the same way).

Faults for robustness benchmarks, all off by default, drawn from a random stream of their own
(so a seed's step noise is the same with or without them): the trainable raises mid-segment
(an application error: the segment fails), a report carries NaN, and the worker process running
a segment is killed (out of memory, say), after which, as with Celery's late acks and
``reject_on_worker_lost``, the segment is delivered again to the same VM and re-runs from its
start (the trial's last checkpoint) once the worker has restarted. ``delivered_reports`` and
``finished`` count what :meth:`SimExecutor.poll` handed out, so a benchmark can check that the
store kept it all; ``fault_counts`` says which faults really struck.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from budgets import SimClock
from worker.records import (
    Event,
    Instance,
    Report,
    Segment,
    SegmentFinished,
    SegmentStarted,
    SegmentState,
)


class Curves(Protocol):
    def value(self, config_id: str, step: int) -> float | None: ...

    def cost_s(self, config_id: str, start: int, stop: int) -> float: ...

    def last_step(self, config_id: str) -> int: ...

    def diverged(self, config_id: str) -> bool: ...


class InstanceClock(Protocol):
    """What the simulated provider tells the executor about its instances."""

    def ready_at(self, instance_id: str) -> float: ...

    def ended_at(self, instance_id: str) -> float | None: ...

    def next_change(self, after: float) -> float | None: ...

    def interruption_notices(self, now: float, lead_s: float) -> set[str]: ...


@dataclass
class _Sim:
    segment: Segment
    instance_id: str
    version: int = 0
    # (end time, step) of every step, in order; the step starts when the previous one ends.
    steps: list[tuple[float, int]] = field(default_factory=list)
    start: float = 0.0
    finished: bool = False
    begin: float = 0.0                  # when the current attempt was delivered to the worker
    factor: float = 1.0                 # time factor of this segment (noise, speed-up)
    lost_at: float | None = None        # the current attempt's worker is killed then
    hang_at: float | None = None        # the current attempt's worker hangs then, for good
    beat: int | None = None             # the heartbeat count last seen alive
    nan_steps: frozenset[int] = frozenset()


@dataclass(frozen=True)
class _WorkerLost:
    """Internal: the worker process running a segment dies at ``ts``."""

    ts: float


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
        nearest: Callable[[Mapping[str, Any]], str] | None = None,
        app_error_prob: float = 0.0,
        nan_prob: float = 0.0,
        worker_losses_per_hour: float = 0.0,
        worker_restart_s: Callable[[random.Random], float] | float = 30.0,
        hang_prob: float = 0.0,
        heartbeat_s: float = 5.0,
        notice_s: float = 0.0,
    ) -> None:
        """``app_error_prob``: each run of a segment raises with this probability, during a
        step drawn uniformly. ``nan_prob``: each report's metric is NaN with this probability.
        ``worker_losses_per_hour``: the worker process running a segment is killed at this rate
        (per hour of the segment's run); the segment restarts ``worker_restart_s`` later.
        ``hang_prob``: each run of a segment hangs with this probability, at a moment drawn
        uniformly: its worker sends nothing more, heartbeats included, and ignores stop
        requests (the controller's lease gives it up). ``heartbeat_s``: how often a live
        worker beats. ``notice_s``: how long before a spot VM is taken back its worker sees
        the cloud's interruption notice (0: never, as by default). ``nearest``: a trial
        without a ``config_param`` replays the configuration it names for the trial's params
        (a point of the curves' hyperparameter space, :class:`NearestConfig`)."""
        problems = []
        for name, v in (("app_error_prob", app_error_prob), ("nan_prob", nan_prob),
                        ("hang_prob", hang_prob)):
            if not (isinstance(v, int | float) and 0.0 <= v <= 1.0):
                problems.append(f"{name} is {v!r}, but must be in [0, 1]")
        if not (isinstance(worker_losses_per_hour, int | float)
                and math.isfinite(worker_losses_per_hour) and worker_losses_per_hour >= 0):
            problems.append(f"worker_losses_per_hour is {worker_losses_per_hour!r}, but must "
                            "be a finite number >= 0")
        if not callable(worker_restart_s) and not (
                isinstance(worker_restart_s, int | float) and 0 <= worker_restart_s < math.inf):
            problems.append(f"worker_restart_s is {worker_restart_s!r}, but must be a finite "
                            "number >= 0 or a function of a random.Random")
        if problems:
            raise ValueError("invalid SimExecutor: " + "; ".join(problems))
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
        self._nearest = nearest
        self._app_error_prob = app_error_prob
        self._nan_prob = nan_prob
        self._loss_rate = worker_losses_per_hour / 3600.0
        self._restart_s = worker_restart_s
        self._hang_prob = hang_prob
        self._heartbeat_s = heartbeat_s
        self._notice_s = notice_s
        self._started_once: set[str] = set()
        self._fault_rng = random.Random(f"sim-executor-faults:{seed}")
        self.delivered_reports: Counter[str] = Counter()   # reports handed out, per segment
        self.finished: dict[str, SegmentState] = {}         # segment id -> status handed out
        self.fault_counts: Counter[str] = Counter()

    # -- the Executor interface -------------------------------------------------------------
    def submit(self, segment: Segment, instance: Instance) -> None:
        now = self._clock.now()
        sim = _Sim(segment, instance.instance_id, start=now + self._setup_s, begin=now)
        self._sims[segment.segment_id] = sim
        factor = self._time_scale * self._rng.uniform(1 - self._noise, 1 + self._noise)
        factor /= max(self._speedup(max(1, segment.gpus)), 1e-9)
        sim.factor = factor
        self._attempt(sim)

    def _attempt(self, sim: _Sim) -> None:
        """Schedule one run of the segment, delivered to its worker at ``sim.begin``."""
        segment = sim.segment
        config = self._config(segment)
        a, b = segment.start_step, segment.stop_step
        last_ok = self._curves.last_step(config)
        self._push(sim, sim.begin, SegmentStarted(
            segment_id=segment.segment_id, trial_id=segment.trial_id, worker=sim.instance_id,
            gpus=list(range(segment.gpus)), ts=sim.begin))
        t = sim.start
        sim.steps = []
        for step in range(a + 1, min(b, last_ok) + 1):
            t = sim.start + self._curves.cost_s(config, a, step) * sim.factor
            sim.steps.append((t, step))
        status, last, error, end = SegmentState.DONE, b, None, t + self._checkpoint_s
        if last_ok < b and self._curves.diverged(config):
            # a diverged run: the trainable raises where its curve ends
            status, last, end = SegmentState.FAILED, max(a, last_ok), t
            error = f"the run diverged after step {last_ok}"
        elif last_ok < b:  # the run planned no more steps: the trainable returns there
            status, last, end = SegmentState.ENDED, max(a, last_ok), t
        frng = self._fault_rng
        if self._app_error_prob and sim.steps and frng.random() < self._app_error_prob:
            i = frng.randrange(len(sim.steps))
            prev = sim.start if i == 0 else sim.steps[i - 1][0]
            end = prev + (sim.steps[i][0] - prev) * frng.random()
            status, last = SegmentState.FAILED, sim.steps[i][1] - 1
            error = f"simulated application error in step {sim.steps[i][1]}"
            sim.steps = sim.steps[:i]
        sim.nan_steps = frozenset(
            step for _, step in sim.steps
            if self._nan_prob and frng.random() < self._nan_prob)
        sim.lost_at = sim.hang_at = None
        if self._loss_rate > 0:
            lost_at = sim.begin + frng.expovariate(self._loss_rate)
            if lost_at < end:
                sim.lost_at = lost_at
        if self._hang_prob and frng.random() < self._hang_prob:
            hang_at = sim.begin + (end - sim.begin) * frng.random()
            if sim.lost_at is None or hang_at < sim.lost_at:
                sim.hang_at, sim.lost_at = hang_at, None
                self.fault_counts["hung_workers"] += 1
        cut = sim.lost_at if sim.lost_at is not None else sim.hang_at
        for step_end, step in sim.steps:
            if cut is None or step_end < cut:
                self._push(sim, step_end, self._report(sim, step, step_end))
        if sim.hang_at is not None:
            pass   # hung: nothing more comes from this run
        elif sim.lost_at is not None:
            self._push(sim, sim.lost_at, _WorkerLost(sim.lost_at))  # type: ignore[arg-type]
        else:
            self._finish(sim, status, last, end,
                         checkpoint_step=b if status == SegmentState.DONE else None, error=error)

    def _restart(self, sim: _Sim, t: float) -> None:
        """The worker running ``sim`` died at ``t``: the broker delivers the segment again once
        the worker is back, and it re-runs from its start (the trial's last checkpoint)."""
        self.fault_counts["worker_losses"] += 1
        restart = self._restart_s(self._fault_rng) if callable(self._restart_s) \
            else self._restart_s
        sim.version += 1
        sim.begin = t + max(0.0, restart)
        sim.start = sim.begin + self._setup_s
        self._attempt(sim)

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
                    if isinstance(event, _WorkerLost):
                        self._restart(self._sims[seg_id], event.ts)
                    else:
                        events.append(event)
                        self._delivered(event)
                self._drop_stale()
            return events
        self._clock.advance_to(target)
        return []

    def revoke(self, segment_ids: list[str]) -> None:
        """Nothing to do: a simulated segment given up is gone with its instance or lease."""

    def request_stop(self, segment_ids: list[str]) -> None:
        now = self._clock.now()
        for seg_id in segment_ids:
            sim = self._sims.get(seg_id)
            if sim is None or sim.finished or (sim.hang_at is not None and sim.hang_at <= now):
                continue   # a hung worker does not read stop requests
            # A step already started runs to its end; the next one does not start.
            kept, prev_end = [], sim.start
            for end, step in sim.steps:
                if prev_end > now:
                    break
                kept.append((end, step))
                prev_end = end
            last_end, last_step = kept[-1] if kept else (max(now, sim.begin),
                                                         sim.segment.start_step)
            done_at = max(now, last_end) + self._checkpoint_s
            if sim.hang_at is not None and done_at >= sim.hang_at:
                # It hangs before it can stop: what it reported until then, nothing more.
                sim.version += 1
                for end, step in kept:
                    if now < end < sim.hang_at:
                        self._push(sim, end, self._report(sim, step, end))
                continue
            if sim.lost_at is not None and done_at >= sim.lost_at:
                # The worker dies before it can stop: delivered again, the segment sees the
                # stop request at once and stops where it started.
                kept = [(end, step) for end, step in kept if end < sim.lost_at]
                self.fault_counts["worker_losses"] += 1
                restart = self._restart_s(self._fault_rng) if callable(self._restart_s) \
                    else self._restart_s
                sim.begin = sim.lost_at + max(0.0, restart)
                last_step, done_at = sim.segment.start_step, sim.begin
            sim.version += 1
            for end, step in kept:
                if end > now:
                    self._push(sim, end, self._report(sim, step, end))
            if sim.begin > now:
                self._push(sim, sim.begin, SegmentStarted(
                    segment_id=seg_id, trial_id=sim.segment.trial_id, worker=sim.instance_id,
                    gpus=list(range(sim.segment.gpus)), ts=sim.begin))
            self._finish(sim, SegmentState.STOPPED, last_step, done_at, checkpoint_step=last_step)

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
        if step in sim.nan_steps:
            value = None
        metrics: dict[str, Any] = {self._metric: float("nan") if value is None else value}
        return Report(segment_id=sim.segment.segment_id, trial_id=sim.segment.trial_id,
                      step=step, metrics=metrics, ts=t)

    def _config(self, segment: Segment) -> str:
        """The curve a trial replays: its ``config`` param, an id or an index into the ids;
        without one, the configuration nearest to its params."""
        if self._nearest is not None and self._config_param not in segment.params:
            return self._nearest(segment.params)
        chosen = segment.params[self._config_param]
        if self._config_ids is not None and isinstance(chosen, int):
            return self._config_ids[chosen]
        return str(chosen)

    def _finish(self, sim: _Sim, status: SegmentState, last_step: int, t: float,
                checkpoint_step: int | None = None, error: str | None = None) -> None:
        self._push(sim, t, SegmentFinished(
            segment_id=sim.segment.segment_id, trial_id=sim.segment.trial_id,
            status=status, last_step=last_step,  # type: ignore[arg-type]
            checkpoint_step=checkpoint_step, error=error, ts=t))

    def _push(self, sim: _Sim, t: float, event: Event) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), sim.segment.segment_id, sim.version,
                                    event))

    def notices(self) -> set[str]:
        return self._provider.interruption_notices(self._clock.now(), self._notice_s)

    def heartbeats(self) -> dict[str, int]:
        """Per running segment, a count that moves every ``heartbeat_s`` while its worker is
        up and not hung (between a lost worker and its restart it stands still)."""
        now = self._clock.now()
        out = {}
        for seg_id, sim in list(self._sims.items()):
            ended = self._provider.ended_at(sim.instance_id)
            if ended is not None and ended <= now:
                del self._sims[seg_id]   # its machine is gone; nothing more comes from it
                continue
            alive = (sim.begin <= now and (sim.lost_at is None or now < sim.lost_at)
                     and (sim.hang_at is None or now < sim.hang_at))
            if alive:
                sim.beat = int((now - sim.begin) // self._heartbeat_s) + 1 + 10**6 * sim.version
            if sim.beat is not None:
                out[seg_id] = sim.beat
        return out

    def _delivered(self, event: Event) -> None:
        if isinstance(event, SegmentStarted):
            if event.segment_id in self._started_once:
                # Delivered again: the controller drops what the first run reported.
                self.delivered_reports[event.segment_id] = 0
            self._started_once.add(event.segment_id)
        elif isinstance(event, Report):
            self.delivered_reports[event.segment_id] += 1
            if math.isnan(event.metrics.get(self._metric, 0.0)):
                self.fault_counts["nan_reports"] += 1
        elif isinstance(event, SegmentFinished):
            self.finished[event.segment_id] = event.status
            if event.status == SegmentState.FAILED and (event.error or "").startswith("simulated"):
                self.fault_counts["app_errors"] += 1

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
