"""Small versioned records that cross process boundaries (controller, workers, providers)."""

from records._events import Event, Report, SegmentFinished, SegmentStarted, parse_event
from records._instance import Instance, InstanceState
from records._segment import Segment

__all__ = [
    "Event",
    "Instance",
    "InstanceState",
    "Report",
    "Segment",
    "SegmentFinished",
    "SegmentStarted",
    "parse_event",
]
