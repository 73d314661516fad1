"""Fallback across instance types, zones and markets, written once for every cloud.

A cloud gives one verb, ``try_launch(instance_type, zone, count, spot)``: start up to ``count``
instances of that type in that zone (``None``: the cloud picks) and return their records, or raise
the :mod:`cloud._provider` error that stopped it. :func:`launch_with_fallback` owns the rest:

* the order: the sweep's types in order, each in the zones the cloud offers for it, in order
  (a spot launch in the order a spot policy prefers, :func:`preferred_order`); spot first and
  then, where the cloud allows it, the same order on-demand;
* what an error means: :class:`CapacityError`, or :class:`NotFoundError` (the type is not
  offered there), moves on to the next zone; :class:`QuotaError` skips the rest of that type
  (a quota holds for every zone); anything else (credentials, throttling the cloud's own retries
  did not outlast, a bad request) gives up at once;
* partial launches: an attempt that starts anything ends its walk, even with fewer than asked
  (EC2 launches as many as it can); a launch made of several calls (one VM per call on GCP, run
  ``width`` at a time) returns what its calls started, and raises only when none started.

When every attempt failed, the error names each (type, zone) tried: a :class:`CapacityError` if
any attempt lacked capacity, else a :class:`QuotaError`, else a :class:`NotFoundError`, so the
controller retries later only what later may cure. Hand-written because the libraries that do
this (SkyPilot's failover, Ray's autoscaler) keep it inside their own provisioners.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from cloud._provider import CapacityError, NotFoundError, ProviderError, QuotaError
from worker.records import Instance

log = logging.getLogger(__name__)

#: ``try_launch(instance_type, zone, count, spot)``: one cloud's attempt at one place.
TryLaunch = Callable[[str, str | None, int, bool], list[Instance]]

_Key = tuple[bool, str, str | None]     # (spot, instance type, zone)
Z = TypeVar("Z", bound=str | None)


def preferred_order(zones: Sequence[Z], preferred: Sequence[str]) -> list[Z]:
    """The zones of ``zones`` that ``preferred`` names, in ``preferred``'s order; all of
    ``zones``, in their own order, when it names none of them (:class:`cloud.ZonedSpot`).

    >>> preferred_order(["a", "b", "c"], ["c", "x", "a"]), preferred_order(["a", "b"], ["x"])
    (['c', 'a'], ['a', 'b'])
    """
    known: list[Z] = [z for p in dict.fromkeys(preferred) for z in zones if z == p]
    return known if known else list(zones)


def fallback_types(instance_type: str, types: Sequence[str]) -> list[str]:
    """The asked type, then the sweep's types after it (all of them if it is not one)."""
    if instance_type in types:
        after = list(types[list(types).index(instance_type) + 1:])
    else:
        after = list(types)
    return list(dict.fromkeys([instance_type, *after]))


def launch_with_fallback(
    try_launch: TryLaunch,
    count: int,
    types: Sequence[str],
    zones: Callable[[str], Sequence[str | None]],
    spot: bool = False,
    *,
    per_call: int | None = None,
    width: int = 1,
    on_demand_fallback: bool = False,
    reason: Callable[[ProviderError], str] = str,
    cloud: str = "",
) -> list[Instance]:
    """Start up to ``count`` instances, falling back across ``types`` and their ``zones``.

    Args:
        try_launch: the cloud's attempt at one (type, zone, market).
        count: instances wanted.
        types: instance types in order of preference (see :func:`fallback_types`).
        zones: the zones to try for a type, in order (asked once per type and launch).
        spot: the market asked for.
        per_call: the most instances one ``try_launch`` is asked for (None: all of them).
        width: how many calls run at once (each walks the order on its own; what one learns,
            a zone without capacity or a type without quota, the others skip).
        on_demand_fallback: after every spot attempt failed, walk the order on-demand.
        reason: the short form of an error in the list of attempts (e.g. the cloud's code).
        cloud: names the cloud in the error (``"AWS"``).

    Example::

        >>> def try_launch(itype, zone, count, spot):
        ...     if zone == "a":
        ...         raise CapacityError("stockout")
        ...     return [Instance(instance_id="i-1", provider="demo", instance_type=itype,
        ...                      spot=spot, price_per_hour=1.0, launched_at=0.0,
        ...                      queue="i-1", zone=zone)]
        >>> [i.zone for i in launch_with_fallback(try_launch, 1, ["t1"], lambda t: ["a", "b"])]
        ['b']
    """
    if not types:
        raise ValueError("launch_with_fallback needs at least one instance type")
    if width < 1 or (per_call is not None and per_call < 1):
        raise ValueError(f"width ({width}) and per_call ({per_call}) must be >= 1")
    if count < 1:
        return []
    walk = _Walk(try_launch, list(types), zones, spot, on_demand_fallback, reason, cloud)
    step = per_call or count
    sizes = [min(step, count - start) for start in range(0, count, step)]
    out: list[Instance] = []
    errors: list[Exception] = []
    if len(sizes) == 1 or width == 1:
        outcomes = [_outcome(walk.call, n) for n in sizes]
    else:
        with ThreadPoolExecutor(max_workers=min(len(sizes), width),
                                thread_name_prefix="elastune-try-launch") as pool:
            outcomes = list(pool.map(lambda n: _outcome(walk.call, n), sizes))
    for got, error in outcomes:
        out += got
        if error is not None:
            errors.append(error)
    if errors and not out:
        raise errors[0]
    if errors:
        log.warning("launched %d of %d instances: %s", len(out), count, errors[0])
    return out


