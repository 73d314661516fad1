"""Small versioned records that cross process boundaries (controller, workers, providers)."""

from worker.records._events import (
    Event,
    Report,
    SegmentEnd,
    SegmentFinished,
    SegmentStarted,
    parse_event,
)
from worker.records._instance import Instance, InstanceState
from worker.records._segment import TIMEOUT_EXIT_CODE, Segment
from worker.records._states import EndReason, ExperimentState, SegmentState, TrialState

__all__ = [
    "EndReason",
    "Event",
    "ExperimentState",
    "Instance",
    "InstanceState",
    "Report",
    "Segment",
    "SegmentEnd",
    "SegmentFinished",
    "SegmentStarted",
    "SegmentState",
    "TIMEOUT_EXIT_CODE",
    "TrialState",
    "parse_event",
]
