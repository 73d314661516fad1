"""Small versioned records that cross process boundaries (controller, workers, providers)."""

from records._events import Event, Report, SegmentFinished, SegmentStarted, parse_event
from records._instance import Instance, InstanceState
from records._segment import TIMEOUT_EXIT_CODE, Segment

__all__ = [
    "Event",
    "Instance",
    "InstanceState",
    "Report",
    "Segment",
    "SegmentFinished",
    "SegmentStarted",
    "TIMEOUT_EXIT_CODE",
    "parse_event",
]
