"""The simulated provider: instances that boot after a sampled latency, may fail to launch for
lack of capacity, and (spot) may be preempted; billed like the real ones.

It stands beside the local and cloud providers and has the same verbs, so the controller and
the ledger run unchanged on it. Boot latency is when the worker registers, not when the cloud
says "running" (as with the real clouds, where the VM runs long before its worker is up).

Faults for robustness benchmarks, all off by default: capacity outages (every launch in a time
window fails), VMs whose worker never registers (a bad image, a broker it cannot reach),
preemption storms (at a moment, each live spot VM is taken back with some probability) and VM
failures (a VM dies on its own, e.g. its worker exited and the startup script powered it off).
Their draws come from a random stream of their own, so turning them on leaves the boot,
capacity and preemption draws of a seed unchanged. ``fault_counts`` says which really struck.

Spot capacity replayed from a trace (``spot_replay``, :mod:`tuner.sim._spot_trace`) replaces
the preemption rate: a spot launch walks the zones in order (:meth:`SimProvider.prefer_zones`
reorders them, as a zone-aware policy does) and gets, in each, what the zone's capacity leaves
beside the VMs held there; when a zone's capacity falls below what is held, the youngest VMs
there are taken back (the trace's n-th VM is the sweep's n-th). Each zone has its own spot
price (``zone_spot_factor`` times the type's); on-demand is the same everywhere.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from budgets import SimClock
from cloud._provider import CapacityError, ProviderError
from tuner.sim._spot_trace import TraceReplay
from worker.records import Instance, InstanceState


class _End(StrEnum):
    """Why a simulated instance stops on its own (ties in time break on the text, as before)."""

    PREEMPTED = "preempted"    # the cloud takes the spot VM back (its preemption rate)
    STORM = "storm"            # a preemption storm takes it
    FAILED = "failed"          # the VM dies: no notice, and not counted as preempted


_FAULT_COUNT = {_End.PREEMPTED: "preemptions", _End.STORM: "storm_preemptions",
                _End.FAILED: "vm_failures"}


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
    blocking_launch = False

    def __init__(
        self,
        clock: SimClock,
        *,
        types: Sequence[SimInstanceType] = (DEFAULT_TYPE,),
        boot_s: Callable[[random.Random], float] | None = None,
        capacity_failure_prob: float = 0.0,
        preemptions_per_hour: float = 0.0,
        seed: int = 0,
        capacity_outages: Sequence[tuple[float, float]] = (),
        never_register_prob: float = 0.0,
        storms: Sequence[tuple[float, float]] = (),
        failures_per_hour: float = 0.0,
        spot_replay: TraceReplay | None = None,
        zone_spot_factor: Mapping[str, float] | None = None,
    ) -> None:
        """``capacity_outages``: ``(start, end)`` windows of clock time in which every launch
        raises :class:`CapacityError`. ``never_register_prob``: each VM's worker never registers
        with this probability (it runs, and is billed, until terminated). ``storms``:
        ``(time, fraction)``: at ``time`` each spot VM then live is preempted with probability
        ``fraction``. ``failures_per_hour``: each VM (spot or not) dies at this rate, not
        preempted (the controller sees a lost VM)."""
        problems = []
        for name, v in (("capacity_failure_prob", capacity_failure_prob),
                        ("never_register_prob", never_register_prob)):
            if not (isinstance(v, int | float) and 0.0 <= v <= 1.0):
                problems.append(f"{name} is {v!r}, but must be in [0, 1]")
        for name, v in (("preemptions_per_hour", preemptions_per_hour),
                        ("failures_per_hour", failures_per_hour)):
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                problems.append(f"{name} is {v!r}, but must be a finite number >= 0")
        if any(not (math.isfinite(a) and math.isfinite(b) and a <= b)
               for a, b in capacity_outages):
            problems.append(f"capacity_outages is {capacity_outages!r}, but must be finite "
                            "(start, end) pairs with start <= end")
        if any(not (math.isfinite(t) and 0.0 <= f <= 1.0) for t, f in storms):
            problems.append(f"storms is {storms!r}, but must be (finite time, fraction in "
                            "[0, 1]) pairs")
        if problems:
            raise ValueError("invalid SimProvider: " + "; ".join(problems))
        self._clock = clock
        self._types = {t.name: t for t in types}
        self._boot_s = boot_s or uniform_boot()
        self._capacity_failure_prob = capacity_failure_prob
        self._preempt_rate = preemptions_per_hour / 3600.0
        self._rng = random.Random(seed)
        self._fault_rng = random.Random(f"sim-provider-faults:{seed}")
        self._outages = tuple(sorted((float(a), float(b)) for a, b in capacity_outages))
        self._never_register_prob = never_register_prob
        self._storms = tuple(sorted((float(t), float(f)) for t, f in storms))
        self._failure_rate = failures_per_hour / 3600.0
        self._ids = itertools.count(1)
        self._instances: dict[str, Instance] = {}
        self._ready_at: dict[str, float] = {}
        # When and why an instance will stop on its own.
        self._end_at: dict[str, tuple[float, _End]] = {}
        self._changes: list[tuple[float, str]] = []
        self.fault_counts: Counter[str] = Counter()
        self._replay = spot_replay
        self.zones: list[str] = spot_replay.zones if spot_replay is not None else []
        self._walk = list(self.zones)   # the zones a spot launch tries, in order
        self._zone_factor = {z: float((zone_spot_factor or {}).get(z, 1.0)) for z in self.zones}
        self._other_end: dict[str, tuple[float, _End]] = {}   # ends that are not the trace's

    def _type(self, instance_type: str) -> SimInstanceType:
        if instance_type not in self._types:
            raise ProviderError(f"unknown simulated instance type {instance_type!r}; "
                                f"known: {sorted(self._types)}")
        return self._types[instance_type]

    def price_per_hour(self, instance_type: str = DEFAULT_TYPE.name, spot: bool = False) -> float:
        """The price a launch may pay: spot in the dearest zone it may use (as on AWS)."""
        if spot and self.zones:
            return max(self.spot_price_in(z, instance_type) for z in self.zones)
        t = self._type(instance_type)
        if spot:
            if t.spot_per_hour is None:
                raise ProviderError(f"{instance_type} has no spot price")
            return t.spot_per_hour
        return t.on_demand_per_hour

    def spot_price_in(self, zone: str, instance_type: str = DEFAULT_TYPE.name) -> float:
        """The spot price of ``instance_type`` in ``zone``."""
        t = self._type(instance_type)
        if t.spot_per_hour is None:
            raise ProviderError(f"{instance_type} has no spot price")
        return t.spot_per_hour * self._zone_factor.get(zone, 1.0)

    def prefer_zones(self, zones: Sequence[str]) -> None:
        """Walk these zones, in this order, at the next spot launches (unknown ones ignored;
        none known: all zones, in their first order)."""
        known = [z for z in dict.fromkeys(zones) if z in self._zone_factor]
        self._walk = known or list(self.zones)

    def slots(self, instance_type: str = DEFAULT_TYPE.name) -> int:
        return self._type(instance_type).slots

    def launch(self, count: int, instance_type: str = DEFAULT_TYPE.name, spot: bool = False,
               tags: Mapping[str, str] | None = None) -> list[Instance]:
        t = self._type(instance_type)
        now = self._clock.now()
        if any(a <= now < b for a, b in self._outages):
            self.fault_counts["capacity_errors"] += 1
            raise CapacityError(f"simulated: no capacity for {instance_type} now (outage)")
        if self._capacity_failure_prob and self._rng.random() < self._capacity_failure_prob:
            self.fault_counts["capacity_errors"] += 1
            raise CapacityError(f"simulated: no capacity for {instance_type} now")
        places: list[tuple[str, int]] = [("", count)]
        if spot and self._replay is not None:
            places, left = [], count
            for zone in self._walk:
                free = self._replay.capacity(zone, now) - len(self._held(zone, now))
                if free > 0 and left > 0:
                    places.append((zone, min(free, left)))
                    left -= places[-1][1]
            if not places:
                self.fault_counts["capacity_errors"] += 1
                raise CapacityError(f"simulated: no spot capacity for {instance_type} in "
                                    f"{', '.join(self._walk)} now")
        out = []
        for zone, n in places:
            for _ in range(n):
                out.append(self._start(t, spot, zone, now, tags))
        return out

    def _start(self, t: SimInstanceType, spot: bool, zone: str, now: float,
               tags: Mapping[str, str] | None) -> Instance:
        iid = f"sim-{next(self._ids)}"
        price = self.spot_price_in(zone, t.name) if spot and zone else \
            self.price_per_hour(t.name, spot)
        inst = Instance(instance_id=iid, provider=self.name, instance_type=t.name, spot=spot,
                        slots=t.slots, price_per_hour=price,
                        state=InstanceState.RUNNING, launched_at=now, queue=iid,
                        tags=dict(tags or {}), zone=zone)
        self._instances[iid] = inst
        self._ready_at[iid] = now + max(0.0, self._boot_s(self._rng))
        if self._never_register_prob and (
                self._fault_rng.random() < self._never_register_prob):
            self._ready_at[iid] = math.inf
            self.fault_counts["never_registered"] += 1
        else:
            heapq.heappush(self._changes, (self._ready_at[iid], iid))
        ends = []
        if spot and self._preempt_rate > 0 and self._replay is None:
            ends.append((now + self._rng.expovariate(self._preempt_rate), _End.PREEMPTED))
        if spot:
            ends += [(at, _End.STORM) for at, fraction in self._storms
                     if at > now and self._fault_rng.random() < fraction]
        if self._failure_rate > 0:
            ends.append((now + self._fault_rng.expovariate(self._failure_rate), _End.FAILED))
        if ends:
            self._other_end[iid] = min(ends)
            self._end_at[iid] = min(ends)
            heapq.heappush(self._changes, (self._end_at[iid][0], iid))
        if spot and zone:
            self._rank(zone, now)
        return inst

    def _held(self, zone: str, now: float) -> list[str]:
        """The live spot VMs in ``zone``, oldest first."""
        return [iid for iid in list(self._instances)
                if self._instances[iid].zone == zone and self._instances[iid].spot
                and self._refresh(iid, now).state != InstanceState.TERMINATED]

    def _rank(self, zone: str, now: float) -> None:
        """Each live spot VM in ``zone`` ends when the zone's capacity first falls below its
        rank (oldest first: the youngest go first)."""
        assert self._replay is not None
        for rank, iid in enumerate(self._held(zone, now), 1):
            at = self._replay.first_below(zone, now, rank)
            ends = [(at, _End.PREEMPTED)] if math.isfinite(at) else []
            if iid in self._other_end:
                ends.append(self._other_end[iid])
            end = min(ends) if ends else None
            if end is None:
                self._end_at.pop(iid, None)
            elif self._end_at.get(iid) != end:
                self._end_at[iid] = end
                heapq.heappush(self._changes, (end[0], iid))

    def terminate(self, instance_ids: Sequence[str]) -> list[Instance]:
        now = self._clock.now()
        done = []
        for iid in instance_ids:
            inst = self._refresh(iid, now)
            if inst.state != InstanceState.TERMINATED:
                inst = inst.model_copy(update={"state": InstanceState.TERMINATED,
                                               "terminated_at": now})
                self._instances[iid] = inst
                if inst.spot and inst.zone and self._replay is not None:
                    self._rank(inst.zone, now)   # the younger ones move up
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
        end = self._end_at.get(instance_id)
        return end[0] if end is not None else None

    def interruption_notices(self, now: float, lead_s: float) -> set[str]:
        """Spot instances the cloud has warned (``lead_s`` before it takes them back)."""
        if lead_s <= 0:
            return set()
        return {iid for iid, (at, cause) in self._end_at.items()
                if cause != _End.FAILED and at - lead_s <= now < at
                and self._instances[iid].terminated_at is None}

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
        end = self._end_at.get(iid)
        if inst.state != InstanceState.TERMINATED and end is not None and end[0] <= now:
            at, cause = end
            inst = inst.model_copy(update={"state": InstanceState.TERMINATED,
                                           "terminated_at": at,
                                           "preempted": cause != _End.FAILED})
            self._instances[iid] = inst
            self.fault_counts[_FAULT_COUNT[cause]] += 1
        return inst
