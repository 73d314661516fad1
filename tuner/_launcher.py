"""The cluster's launcher: asks the provider for instances within the cost budget, inline or,
for a cloud whose launch waits on VMs, on a thread the loop polls; backs off and retries when
the cloud has no capacity or throttles; at the end waits for what is under way, so that what
it started can be terminated with the rest.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from budgets import Clock, Ledger, billed
from cloud import CapacityError, Node, Provider, QuotaError, ThrottledError
from tuner._run_spec import RunSpec, Settings
from worker.records import Instance

log = logging.getLogger("tuner._controller")


@dataclass
class _Launching:
    """A launch running on the launcher thread (a provider whose launch waits on the cloud);
    the ledger counts its instances from ``asked_at`` until it returns."""

    future: Future[list[Instance]]
    count: int
    spot: bool
    asked_at: float


class Launcher:
    """``market(now)``: whether an instance launched now is spot; ``launched(instances)``:
    take up what a launch started (the cluster's)."""

    def __init__(self, spec: RunSpec, settings: Settings, *, provider: Provider,
                 ledger: Ledger, clock: Clock, market: Callable[[float], bool],
                 launched: Callable[[list[Instance]], None]) -> None:
        self.spec = spec
        self.settings = settings
        self.provider = provider
        self.ledger = ledger
        self.clock = clock
        self._market = market
        self._take_up = launched
        self._launching: dict[str, _Launching] = {}   # by ledger key
        self._launches = 0
        self._pool: ThreadPoolExecutor | None = None
        self._backlog = 0
        self._retry_at = math.inf
        self._backoff_s = 10.0
        # When a spot launch last found no capacity anywhere (the spot policy's "no spot").
        self.spot_refused_at = -math.inf
        self._refused_spot = False    # the market of the last launch that failed ...
        self._refused_until = -math.inf   # ... and the end of its back-off

    def in_flight(self) -> int:
        """Instances asked for whose launch has not returned yet."""
        return sum(launch.count for launch in self._launching.values())

    def busy(self) -> bool:
        """Whether a launch is under way (or the launcher thread is up)."""
        return bool(self._launching) or self._pool is not None

    def coming(self, on_demand_now: bool) -> list[Node]:
        """The instances under way, as booting nodes for the autoscaler (without the spot ones
        once the market has turned to on-demand)."""
        return [Node(f"{key}/{n}", launch.asked_at, False, False)
                for key, launch in self._launching.items() for n in range(launch.count)
                if not (on_demand_now and launch.spot)]

    def retry(self, now: float) -> None:
        """Launch again what found no capacity, once its back-off is over."""
        if self._backlog and now >= self._retry_at:
            backlog, self._backlog = self._backlog, 0
            self.launch(backlog, required=False)

    def launch(self, count: int, required: bool = True) -> None:
        """Ask for ``count`` instances, as many as the cost budget covers (``required``: none
        fitting is an error)."""
        now = self.clock.now()
        spot = self._market(now)
        if not required and now < self._refused_until and spot == self._refused_spot:
            # That market had no capacity moments ago: wait out the back-off (retry asks
            # again) rather than ask the cloud at every tick.
            self._backlog = max(self._backlog, count)
            return
        price = self.provider.price_per_hour(self.spec.instance_type, spot)
        affordable = 0
        # What is committed counts every running instance until it could be stopped (the
        # reaction time), not until now: a launch that fills the budget to the brim with
        # billing minimums would leave the others' next seconds unpaid for.
        committed_now = self.ledger.committed(now + self.settings.reaction_s)
        for _ in range(count):
            extra = billed(price, 0.0, self.ledger.minimum_s) * (affordable + 1)
            if self.ledger.budget_usd is not None and (
                    committed_now + extra > self.ledger.budget_usd):
                break
            affordable += 1
        if affordable == 0:
            if required:
                raise RuntimeError("the cost budget does not cover one worker's billing minimum")
            return
        tags = {"experiment": self.spec.experiment_id}
        if self.provider.blocking_launch:
            # Booting VMs takes the cloud minutes: the loop goes on dispatching and watching
            # the budget, which counts these instances from now (the cloud may bill them
            # before the call returns); fold takes up what it started.
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=4,
                                                thread_name_prefix="elastune-launch")
            self._launches += 1
            key = f"launch-{self._launches}"
            self.ledger.expect(key, price, affordable, now)
            future = self._pool.submit(self.provider.launch, affordable,
                                       self.spec.instance_type, spot, tags=tags)
            self._launching[key] = _Launching(future, affordable, spot, now)
            return
        try:
            launched = self.provider.launch(affordable, self.spec.instance_type, spot,
                                            tags=tags)
        except (CapacityError, QuotaError, ThrottledError) as exc:
            self._launch_failed(affordable, now, spot, isinstance(exc, CapacityError))
            return
        self._launched(launched)

    def _launch_failed(self, count: int, now: float, spot: bool, capacity: bool) -> None:
        # No capacity or quota now (the provider has tried its other types and zones), or
        # the cloud throttles us: try again later, backing off, while the deadline allows.
        if spot and capacity:
            self.spot_refused_at = now
        self._refused_spot = spot
        # What is still wanted, not the sum of every try: the scaling policy asks again for
        # what it lacks, and a backlog summed over its tries would launch them all at once.
        self._backlog = max(self._backlog, count)
        self._retry_at = self._refused_until = now + self._backoff_s
        self._backoff_s = min(self._backoff_s * 2, 300.0)

    def _launched(self, launched: list[Instance]) -> None:
        self._backoff_s = 10.0
        self._take_up(launched)

    def fold(self, now: float) -> None:
        """Take up the launches that have returned: their instances boot from now on (and are
        billed from their launch); a launch without capacity is retried later, backing off;
        any other launch error ends the sweep, as an inline launch's would."""
        for key, launch in list(self._launching.items()):
            if not launch.future.done():
                continue
            del self._launching[key]
            self.ledger.settle(key)
            try:
                launched = launch.future.result()
            except (CapacityError, QuotaError, ThrottledError) as exc:
                self._launch_failed(launch.count, now, launch.spot,
                                    isinstance(exc, CapacityError))
                continue
            self._launched(launched)

    def end(self) -> None:
        """At shutdown: launches not started are cancelled; those under way are waited for,
        and what they started is taken up so that it is terminated with the rest."""
        for key, launch in list(self._launching.items()):
            if launch.future.cancel():
                del self._launching[key]
                self.ledger.settle(key)
        if self._launching:
            log.info("waiting for %d launch(es) under way, to terminate what they start",
                     len(self._launching))
        for key, launch in list(self._launching.items()):
            del self._launching[key]
            try:
                launched = launch.future.result()
            except Exception as exc:  # noqa: BLE001 - nothing started: nothing to end
                log.warning("a launch under way at shutdown failed: %s", exc)
                launched = []
            self.ledger.settle(key)
            self._launched(launched)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
