"""The controller's cluster: the instances a sweep runs on, from launch to termination.

It launches within the cost budget (inline, or on a launcher thread for a cloud whose launch
waits on VMs), backs off when the cloud has no capacity, takes up what a launch started,
marks instances ready once their worker registers, replaces those that never do, those that
die and those the cloud warned it will take back, terminates, and on resume adopts the
instances an earlier run left. It keeps each instance's slots; which segment runs where is
the loop's (:class:`tuner._sweep_state.SweepState`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from budgets import Clock, Ledger
from cloud import (
    TAKE_MARGIN_S,
    WARM_EXPERIMENT,
    Node,
    Provider,
    Retaggable,
    SharedPool,
    WarmPool,
    reconcile,
)
from tuner._beacon import controller_key
from tuner._errors import ConfigError
from tuner._executor import Executor
from tuner._launcher import Launcher
from tuner._run_spec import RunSpec, Settings
from tuner._store import Store
from tuner._sweep_state import SweepState
from worker.records import Instance, InstanceState, SegmentState

log = logging.getLogger("tuner._controller")


class Cluster:
    """``market(now)``: whether an instance launched now is spot; ``lost(segment_id, state,
    now)``: give up a segment whose instance is gone; ``drain_events()``: handle what the
    workers sent so far (before an instance is declared lost)."""

    def __init__(self, spec: RunSpec, settings: Settings, *, provider: Provider,
                 ledger: Ledger, store: Store, clock: Clock, executor: Executor,
                 state: SweepState, market: Callable[[float], bool],
                 lost: Callable[[str, SegmentState, float], None],
                 drain_events: Callable[[], None], warm: WarmPool | None = None) -> None:
        """``warm``: the VMs earlier sweeps kept warm, taken up before launching, and where
        this sweep's idle VMs go at its end (``provider.keep_warm``)."""
        self.spec = spec
        self.settings = settings
        self.provider = provider
        self.ledger = ledger
        self.store = store
        self.clock = clock
        self.executor = executor
        self.state = state
        self._lost = lost
        self._drain_events = drain_events
        self._market = market
        self.warm = warm if isinstance(provider, Retaggable) else None
        self.instances: dict[str, Instance] = {}
        self.ready: set[str] = set()
        self.used_slots: dict[str, int] = {}
        self.booting: set[str] = set()
        self.has_free: set[str] = set()   # ready instances with at least one free slot
        self.draining: set[str] = set()   # take no new work; terminated once idle
        # Spot VMs the cloud warned it will take back: no new work; their segments were asked
        # to stop and checkpoint; a replacement was launched at the notice.
        self.noticed: set[str] = set()
        self.ever_ready = False
        self.launcher = Launcher(spec, settings, provider=provider, ledger=ledger, clock=clock,
                                 market=market, launched=self._launched)
        self._cost_before: dict[str, float] = {}   # adopted instances: cost in earlier runs
        self._last_instance_check = -math.inf
        self._last_notice_check = -math.inf
        # A shared pool (checked once): its workers join by themselves, are billed from the
        # first work this sweep sends them, and each slot is claimed before work is sent.
        self.pool: SharedPool | None = provider if isinstance(provider, SharedPool) else None
        self._registered: set[str] = set()     # instances whose worker ever registered
        self._billed: set[str] = set()
        self._pending: dict[str, int] = {}     # slots claimed for the job being dispatched
        self._last_beat = -math.inf
        self._last_too_small = -math.inf
        self._waiting_reason: str | None = None   # (shown by `status` while it lasts)

    # -- views ------------------------------------------------------------------------------
    def live(self) -> list[str]:
        return [i for i, inst in self.instances.items() if inst.state != InstanceState.TERMINATED]

    def trial_slots(self) -> int:
        """How many trials the ready instances can run at once."""
        need = max(1, self.spec.gpus_per_trial)
        return sum(self.instances[i].slots // need for i in self.ready)

    @property
    def discovers(self) -> bool:
        """Whether instances join by themselves (a pool): nothing is launched."""
        return self.pool is not None

    def instance_cost(self, instance_id: str, t: float) -> float:
        if self.pool is not None and instance_id not in self._billed:
            return self._cost_before.get(instance_id, 0.0)   # (never given work)
        return self._cost_before.get(instance_id, 0.0) + self.ledger.instance_cost(instance_id, t)

    def free_instance(self, slots_needed: int, spot_ok: bool = True) -> Instance | None:
        """The instance with the most free slots (at least ``slots_needed``); on a shared
        pool, the first such whose slots this sweep could claim (:meth:`unclaim` gives them
        back if no work goes there)."""
        candidates = []
        for iid in self.has_free:
            if iid in self.draining or iid in self.noticed:
                continue
            inst = self.instances[iid]
            if inst.spot and not spot_ok:
                continue
            free = inst.slots - self.used_slots[iid]
            if free >= slots_needed:
                # Ties go to the smallest id: the same choice whatever order the set iterates
                # in (string hashes differ between processes), so a seeded simulation repeats.
                candidates.append((-free, iid))
        if self.pool is None:
            return self.instances[min(candidates)[1]] if candidates else None
        for _, iid in sorted(candidates):
            if self.pool.claim(iid, slots_needed):
                self._pending[iid] = self._pending.get(iid, 0) + slots_needed
                return self.instances[iid]
        return None

    def unclaim(self, instance_id: str) -> None:
        """No work went to the instance :meth:`free_instance` claimed for it."""
        held = self._pending.pop(instance_id, 0)
        if held and self.pool is not None:
            self.pool.unclaim(instance_id, held)

    def bill(self, instance_id: str, now: float) -> None:
        """A pool worker is billed from the first work this sweep sends it."""
        if self.pool is not None and instance_id not in self._billed:
            self._billed.add(instance_id)
            self.ledger.open(instance_id, self.instances[instance_id].price_per_hour, now)

    def take(self, instance_id: str, slots: int) -> None:
        extra = slots - self._pending.pop(instance_id, 0)
        if extra > 0 and self.pool is not None:
            self.pool.claim(instance_id, extra)   # (a wider segment: best effort)
        self.used_slots[instance_id] += slots
        if self.used_slots[instance_id] >= self.instances[instance_id].slots:
            self.has_free.discard(instance_id)

    def give_back(self, instance_id: str, slots: int) -> None:
        if self.pool is not None:
            self.pool.unclaim(instance_id, slots)
        self.used_slots[instance_id] -= slots
        if instance_id in self.ready:
            self.has_free.add(instance_id)

    # -- launching --------------------------------------------------------------------------
    def launch(self, count: int, required: bool = True) -> None:
        if self.warm is not None and count > 0 and self.warm.available():
            count -= self._take_warm(count)
        if count > 0:
            self.launcher.launch(count, required)

    def _take_warm(self, count: int) -> int:
        """Take up to ``count`` VMs an earlier sweep kept warm (as many as the cost budget
        covers): ready at once, billed from the deadline the earlier sweep paid up to."""
        assert self.warm is not None and isinstance(self.provider, Retaggable)
        now = self.clock.now()
        spot = self._market(now)
        price = self.provider.price_per_hour(self.spec.instance_type, spot)
        taken = 0
        while taken < count and self.ledger.can_launch(price, now):
            vms = self.warm.take(1, [self.spec.instance_type], spot,
                                 controller_key(self.spec.experiment_id), now)
            if not vms:
                break
            vm = vms[0]
            moved = self.provider.retag([vm.instance.instance_id], self.spec.experiment_id)
            if not moved:
                continue   # gone while warm (a spot VM taken back)
            inst = moved[0].model_copy(update={"tags": {
                **moved[0].tags, "warm_from": vm.left_by, "paid_until": f"{vm.until:.3f}"}})
            iid = inst.instance_id
            self.instances[iid] = inst
            self.used_slots[iid] = 0
            self.booting.add(iid)          # ready once its worker is seen in the registry
            self.ledger.adopt(iid, inst.price_per_hour, inst.launched_at, vm.until)
            self.store.upsert_instance(inst, self.instance_cost(iid, now))
            log.info("took up %s, kept warm by %s (paid until %.0f s from now)", iid,
                     vm.left_by, vm.until - now)
            taken += 1
        return taken

    def keep_warm(self, now: float) -> list[str]:
        """At the sweep's end, leave its idle ready VMs running for a later sweep instead of
        terminating them: each until ``now + keep_warm``, paid (and billed here) up to then,
        as many as the cost budget covers; a VM taken up from an earlier sweep whose paid-for
        time is not over goes back until that deadline, at no cost. They leave this sweep's
        books at their deadlines. Returns their ids."""
        if self.warm is None:
            return []
        assert isinstance(self.provider, Retaggable)
        budget = self.ledger.budget_usd
        spent = self.ledger.spent(now)
        kept: dict[str, float] = {}
        for iid in sorted(self.ready):
            inst = self.instances[iid]
            if inst.state == InstanceState.TERMINATED or self.used_slots[iid] \
                    or iid in self.noticed or iid in self.draining:
                continue
            until = float(inst.tags.get("paid_until", "-inf"))
            if self.warm.keep_s > 0:
                until = max(until, now + self.warm.keep_s)
            if until <= now + TAKE_MARGIN_S:
                continue     # (too little time left for a later sweep to take it up)
            extra = self.ledger.instance_cost(iid, until) - self.ledger.instance_cost(iid, now)
            if budget is not None and spent + extra > budget:
                continue
            spent += extra
            kept[iid] = until
        if not kept:
            return []
        moved = {inst.instance_id for inst in self.provider.retag(list(kept), WARM_EXPERIMENT)}
        for iid, until in kept.items():
            if iid not in moved:
                continue
            self.warm.offer(self.instances[iid], self.spec.experiment_id, until)
            self.ledger.close(iid, until)
            left = self.instances[iid].model_copy(update={
                "state": InstanceState.TERMINATED, "terminated_at": until,
                "tags": {**self.instances[iid].tags, "kept_warm_until": f"{until:.3f}"}})
            self.instances[iid] = left
            for group in (self.ready, self.has_free, self.booting):
                group.discard(iid)
            self.store.upsert_instance(left, self.instance_cost(iid, until))
            log.info("kept %s warm for %.0f s", iid, until - now)
        return [iid for iid in kept if iid in moved]

    def in_flight(self) -> int:
        return self.launcher.in_flight()

    def fold_launches(self, now: float) -> None:
        self.launcher.fold(now)

    def _launched(self, launched: list[Instance]) -> None:
        for inst in launched:
            self.instances[inst.instance_id] = inst
            self.used_slots[inst.instance_id] = 0
            self.booting.add(inst.instance_id)
            self.ledger.open(inst.instance_id, inst.price_per_hour, inst.launched_at)
            self.store.upsert_instance(inst)

    # -- watching ---------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Retry launches that found no capacity, act on interruption notices, and tell a
        shared pool the sweep is alive and whether it has work waiting (each at its own
        interval)."""
        if self.pool is not None and now - self._last_beat >= 1.0:
            self._last_beat = now
            self.pool.beat(wants=not self.state.starved and not self.state.budget_blocked)
        self.launcher.retry(now)
        if (self.spec.spot or self.spec.spot_policy is not None) \
                and now - self._last_notice_check >= self.settings.notice_check_s:
            self._last_notice_check = now
            self._check_notices(now)

    def instances_due(self, now: float) -> bool:
        """Whether it is time to ask the provider which instances live (and then does)."""
        if now - self._last_instance_check < self.settings.instance_check_s:
            return False
        self._last_instance_check = now
        self._check_instances(now)
        return True

    def check_boot(self, now: float) -> None:
        stuck = []
        for iid in sorted(self.booting):
            inst = self.instances[iid]
            if inst.state == InstanceState.TERMINATED:
                self.booting.discard(iid)
            elif self.executor.ready(inst):
                self.booting.discard(iid)
                self.ever_ready = True
                self._registered.add(iid)
                self.ready.add(iid)
                self.has_free.add(iid)
            elif now - inst.launched_at > self.settings.register_timeout_s:
                stuck.append(iid)
        if stuck:
            # Never registered: pay for no more of it, and ask for a replacement.
            self.terminate(stuck, now)
            self.launch(len(stuck), required=False)
        # Only a sweep that never had a worker fails for it (a bad image, an unreachable
        # broker); one whose cluster is empty for a while (a preemption storm, no capacity)
        # keeps asking for VMs until its budgets end it.
        if len(self._registered) < self.settings.min_workers and \
                now - self.state.run_started > self.settings.boot_timeout_s:
            got = (f"{len(self._registered)} of {self.settings.min_workers} workers"
                   if self.settings.min_workers > 1 else "no worker")
            raise RuntimeError(f"{got} registered within {self.settings.boot_timeout_s:.0f} s; "
                               f"{self.settings.boot_hint}")
        if self.pool is not None and self.ready:
            self._check_fit(now)

    def _check_fit(self, now: float) -> None:
        """A pool whose every worker is too small for a trial: the sweep waits with the
        reason in its status, and gives up as a config error (exit 2) once the pool has had
        ``boot_timeout_s`` (``wait_for_workers``) to show a worker large enough."""
        need = max(1, self.spec.gpus_per_trial)
        largest = max(self.instances[i].slots for i in self.ready)
        if largest >= need:
            if self._waiting_reason is not None:
                self._waiting_reason = None
                self.store.update_experiment(message=None)
            return
        why = (f"waiting for a pool worker with {need} GPUs (gpus_per_trial): the largest "
               f"that joined has {largest}; start one with --gpus or --slots {need}")
        if why != self._waiting_reason:
            self._waiting_reason = why
            self.store.update_experiment(message=why)
        if now - self._last_too_small >= 60.0:
            self._last_too_small = now
            log.warning("%s", why)
        if now - self.state.run_started > self.settings.boot_timeout_s:
            raise ConfigError("gpus_per_trial",
                              f"is {need}, but no worker of the pool has that many GPUs "
                              f"(the largest has {largest}) after waiting "
                              f"{self.settings.boot_timeout_s:.0f} s (wait_for_workers)")

    def _check_instances(self, now: float) -> None:
        """A worker that died (or a VM that vanished) costs its segments, never the sweep."""
        lost = 0
        for inst in self.provider.list(self.spec.experiment_id):
            known = self.instances.get(inst.instance_id)
            if known is None and self.pool is not None and \
                    inst.state != InstanceState.TERMINATED:
                self._joined(inst)
                continue
            if known is None or known.state == InstanceState.TERMINATED:
                continue
            if inst.state != InstanceState.TERMINATED:
                if inst.state != known.state:   # pending -> running
                    self.instances[inst.instance_id] = known.model_copy(
                        update={"state": inst.state})
                continue
            if lost == 0:
                # What its worker sent before it went (a timed-out segment's failure, say) is
                # read first, so the segment ends as the worker said, not as lost.
                self._drain_events()
            if inst.instance_id not in self.noticed:
                lost += 1                # (a noticed one was replaced at its notice)
            self.instances[inst.instance_id] = inst
            self.ready.discard(inst.instance_id)
            self.has_free.discard(inst.instance_id)
            self.booting.discard(inst.instance_id)
            end = inst.terminated_at if inst.terminated_at is not None else now
            self.ledger.close(inst.instance_id, end)
            self.store.upsert_instance(inst, self.instance_cost(inst.instance_id, end))
            for seg_id in self.state.on(inst.instance_id):
                # A preempted VM is the cloud's doing, not the trial's: neither counts
                # against the trial's failure budget; the state says which it was.
                self._lost(seg_id, SegmentState.PREEMPTED if inst.preempted
                           else SegmentState.LOST, now)
        if lost:
            self.launch(lost, required=False)

    def _joined(self, inst: Instance) -> None:
        """A worker joined the pool: it is in the cluster once it has registered."""
        iid = inst.instance_id
        self.instances[iid] = inst
        self.used_slots[iid] = 0
        self.booting.add(iid)
        self.store.upsert_instance(inst, self.instance_cost(iid, self.clock.now()))
        log.info("%s joined (%d slot(s) on %s)", iid, inst.slots, inst.zone or "?")

    def _check_notices(self, now: float) -> None:
        """Act on spot interruption notices before the VM goes: stop giving it work, ask its
        segments to stop and checkpoint (each then resumes elsewhere from that checkpoint,
        as PREEMPTED), and launch its replacement now rather than after it is gone."""
        fresh = [iid for iid in self.executor.notices()
                 if iid not in self.noticed and iid in self.instances
                 and self.instances[iid].state != InstanceState.TERMINATED]
        if not fresh:
            return
        for iid in fresh:
            self.noticed.add(iid)
            self.has_free.discard(iid)
            segs = self.state.on(iid)
            log.warning("interruption notice for %s: evacuating %d segment(s)", iid, len(segs))
            self.state.evacuating.update(segs)
            self.executor.request_stop(segs)
        self.launch(len(fresh), required=False)

    # -- resizing and ending ----------------------------------------------------------------
    def follow(self, target: int, now: float, on_demand_now: bool) -> None:
        """Make the cluster ``target`` instances: launch, drain, terminate (never
        mid-segment); ``on_demand_now``: spot instances finish what they run and go, and the
        target is met with on-demand ones."""
        live = self.live()
        busy = {run.instance_id for run in self.state.running.values()}
        leaving: list[str] = []
        if on_demand_now:
            leaving = [i for i in live if self.instances[i].spot]
            live = [i for i in live if not self.instances[i].spot]
        nodes = [Node(i, self.instances[i].launched_at, i in self.ready, i in busy)
                 for i in live]
        coming = self.launcher.coming(on_demand_now)
        decision = reconcile(target, nodes + coming, now,
                             billing_minimum_s=self.ledger.minimum_s)
        drain = [*decision.drain, *(i for i in leaving if i in busy)]
        self.draining = set(drain)
        idle_drained = [i for i in drain if i not in busy]
        # (a launch under way cannot be cut short: a surplus it brings goes once it is up)
        gone = [*(i for i in decision.terminate if i in self.instances), *idle_drained,
                *(i for i in leaving if i not in busy)]
        if gone:
            self.terminate(gone, now)
        if decision.launch:
            self.launch(decision.launch, required=False)

    def terminate(self, instance_ids: list[str], now: float) -> None:
        for inst in self.provider.terminate(instance_ids):
            iid = inst.instance_id
            self.instances[iid] = inst
            for group in (self.ready, self.has_free, self.booting, self.draining):
                group.discard(iid)
            end = inst.terminated_at if inst.terminated_at is not None else now
            self.ledger.close(iid, end)
            self.store.upsert_instance(inst, self.instance_cost(iid, end))

    def terminate_all(self) -> None:
        """Terminate every live instance, then wait for the launches under way and terminate
        what they started (no instance bills while those are waited for); a shared pool's
        workers are released."""
        self._terminate_live()
        if self.launcher.busy():
            self.launcher.end()
            self._terminate_live()
        if self.pool is not None:
            self.pool.close()

    def _terminate_live(self) -> None:
        live = self.live()
        if live:
            for inst in self.provider.terminate(live):
                self.instances[inst.instance_id] = inst
                end = inst.terminated_at if inst.terminated_at is not None else self.clock.now()
                self.ledger.close(inst.instance_id, end)
                self.store.upsert_instance(inst, self.instance_cost(inst.instance_id, end))

    def adopt(self, now: float) -> None:
        """Take over the instances the earlier run left running (found by the experiment's
        tag): no second launch, and their cost counted once (the earlier run's share is in
        the ledger's prior spend up to its last spend record). Those it left that are gone
        are marked terminated."""
        last = self.store.last_spend_ts()
        counted_until = last if last is not None else now
        stored = self.store.instances()
        before = {r["instance_id"]: float(r["cost_usd"] or 0.0) for r in stored}
        ended: dict[str, float | None] = {}
        for inst in self.provider.list(self.spec.experiment_id):
            iid = inst.instance_id
            if inst.state == InstanceState.TERMINATED:
                ended[iid] = inst.terminated_at
                continue
            if iid in self.instances:
                continue
            if self.pool is not None:
                # A pool's member: billed from the first work this run sends it, if any.
                self._cost_before[iid] = before.get(iid, 0.0)
                self._joined(inst)
                continue
            self.instances[iid] = inst
            self.used_slots[iid] = 0
            self.booting.add(iid)          # ready once its worker is seen in the registry
            self.ledger.adopt(iid, inst.price_per_hour, inst.launched_at, counted_until)
            self._cost_before[iid] = before.get(iid, 0.0)
            self.store.upsert_instance(inst, self.instance_cost(iid, now))
            log.info("adopted %s from the earlier run", iid)
        for r in stored:
            if r["state"] != InstanceState.TERMINATED and r["instance_id"] not in self.instances:
                # Gone while no controller watched it (a local worker follows its parent; a
                # VM was preempted or deleted): it billed up to the last spend record at most.
                gone = ended.get(r["instance_id"])
                self.store.close_instance(r["instance_id"], gone if gone is not None else
                                          max(float(r["launched_at"]), counted_until))
