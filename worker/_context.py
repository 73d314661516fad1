"""What a trainable sees while it runs one segment: steps, report, checkpoint, restore, stop."""

from __future__ import annotations

import errno
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import redis

from worker._checkpoints import load_checkpoint, save_checkpoint
from worker.records import Report, Segment

log = logging.getLogger(__name__)

_STOP_POLL_S = 0.05
# Out of space, over quota, past the file-size limit, or read-only: no checkpoint can be kept.
STORAGE_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


class CheckpointStorageFull(OSError):
    """A checkpoint could not be written because its storage is full: the sweep stops (every
    trial would fail the same way), cleanly, with this message."""


class SegmentRevoked(RuntimeError):
    """The controller gave this segment to another worker (this one was cut off or frozen
    past its lease): what it trained is not kept."""


class TrialContext:
    """Handed to ``trainable(params, ctx)`` on a worker.

    ``ctx.steps()`` yields ``start_step + 1 .. stop_step`` and ends early when the controller
    asks this segment to stop; ``ctx.report`` streams metrics to the controller at once.
    """

    def __init__(self, segment: Segment, client: redis.Redis, gpus: list[int]) -> None:
        self._segment = segment
        self._redis = client
        self.gpus: list[int] = gpus
        self.trial_id: str = segment.trial_id
        self.start_step: int = segment.start_step
        self.stop_step: int = segment.stop_step
        self.checkpoint_dir: str = segment.checkpoint_dir
        self.current_step: int = segment.start_step
        self.last_reported: int = segment.start_step
        self.checkpoint_step: int | None = None
        self.stopped = False
        self._next_stop_check = 0.0

    def restore(self) -> Any | None:
        """The state saved by this trial's last checkpoint before this segment, or None."""
        found = load_checkpoint(self.checkpoint_dir, self.start_step)
        return None if found is None else found[1]

    def steps(self) -> Iterator[int]:
        for step in range(self.start_step + 1, self.stop_step + 1):
            if self.should_stop():
                self.stopped = True
                return
            self.current_step = step
            yield step

    def report(self, step: int, **metrics: float) -> None:
        if not self.start_step < step <= self.stop_step:
            raise ValueError(
                f"report(step={step}): this segment runs steps {self.start_step + 1}.."
                f"{self.stop_step}"
            )
        if not metrics:
            raise ValueError("report() needs at least one metric, e.g. ctx.report(step, loss=0.1)")
        values = {}
        for key, value in metrics.items():
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"report(): metric {key!r} is not a number: {value!r}") from None
        event = Report(segment_id=self._segment.segment_id, trial_id=self.trial_id, step=step,
                       metrics=values, ts=time.time())
        self._redis.xadd(self._segment.events_key, {"e": json.dumps(event.model_dump())})
        self.last_reported = max(self.last_reported, step)
        self.current_step = max(self.current_step, step)

    def checkpoint(self, state: Any) -> None:
        """Save ``state`` as this trial's checkpoint at the current step (not if the segment
        was given to another worker meanwhile: it would overwrite what that one trains)."""
        seg = self._segment
        if seg.revoked_key and self._redis.sismember(seg.revoked_key, seg.segment_id):
            log.warning("segment %s was given to another worker while this one was away: "
                        "its checkpoint is not written", seg.segment_id)
            raise SegmentRevoked(f"segment {seg.segment_id} was given to another worker; "
                                 "its checkpoint is not written")
        try:
            save_checkpoint(self.checkpoint_dir, self.current_step, state)
        except OSError as exc:
            if exc.errno in STORAGE_FULL_ERRNOS:
                raise CheckpointStorageFull(
                    f"the checkpoint storage is full: saving step {self.current_step} of "
                    f"{self.trial_id} in {self.checkpoint_dir} failed ({exc.strerror}); free "
                    "space or give provider.storage another place, then resume") from exc
            raise
        self.checkpoint_step = self.current_step

    def should_stop(self) -> bool:
        now = time.monotonic()
        if not self.stopped and now >= self._next_stop_check:
            self._next_stop_check = now + _STOP_POLL_S
            self.stopped = bool(
                self._redis.sismember(self._segment.stop_key, self._segment.segment_id)
            )
        return self.stopped
