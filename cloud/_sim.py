"""The simulated provider: instances that boot after a sampled latency, may fail to launch for
lack of capacity, and (spot) may be preempted; billed like the real ones.

It stands beside the local and cloud providers and has the same verbs, so the controller and
the ledger run unchanged on it. Boot latency is when the worker registers, not when the cloud
says "running" (as with the real clouds, where the VM runs long before its worker is up).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from budgets import SimClock
from cloud._provider import CapacityError, ProviderError
from records import Instance, InstanceState


@dataclass(frozen=True)
class SimInstanceType:
    name: str
    slots: int
    on_demand_per_hour: float
    spot_per_hour: float | None = None


DEFAULT_TYPE = SimInstanceType("sim-gpu", slots=1, on_demand_per_hour=1.0, spot_per_hour=0.35)


def uniform_boot(low: float = 60.0, high: float = 180.0) -> Callable[[random.Random], float]:
    return lambda rng: rng.uniform(low, high)


class SimProvider:
    name = "sim"

    def __init__(
        self,
        clock: SimClock,
        *,
        types: Sequence[SimInstanceType] = (DEFAULT_TYPE,),
        boot_s: Callable[[random.Random], float] | None = None,
        capacity_failure_prob: float = 0.0,
        preemptions_per_hour: float = 0.0,
        seed: int = 0,
    ) -> None:
        self._clock = clock
        self._types = {t.name: t for t in types}
        self._boot_s = boot_s or uniform_boot()
        self._capacity_failure_prob = capacity_failure_prob
        self._preempt_rate = preemptions_per_hour / 3600.0
        self._rng = random.Random(seed)
        self._ids = itertools.count(1)
        self._instances: dict[str, Instance] = {}
        self._ready_at: dict[str, float] = {}
        self._preempt_at: dict[str, float] = {}
        self._changes: list[tuple[float, str]] = []

    def _type(self, instance_type: str) -> SimInstanceType:
        if instance_type not in self._types:
            raise ProviderError(f"unknown simulated instance type {instance_type!r}; "
                                f"known: {sorted(self._types)}")
        return self._types[instance_type]

    def price_per_hour(self, instance_type: str = DEFAULT_TYPE.name, spot: bool = False) -> float:
        t = self._type(instance_type)
        if spot:
            if t.spot_per_hour is None:
                raise ProviderError(f"{instance_type} has no spot price")
            return t.spot_per_hour
        return t.on_demand_per_hour

    def slots(self, instance_type: str = DEFAULT_TYPE.name) -> int:
        return self._type(instance_type).slots

    def launch(self, count: int, instance_type: str = DEFAULT_TYPE.name, spot: bool = False,
               tags: Mapping[str, str] | None = None) -> list[Instance]:
        t = self._type(instance_type)
        if self._capacity_failure_prob and self._rng.random() < self._capacity_failure_prob:
            raise CapacityError(f"simulated: no capacity for {instance_type} now")
        now = self._clock.now()
        out = []
        for _ in range(count):
            iid = f"sim-{next(self._ids)}"
            inst = Instance(instance_id=iid, provider=self.name, instance_type=t.name, spot=spot,
                            slots=t.slots, price_per_hour=self.price_per_hour(t.name, spot),
                            state=InstanceState.RUNNING, launched_at=now, queue=iid,
                            tags=dict(tags or {}))
            self._instances[iid] = inst
            self._ready_at[iid] = now + max(0.0, self._boot_s(self._rng))
            heapq.heappush(self._changes, (self._ready_at[iid], iid))
            if spot and self._preempt_rate > 0:
                self._preempt_at[iid] = now + self._rng.expovariate(self._preempt_rate)
                heapq.heappush(self._changes, (self._preempt_at[iid], iid))
            out.append(inst)
        return out

    def terminate(self, instance_ids: Sequence[str]) -> list[Instance]:
        now = self._clock.now()
        done = []
        for iid in instance_ids:
            inst = self._refresh(iid, now)
            if inst.state != InstanceState.TERMINATED:
                inst = inst.model_copy(update={"state": InstanceState.TERMINATED,
                                               "terminated_at": now})
                self._instances[iid] = inst
            done.append(inst)
        return done

    def list(self, experiment: str | None = None) -> list[Instance]:
        now = self._clock.now()
        out = []
        for iid in list(self._instances):
            inst = self._refresh(iid, now)
            if experiment is None or inst.tags.get("experiment") == experiment:
                out.append(inst)
        return out

    # -- what the simulated executor needs to know ------------------------------------------
    def ready_at(self, instance_id: str) -> float:
        return self._ready_at[instance_id]

    def ended_at(self, instance_id: str) -> float | None:
        """When the instance stopped (terminated or preempted), if it has or will."""
        inst = self._instances[instance_id]
        if inst.terminated_at is not None:
            return inst.terminated_at
        return self._preempt_at.get(instance_id)

    def next_change(self, after: float) -> float | None:
        """The next moment an instance becomes ready or is preempted, after ``after``.

        Simulated time only moves forward, so moments already passed are dropped for good.
        """
        while self._changes and (
                self._changes[0][0] <= after
                or self._instances[self._changes[0][1]].state == InstanceState.TERMINATED):
            heapq.heappop(self._changes)
        return self._changes[0][0] if self._changes else None

    def _refresh(self, iid: str, now: float) -> Instance:
        inst = self._instances[iid]
        at = self._preempt_at.get(iid)
        if inst.state != InstanceState.TERMINATED and at is not None and at <= now:
            inst = inst.model_copy(update={"state": InstanceState.TERMINATED,
                                           "terminated_at": at, "preempted": True})
            self._instances[iid] = inst
        return inst
