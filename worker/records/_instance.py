"""A rented machine (or a local worker process standing in for one)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class InstanceState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    TERMINATED = "terminated"


class Instance(BaseModel):
    model_config = ConfigDict(frozen=True)

    v: int = 1
    instance_id: str
    provider: str
    instance_type: str
    spot: bool = False
    slots: int = 1
    price_per_hour: float
    state: InstanceState = InstanceState.PENDING
    launched_at: float
    terminated_at: float | None = None
    queue: str
    tags: dict[str, str] = {}
    zone: str = ""
    # The cloud took it back (spot/preemptible): its segments are re-queued from their last
    # checkpoint and the loss counts against no trial's failure budget.
    preempted: bool = False
