"""The unit of work: train one trial from one step to another on g GPUs of one worker."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A worker exits with this status (EX_TEMPFAIL) after giving up on a trainable that hung past
# its segment's timeout; a VM's startup script then starts the worker again.
TIMEOUT_EXIT_CODE = 75


class Segment(BaseModel):
    """Train trial ``trial_id`` from ``start_step`` (exclusive) to ``stop_step`` (inclusive).

    Travels as JSON in a broker message; the trainable is named by import path (or by a code
    bundle in the experiment's storage), never pickled into the message.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    v: int = 1
    segment_id: str
    experiment_id: str
    trial_id: str
    trainable: str = Field(description="'package.module:function' or 'bundle:/path/to/file'")
    params: dict[str, Any]
    start_step: int = Field(ge=0)
    stop_step: int = Field(ge=1)
    gpus: int = Field(default=1, ge=0)
    checkpoint_dir: str
    events_key: str = Field("", description="where the worker sends events (set by the executor)")
    stop_key: str = Field("", description="where stop requests are read (set by the executor)")
    heartbeat_key: str = Field("", description="where the worker beats while the segment runs "
                               "(set by the executor; the controller's lease on it)")
    revoked_key: str = Field("", description="segments given away to another worker: one "
                             "listed here writes no checkpoint (set by the executor)")
    timeout_s: float | None = Field(None, gt=0, description="the segment fails when it runs "
                                    "longer than this (the sweep's segment_timeout)")
    submitted_at: float = 0.0
