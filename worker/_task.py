"""The one Celery task: run a segment of a trial on this worker's free GPU slots.

While a segment runs, a thread beats for it in the broker (``HINCRBY heartbeat_key
segment_id``): the controller holds a lease on every segment and renews it when the count
moves, so a worker that dies or hangs is noticed within the lease, not after Celery's
visibility timeout. The same thread enforces the segment's timeout: at ``timeout_s`` it asks the
trainable to stop (``ctx.steps()`` ends, ``ctx.should_stop()`` turns true); if the trainable
does not return within a grace, the segment is reported failed and the worker process exits
with :data:`TIMEOUT_EXIT_CODE` (nothing else can end a call stuck in user code), so the
instance is restarted or replaced.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback

import redis

from worker._context import CheckpointStorageFull, TrialContext
from worker._pool import leave_pool
from worker._slots import SlotPool
from worker._trainable import load_trainable
from worker.records import TIMEOUT_EXIT_CODE, Segment, SegmentFinished, SegmentStarted, SegmentState

# Set in a pool worker's environment: the pool it serves, and its main process.
POOL_ENV = "ELASTUNE_POOL"
MAIN_PID_ENV = "ELASTUNE_WORKER_PID"
TASK_NAME = "elastune.run_segment"
HEARTBEAT_S = float(os.environ.get("ELASTUNE_HEARTBEAT_S", "2.0"))
# A sweep's keys that workers write (events, heartbeats) expire this long after the last write:
# its controller deletes them at its end, and a worker writing after that (a VM still shutting
# down) or a controller that died for good leaves them only for this long.
KEY_TTL_S = 86_400

_client: redis.Redis | None = None


def set_client(client: redis.Redis) -> None:
    global _client
    _client = client


def _emit(client: redis.Redis, key: str, event: SegmentStarted | SegmentFinished) -> None:
    pipe = client.pipeline()
    pipe.xadd(key, {"e": json.dumps(event.model_dump())})
    pipe.expire(key, KEY_TTL_S)
    pipe.execute()


def timeout_grace_s(timeout_s: float) -> float:
    """How long a trainable asked to stop at its timeout may take to return."""
    return min(60.0, max(2.0, 0.1 * timeout_s))


class _Beat(threading.Thread):
    """Beats for the segment and enforces its timeout; see the module docstring."""

    def __init__(self, client: redis.Redis, segment: Segment, ctx: TrialContext) -> None:
        super().__init__(name=f"beat-{segment.segment_id}", daemon=True)
        self._client, self._segment, self._ctx = client, segment, ctx
        self._done = threading.Event()
        self.timed_out = False

    def run(self) -> None:
        seg = self._segment
        start = time.monotonic()
        grace = timeout_grace_s(seg.timeout_s) if seg.timeout_s else 0.0
        while not self._done.wait(HEARTBEAT_S if not seg.timeout_s
                                  else min(HEARTBEAT_S, seg.timeout_s / 4)):
            if seg.heartbeat_key:
                try:
                    pipe = self._client.pipeline()
                    pipe.hincrby(seg.heartbeat_key, seg.segment_id, 1)
                    pipe.expire(seg.heartbeat_key, KEY_TTL_S)
                    pipe.execute()
                except redis.RedisError:
                    pass   # the broker is away: the lease says how long that may last
            if seg.timeout_s is None:
                continue
            elapsed = time.monotonic() - start
            if elapsed >= seg.timeout_s and not self.timed_out:
                self.timed_out = True
                self._ctx.stopped = True      # steps() ends at the next step
            if elapsed >= seg.timeout_s + grace and not self._done.is_set():
                _emit(self._client, seg.events_key, SegmentFinished(
                    segment_id=seg.segment_id, trial_id=seg.trial_id, status=SegmentState.FAILED,
                    last_step=self._ctx.last_reported, checkpoint_step=self._ctx.checkpoint_step,
                    error=f"timed out: the segment ran past its {seg.timeout_s:g} s timeout and "
                          f"did not stop within {grace:g} s; the worker restarts",
                    ts=time.time()))
                os._exit(TIMEOUT_EXIT_CODE)

    def stop(self) -> None:
        self._done.set()


def _leave_pool_loudly(worker_name: str, why: str) -> None:
    """Leave the pool and stop the worker (a warm shutdown: the consumer stops taking work)."""
    assert _client is not None
    print(f"elastune worker: error: {why}", file=sys.stderr, flush=True)
    try:
        leave_pool(_client, os.environ[POOL_ENV], worker_name)
    except redis.RedisError:
        pass   # its liveness key expires anyway once the worker is gone
    main_pid = int(os.environ.get(MAIN_PID_ENV, os.getpid()))
    os.kill(main_pid, signal.SIGTERM)


def run_segment(payload: dict) -> SegmentState:
    """Run one segment; every outcome, failure included, goes back as a ``finished`` event."""
    assert _client is not None, "worker client not initialised"
    segment = Segment.model_validate(payload)
    worker_name = os.environ.get("ELASTUNE_WORKER_NAME", "worker")
    if segment.stop_key and _client.sismember(segment.stop_key, segment.segment_id):
        # Delivered again after the controller gave up on it (its lease lapsed, the worker
        # that had it died): the re-run has another id, so this one is not started.
        return SegmentState.STOPPED
    pool = SlotPool(_client, worker_name)
    gpus = pool.claim(segment.gpus)
    ctx = TrialContext(segment, _client, gpus)
    beat = _Beat(_client, segment, ctx)
    status, error, fatal = SegmentState.DONE, None, False
    try:
        if gpus is None:
            status, error = SegmentState.LOST, f"{segment.gpus} slot(s) not free on {worker_name}"
            gpus = []
            return status
        # Frameworks read this when they first touch the GPU; a segment sees only its slots.
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
        beat.start()
        _emit(_client, segment.events_key, SegmentStarted(
            segment_id=segment.segment_id, trial_id=segment.trial_id, worker=worker_name,
            gpus=gpus, ts=time.time()))
        try:
            trainable = load_trainable(segment.trainable)
        except (ImportError, FileNotFoundError) as exc:
            if not os.environ.get(POOL_ENV):
                raise
            # A pool worker that cannot import the sweep's code is this worker's fault, not
            # the trial's: the segment goes back to the pool and the worker leaves it.
            status = SegmentState.LOST
            error = (f"worker {worker_name} cannot load {segment.trainable!r} ({exc}); it "
                     "leaves the pool: start it with --preload or in the trainable's folder")
            _leave_pool_loudly(worker_name, error)
            return status
        trainable(dict(segment.params), ctx)
        if ctx.last_reported >= segment.stop_step or ctx.current_step >= segment.stop_step:
            status = SegmentState.DONE
        elif beat.timed_out:
            status = SegmentState.FAILED
            error = (f"timed out: the segment ran past its {segment.timeout_s:g} s timeout "
                     f"and was stopped at step {ctx.last_reported}")
        elif ctx.stopped:
            status = SegmentState.STOPPED
        else:
            status = SegmentState.ENDED
    except CheckpointStorageFull as exc:
        status, error, fatal = SegmentState.FAILED, str(exc), True
    except Exception as exc:  # the trainable's own error: reported, never raised into Celery
        if isinstance(exc.__cause__ or exc.__context__, CheckpointStorageFull):
            fatal = True       # the trainable wrapped it
        status = SegmentState.FAILED
        error = "".join(traceback.format_exception(exc)[-6:])[-4000:]
    finally:
        beat.stop()
        if gpus:
            pool.release(gpus)
        _emit(_client, segment.events_key, SegmentFinished(
            segment_id=segment.segment_id, trial_id=segment.trial_id, status=status,
            last_step=ctx.last_reported, checkpoint_step=ctx.checkpoint_step, error=error,
            fatal=fatal, ts=time.time()))
        if segment.heartbeat_key:
            try:
                _client.hdel(segment.heartbeat_key, segment.segment_id)
            except redis.RedisError:
                pass
    return status