def _outcome(call: Callable[[int], list[Instance]],
             n: int) -> tuple[list[Instance], Exception | None]:
    try:
        return call(n), None
    except Exception as exc:  # noqa: BLE001 - what the other calls started must be returned
        return [], exc


class _Walk:
    """The attempts of one launch and what they learned, shared by its calls (which may run
    at once, hence the lock)."""

    def __init__(self, try_launch: TryLaunch, types: list[str],
                 zones: Callable[[str], Sequence[str | None]], spot: bool,
                 on_demand_fallback: bool, reason: Callable[[ProviderError], str],
                 cloud: str) -> None:
        self.try_launch = try_launch
        self.types = types
        self.zones_for = zones
        self.markets = [True, False] if spot and on_demand_fallback else [spot]
        self.reason = reason
        self.cloud = cloud
        self._lock = threading.Lock()
        self._zones: dict[str, list[str | None]] = {}
        self._blocked: set[_Key] = set()
        self._no_quota: set[tuple[bool, str]] = set()
        self._failures: dict[_Key, ProviderError] = {}

    def call(self, count: int) -> list[Instance]:
        """Walk the order until one attempt starts something; raise when none did."""
        for spot in self.markets:
            for itype in self.types:
                if (spot, itype) in self._no_quota:
                    continue
                for zone in self._zones_of(itype):
                    if (spot, itype, zone) in self._blocked:
                        continue
                    try:
                        got = self.try_launch(itype, zone, count, spot)
                    except (CapacityError, NotFoundError) as exc:
                        self._failed((spot, itype, zone), count, exc)
                        continue
                    except QuotaError as exc:
                        self._failed((spot, itype, zone), count, exc)
                        with self._lock:
                            self._no_quota.add((spot, itype))
                        break
                    if got:
                        return got
                    self._failed((spot, itype, zone), count,
                                 CapacityError("the cloud started none"))
        raise self._exhausted()

    def _zones_of(self, itype: str) -> list[str | None]:
        with self._lock:
            if itype not in self._zones:
                self._zones[itype] = list(self.zones_for(itype))
            return self._zones[itype]

    def _failed(self, key: _Key, count: int, exc: ProviderError) -> None:
        spot, itype, zone = key
        log.info("launch %s%s x%d in %s: %s", "spot " if spot else "", itype, count,
                 zone or "any zone", exc)
        with self._lock:
            self._blocked.add(key)
            self._failures.setdefault(key, exc)

    def _exhausted(self) -> ProviderError:
        with self._lock:
            failures = dict(self._failures)
        market = ("spot or on-demand" if len(self.markets) > 1
                  else "spot" if self.markets[0] else "on-demand")
        what = f"no {market} {self.cloud + ' ' if self.cloud else ''}instance launched"
        tried = "; ".join(
            f"{'on-demand ' if len(self.markets) > 1 and not spot else ''}{itype} in "
            f"{zone or 'any zone'}: {self.reason(exc)}"
            for (spot, itype, zone), exc in failures.items())
        kinds = [type(e) for e in failures.values()]
        if any(issubclass(k, CapacityError) for k in kinds) or not failures:
            return CapacityError(f"{what}: no capacity (tried {tried or 'no zone'}); try "
                                 "later, other zones or other instance types")
        if any(issubclass(k, QuotaError) for k in kinds):
            return QuotaError(f"{what}: the account's quota allows no more (tried {tried}); "
                              "ask for a quota increase, or use other instance types")
        return NotFoundError(f"{what}: not offered or not found (tried {tried}); check the "
                             "instance types, zones and image")
