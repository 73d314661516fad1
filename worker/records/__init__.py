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
from worker.records._pool import (
    ALIVE_EVERY_S,
    ALIVE_TTL_S,
    PoolMember,
    alive_key,
    claims_key,
    members_key,
    sweeps_key,
)
from worker.records._segment import TIMEOUT_EXIT_CODE, Segment
from worker.records._states import EndReason, ExperimentState, SegmentState, TrialState
from worker.records._warm import follows_key, warm_until_key

__all__ = [
    "ALIVE_EVERY_S",
    "ALIVE_TTL_S",
    "EndReason",
    "Event",
    "ExperimentState",
    "Instance",
    "InstanceState",
    "PoolMember",
    "Report",
    "Segment",
    "SegmentEnd",
    "SegmentFinished",
    "SegmentStarted",
    "SegmentState",
    "TIMEOUT_EXIT_CODE",
    "TrialState",
    "alive_key",
    "claims_key",
    "follows_key",
    "members_key",
    "parse_event",
    "sweeps_key",
    "warm_until_key",
]
