"""Events a worker sends back about a segment: started, a report, finished."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from worker.records._states import SegmentState

# What a worker's ``finished`` event may say of a segment (the store's other segment states are
# the controller's own).
SegmentEnd = Literal[SegmentState.DONE, SegmentState.ENDED, SegmentState.STOPPED,
                     SegmentState.FAILED, SegmentState.LOST]


class SegmentStarted(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["started"] = "started"
    segment_id: str
    trial_id: str
    worker: str
    gpus: list[int]
    ts: float


class Report(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["report"] = "report"
    segment_id: str
    trial_id: str
    step: int
    metrics: dict[str, float]
    ts: float


class SegmentFinished(BaseModel):
    """``status``: ``done`` (reached stop_step), ``ended`` (trainable returned early),
    ``stopped`` (asked to stop), ``failed`` (the trainable raised) or ``lost`` (infrastructure)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["finished"] = "finished"
    segment_id: str
    trial_id: str
    status: SegmentEnd
    last_step: int
    checkpoint_step: int | None = None
    error: str | None = None
    # The sweep cannot go on (the checkpoint storage is full): the controller stops it.
    fatal: bool = False
    ts: float


Event = SegmentStarted | Report | SegmentFinished

_KINDS: dict[str, type[BaseModel]] = {
    "started": SegmentStarted,
    "report": Report,
    "finished": SegmentFinished,
}


def parse_event(payload: str | bytes | dict[str, Any]) -> Event:
    """Decode one event from its JSON form."""
    data = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
    return _KINDS[data["kind"]].model_validate(data)  # type: ignore[return-value]
