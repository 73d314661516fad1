"""Small versioned records that cross process boundaries (controller, workers, providers)."""

from records._events import Event, Report, SegmentEnd, SegmentFinished, SegmentStarted, parse_event
from records._instance import Instance, InstanceState
from records._segment import TIMEOUT_EXIT_CODE, Segment
from records._states import EndReason, ExperimentState, SegmentState, TrialState

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
