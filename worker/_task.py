"""The one Celery task: run a segment of a trial on this worker's free GPU slots."""

from __future__ import annotations

import json
import os
import time
import traceback

import redis

from records import Segment, SegmentFinished, SegmentStarted
from worker._context import TrialContext
from worker._slots import SlotPool
from worker._trainable import load_trainable

TASK_NAME = "elastune.run_segment"

_client: redis.Redis | None = None


def set_client(client: redis.Redis) -> None:
    global _client
    _client = client


def _emit(client: redis.Redis, key: str, event: SegmentStarted | SegmentFinished) -> None:
    client.xadd(key, {"e": json.dumps(event.model_dump())})


def run_segment(payload: dict) -> str:
    """Run one segment; every outcome, failure included, goes back as a ``finished`` event."""
    assert _client is not None, "worker client not initialised"
    segment = Segment.model_validate(payload)
    worker_name = os.environ.get("ELASTUNE_WORKER_NAME", "worker")
    pool = SlotPool(_client, worker_name)
    gpus = pool.claim(segment.gpus)
    ctx = TrialContext(segment, _client, gpus)
    status, error = "done", None
    try:
        if gpus is None:
            status, error = "lost", f"{segment.gpus} slot(s) not free on {worker_name}"
            gpus = []
            return status
        # Frameworks read this when they first touch the GPU; a segment sees only its slots.
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
        _emit(_client, segment.events_key, SegmentStarted(
            segment_id=segment.segment_id, trial_id=segment.trial_id, worker=worker_name,
            gpus=gpus, ts=time.time()))
        trainable = load_trainable(segment.trainable)
        trainable(dict(segment.params), ctx)
        if ctx.last_reported >= segment.stop_step or ctx.current_step >= segment.stop_step:
            status = "done"
        elif ctx.stopped:
            status = "stopped"
        else:
            status = "ended"
    except Exception as exc:  # the trainable's own error: reported, never raised into Celery
        status = "failed"
        error = "".join(traceback.format_exception(exc)[-6:])[-4000:]
    finally:
        if gpus:
            pool.release(gpus)
        _emit(_client, segment.events_key, SegmentFinished(
            segment_id=segment.segment_id, trial_id=segment.trial_id, status=status,
            last_step=ctx.last_reported, checkpoint_step=ctx.checkpoint_step, error=error,
            ts=time.time()))
    return status
