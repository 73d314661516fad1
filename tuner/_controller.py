"""The experiment controller: one event loop over an injected clock, executor and provider.

Each tick it stops the sweep at the deadline or before the cost budget would be passed, fills
free worker slots with the scheduler's next jobs (as segments from each trial's last
checkpoint), and folds the executor's events into the scheduler, the sampler, the ledger and
the store. The same loop runs on the wall clock with Celery workers and, in simulation, on a
simulated clock, executor and provider.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from budgets import (
    Clock,
    FollowPlan,
    Ledger,
    Plan,
    Reallocation,
    ReplanView,
    ScaleView,
    ScalingPolicy,
    SpotPolicy,
    billed,
)
from cloud import CapacityError, Node, Provider, QuotaError, ThrottledError, reconcile
from records import (
    EndReason,
    Event,
    ExperimentState,
    Instance,
    InstanceState,
    Report,
    Segment,
    SegmentFinished,
    SegmentStarted,
    SegmentState,
    TrialState,
)
from tuner._deadline_policy import DeadlinePolicyMixin
from tuner._executor import Executor
from tuner._failures import (
    fail_fast_at,
    failures_message,
    nothing_but_failures,
    wrong_metric_message,
)
from tuner._plan_following import CALIBRATION_KEY, PlanningMixin
from tuner._sampling import Sampler
from tuner._store import Store
from tuner._timings import Timings
from tuner.schedulers import Job, Scheduler, TrialStatus

log = logging.getLogger(__name__)

# The store's word for what the scheduler says of a trial.
_TRIAL_STATE: dict[TrialStatus, TrialState] = {
    TrialStatus.RUNNING: TrialState.RUNNING, TrialStatus.PAUSED: TrialState.PAUSED,
    TrialStatus.COMPLETED: TrialState.COMPLETED, TrialStatus.PRUNED: TrialState.PRUNED,
    TrialStatus.FAILED: TrialState.FAILED}


@dataclass(frozen=True)
class RunSpec:
    """What the controller needs to know of the sweep (already validated)."""

    experiment_id: str
    trainable: str
    metric: str
    mode: str
    workers: int
    gpus_per_trial: int
    time_budget_s: float | None
    cost_budget_usd: float | None
    checkpoint_root: Path | str      # a folder, or a URI in object storage (s3://, gs://)
    max_failures: int = 0
    instance_type: str = "local"
    spot: bool = False
    # Buy each new instance on the market this policy picks (spot for the exploratory rungs,
    # on-demand for the survivors and when the deadline is at risk); None: ``spot`` for all.
    spot_policy: SpotPolicy | None = None
    # A resumed sweep: wall time its earlier runs used (the time budget is for all of them).
    elapsed_before_s: float = 0.0
    # A segment running longer than this fails (the trainable's fault: counts against
    # max_failures); None: no limit.
    segment_timeout_s: float | None = None


@dataclass(frozen=True)
class Settings:
    tick_s: float = 0.05             # longest wait for an event before re-checking budgets
    boot_timeout_s: float = 180.0    # a sweep fails if no worker registers in this time
    # A VM whose worker has not registered this long after launch is terminated and replaced
    # (a bad image, a failed install, a broker it cannot reach).
    register_timeout_s: float = math.inf
    stop_grace_s: float = 10.0       # after the deadline, how long stopped segments may take
    reaction_s: float = 15.0         # budget margin: time to stop segments and terminate VMs
    prior_s_per_step: float = 1.0    # step time assumed before any segment was measured
    spend_every_s: float = 1.0       # how often spend is written to the store
    instance_check_s: float = 1.0    # how often the provider is asked which instances live
    # The lease on a running segment: renewed whenever its worker's heartbeat count moves (or
    # an event of it arrives); one that lapses is given up as STALE, re-run from the trial's
    # last checkpoint under a new segment id, and its instance replaced.
    heartbeat_timeout_s: float = math.inf
    notice_check_s: float = 1.0      # how often spot interruption notices are read
    # ``elastune stop DIR`` creates this file; the sweep then stops as on Ctrl-C (segments
    # get their grace to checkpoint, instances are terminated, results are kept).
    stop_file: Path | None = None


@dataclass
class _Trial:
    trial_id: str
    number: int
    params: dict[str, Any]
    bracket: int
    step: int = 0                      # last step reached by a finished segment
    value: float | None = None         # metric at ``step``
    failures: int = 0
    state: TrialState = TrialState.RUNNING
    last_report: dict[int, float] = field(default_factory=dict)


@dataclass
class _Running:
    segment: Segment
    instance_id: str
    slots: int
    started_at: float | None = None
    first_step_at: float | None = None  # a fresh segment's first step reported (its ts)
    renewed_at: float = 0.0            # the lease: when the worker last showed life
    beat: int | None = None            # the heartbeat count seen then


@dataclass
class _Launching:
    """A launch running on the launcher thread (a provider whose launch waits on the cloud);
    the ledger counts its instances from ``asked_at`` until it returns."""

    future: Future[list[Instance]]
    count: int
    spot: bool
    asked_at: float


@dataclass
class Outcome:
    state: ExperimentState
    reason: EndReason
    started_at: float
    finished_at: float
    spend_usd: float
    best_trial_id: str | None
    best_value: float | None
    dispatch_latencies_s: list[float]
    message: str | None = None


class Controller(PlanningMixin, DeadlinePolicyMixin):
    def __init__(self, spec: RunSpec, *, scheduler: Scheduler, sampler: Sampler,
                 executor: Executor, provider: Provider, ledger: Ledger, store: Store,
                 clock: Clock, settings: Settings | None = None,
                 observer: Callable[[dict[str, Any]], None] | None = None,
                 scaling: ScalingPolicy | None = None,
                 replanner: Callable[[ReplanView], Plan | None] | None = None,
                 reallocation: Reallocation | None = None, more_brackets: bool = False) -> None:
        self.spec = spec
        self.scheduler = scheduler
        self.sampler = sampler
        self.executor = executor
        self.provider = provider
        self.ledger = ledger
        self.store = store
        self.clock = clock
        self.settings = settings or Settings()
        self.observer = observer
        self.scaling = scaling          # None: a fixed cluster of spec.workers
        # Re-plans the rest of the sweep at rung boundaries and on drift; its plans replace
        # the plan a FollowPlan policy follows (one is set if there is no policy).
        self.replanner = replanner
        # HyperSched's deadline policy (None: every trial runs on gpus_per_trial, and the
        # scheduler starts new trials until it has started them all): admission closes when a
        # new trial could no longer reach the top rung by the deadline; then the segments of
        # the trials still going get the free slots of their instance where that pays.
        self.reallocation = reallocation
        # A sweep whose number of trials the planner chose: when its bracket finishes with time
        # and budget left, the re-planner may start another (see PlanningMixin._next_bracket).
        self.more_brackets = more_brackets
        if getattr(scheduler, "early_promotion", False) and \
                getattr(replanner, "cost_budget_usd", None) is not None:
            raise ValueError("early_promotion with a re-planner that has a cost budget: it may "
                             "cut a stage under way, which a trial promoted early would not "
                             "allow")
        self._bracket_first = 0            # trials started before the bracket under way
        self._admission_closed = False
        self._admit_limit: int | None = None  # a re-plan's smaller number of trials
        self._widening: set[str] = set()          # segments stopped to re-run on more GPUs
        self._deadline = math.inf
        self.trials: dict[str, _Trial] = {}
        self.running: dict[str, _Running] = {}
        self.instances: dict[str, Instance] = {}
        self.ready: set[str] = set()
        self.used_slots: dict[str, int] = {}
        self.latencies: list[float] = []
        self._seg_counter: dict[str, int] = {}
        # What the sweep has measured of its trainable (step times, segment times, paces).
        self.timings = Timings(self.settings.prior_s_per_step, self._steps_weight,
                               None if reallocation is None else reallocation.speedup)
        self._work_fit: tuple[int, tuple[float, float] | None] = (-1, None)  # (segments, fit)
        self._cut: set[str] = set()        # trials pruned from a stage while they trained
        self._budget_blocked = False
        self._last_spend_write = -math.inf
        self._last_instance_check = -math.inf
        self._last_budget_check = -math.inf
        self._booting: set[str] = set()
        self._has_free: set[str] = set()   # ready instances with at least one free slot
        self._draining: set[str] = set()   # take no new work; terminated once idle
        self._starved = False              # the scheduler had no job for a free slot
        self._queued = False               # a job waited for a free slot
        self._stage = 0                    # highest rung index a segment was started for
        self._replanned = (0, 0)           # (stage, step times seen) at the last re-plan
        self._closing = -1                 # the last stage re-planned once all its jobs ran
        self._calibration_kept: str | None = None   # the re-planner's, as last stored
        self._overdue_checked = -math.inf  # when running segments were last compared
        self._last_scale = -math.inf
        self._launch_backlog = 0
        self._launching: dict[str, _Launching] = {}   # by ledger key
        self._launches = 0
        self._launcher: ThreadPoolExecutor | None = None
        self._retry_launch_at = math.inf
        self._launch_backoff_s = 10.0
        self._started_at = 0.0
        self._run_started = 0.0
        self._last_stop_check = -math.inf
        self._ever_ready = False
        self._last_notice_check = -math.inf
        self._cost_before: dict[str, float] = {}   # adopted instances: cost in earlier runs
        self._fatal: str | None = None     # why the sweep cannot go on (storage full)
        # A report without the sweep's metric: why the sweep stops as failed at once.
        self._wrong_metric: str | None = None
        self._failed_early = False         # a trial among the first few failed for good
        # Spot VMs the cloud warned it will take back: no new work; their segments were asked
        # to stop and checkpoint (``_evacuating``); a replacement was launched at the notice.
        self._noticed: set[str] = set()
        self._evacuating: set[str] = set()

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> Outcome:
        self._run_started = self.clock.now()
        self._started_at = start = self._run_started - self.spec.elapsed_before_s
        deadline = start + self.spec.time_budget_s if self.spec.time_budget_s else math.inf
        self._deadline = deadline
        state, reason, message = ExperimentState.FINISHED, EndReason.DONE, None
        self.store.update_experiment(started_at=start, state=ExperimentState.RUNNING)
        if isinstance(self.scaling, FollowPlan):
            self.store.add_plan(start, self.scaling.plan.to_json())
        try:
            if self.spec.workers or self.scaling is None:
                # (else the scaling policy launches); instances adopted on resume count
                adopted = sum(i.state != InstanceState.TERMINATED
                              for i in self.instances.values())
                if self.spec.workers - adopted > 0 or not adopted:
                    self._launch(max(0, self.spec.workers - adopted))
            while True:
                now = self.clock.now()
                if now >= deadline:
                    reason = EndReason.DEADLINE
                    break
                if now - self._last_budget_check >= self.settings.tick_s:
                    # The check is O(instances); once a tick is far inside the reaction time.
                    self._last_budget_check = now
                    if self.ledger.must_stop(now, self.settings.reaction_s):
                        reason = EndReason.BUDGET
                        break
                if self._stop_requested(now):
                    state, reason = ExperimentState.STOPPED, EndReason.REQUESTED
                    break
                if self._fatal is not None:
                    state, reason, message = ExperimentState.FAILED, EndReason.STORAGE, self._fatal
                    break
                if self._launching:
                    self._fold_launches(now)
                if self._wrong_metric is not None:
                    state, reason = ExperimentState.FAILED, EndReason.METRIC
                    message = self._wrong_metric
                    break
                if self._failed_early:
                    self._failed_early = False
                    why = self._all_failed(first=fail_fast_at(self.scheduler.total_trials))
                    if why is not None:
                        state, reason, message = ExperimentState.FAILED, EndReason.FAILURES, why
                        break
                self._check_boot(now)
                self._dispatch(now)
                if self.reallocation is not None and self._starved:
                    self._reallocate(now)
                if (self.scaling or self.replanner) and (
                        now - self._last_scale >= self.settings.tick_s):
                    # Right after dispatch, so the policy sees whether the scheduler had work.
                    self._last_scale = now
                    if self.replanner is not None:
                        self._replan(now)
                        self._cut_stragglers(now)
                    if self.scaling is not None:
                        self._autoscale(now)
                if self._nothing_running() and (self.scheduler.is_finished()
                                                or self._budget_blocked):
                    if not self._budget_blocked and self._next_bracket(now):
                        continue
                    reason = (EndReason.DONE if self.scheduler.is_finished()
                              else EndReason.BUDGET)
                    break
                wait = min(self.settings.tick_s, max(0.0, deadline - now))
                self._handle(self.executor.poll(wait))
                self._tick(self.clock.now())
            if state == ExperimentState.FINISHED:
                # Ended with nothing to show but errors: failed, not finished, and loudly.
                why = self._all_failed()
                if why is not None:
                    state, reason, message = ExperimentState.FAILED, EndReason.FAILURES, why
        except KeyboardInterrupt:
            state, reason = ExperimentState.STOPPED, EndReason.INTERRUPTED
        except Exception as exc:
            state, reason = ExperimentState.FAILED, EndReason.ERROR
            message = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            end = self._shutdown(state, reason, message)
        best = self.best()
        return Outcome(state, reason, start, end, self.ledger.spent(end),
                       best[0] if best else None, best[1] if best else None,
                       list(self.latencies), message)

    def _stop_requested(self, now: float) -> bool:
        if self.settings.stop_file is None or now - self._last_stop_check < 0.5:
            return False
        self._last_stop_check = now
        return self.settings.stop_file.exists()

    def _launch(self, count: int, required: bool = True) -> None:
        now = self.clock.now()
        spot = self._spot_now(now)
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
            # before the call returns); _fold_launches takes up what it started.
            if self._launcher is None:
                self._launcher = ThreadPoolExecutor(max_workers=4,
                                                    thread_name_prefix="elastune-launch")
            self._launches += 1
            key = f"launch-{self._launches}"
            self.ledger.expect(key, price, affordable, now)
            future = self._launcher.submit(self.provider.launch, affordable,
                                           self.spec.instance_type, spot, tags=tags)
            self._launching[key] = _Launching(future, affordable, spot, now)
            return
        try:
            launched = self.provider.launch(affordable, self.spec.instance_type, spot,
                                            tags=tags)
        except (CapacityError, QuotaError, ThrottledError):
            self._launch_failed(affordable, now)
            return
        self._launched(launched)

    def _launch_failed(self, count: int, now: float) -> None:
        # No capacity or quota now (the provider has tried its other types and zones), or
        # the cloud throttles us: try again later, backing off, while the deadline allows.
        self._launch_backlog += count
        self._retry_launch_at = now + self._launch_backoff_s
        self._launch_backoff_s = min(self._launch_backoff_s * 2, 300.0)

    def _launched(self, launched: list[Instance]) -> None:
        self._launch_backoff_s = 10.0
        for inst in launched:
            self.instances[inst.instance_id] = inst
            self.used_slots[inst.instance_id] = 0
            self._booting.add(inst.instance_id)
            self.ledger.open(inst.instance_id, inst.price_per_hour, inst.launched_at)
            self.store.upsert_instance(inst)

    def _fold_launches(self, now: float) -> None:
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
            except (CapacityError, QuotaError, ThrottledError):
                self._launch_failed(launch.count, now)
                continue
            self._launched(launched)

    def _in_flight(self) -> int:
        """Instances asked for whose launch has not returned yet."""
        return sum(launch.count for launch in self._launching.values())

    def _end_launches(self) -> None:
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
        if self._launcher is not None:
            self._launcher.shutdown(wait=True)
            self._launcher = None

    def _check_boot(self, now: float) -> None:
        stuck = []
        for iid in sorted(self._booting):
            inst = self.instances[iid]
            if inst.state == InstanceState.TERMINATED:
                self._booting.discard(iid)
            elif self.executor.ready(inst):
                self._booting.discard(iid)
                self._ever_ready = True
                self.ready.add(iid)
                self._has_free.add(iid)
            elif now - inst.launched_at > self.settings.register_timeout_s:
                stuck.append(iid)
        if stuck:
            # Never registered: pay for no more of it, and ask for a replacement.
            self._terminate(stuck, now)
            self._launch(len(stuck), required=False)
        # Only a sweep that never had a worker fails for it (a bad image, an unreachable
        # broker); one whose cluster is empty for a while (a preemption storm, no capacity)
        # keeps asking for VMs until its budgets end it.
        if not self._ever_ready and now - self._run_started > self.settings.boot_timeout_s:
            raise RuntimeError(
                f"no worker registered within {self.settings.boot_timeout_s:.0f} s; "
                "see the worker logs in the experiment directory")

    # -- resume -----------------------------------------------------------------------------
    def restore(self) -> int:
        """Take up the experiment in the store where it stopped (before :meth:`run`).

        Trials come back with their params, steps, values and failures; the scheduler's journal
        is replayed into the (fresh) scheduler; the sampler is told every trial's params and
        results; segments that were in flight are marked lost and their jobs offered again
        (training resumes from each trial's last checkpoint); the finished ones are counted in
        the step times the re-planner fits. Returns the number of trials.
        """
        from tuner._journal import replay

        now = self.clock.now()
        rows = self.store.query("SELECT * FROM trials ORDER BY number")
        for r in rows:
            trial = _Trial(r["trial_id"], r["number"], json.loads(r["params"]), r["bracket"],
                           step=r["last_step"], value=r["value"], failures=r["failures"],
                           state=TrialState(r["state"]))
            self.trials[trial.trial_id] = trial
        for r in self.store.query("SELECT trial_id, step, value FROM reports"):
            trial = self.trials.get(r["trial_id"])
            if trial is not None and r["value"] is not None and r["step"] <= trial.step:
                trial.last_report[r["step"]] = r["value"]
        in_flight = []
        for r in self.store.query("SELECT segment_id, trial_id, state FROM segments"):
            n = int(r["segment_id"].rsplit("/s", 1)[1])
            tid = r["trial_id"]
            self._seg_counter[tid] = max(self._seg_counter.get(tid, 0), n)
            if r["state"] in (SegmentState.SUBMITTED, SegmentState.RUNNING):
                in_flight.append(r["segment_id"])
                self.store.drop_reports(r["segment_id"])
                self.store.update_segment(r["segment_id"], state=SegmentState.LOST,
                                          finished_at=now)
        if in_flight:
            # A VM that outlived its controller may still run one: it stops, and a copy still
            # queued is not started.
            self.executor.request_stop(in_flight)
        self._adopt(now)
        journal = self.store.journal()
        replay(self.scheduler, journal)
        brackets = [i for i, e in enumerate(journal) if e["kind"] == "bracket"]
        if brackets:
            # Later brackets were started: what follows the last one is the bracket under way.
            self._bracket_first = sum(e["kind"] == "job" and bool(e["flag"])
                                      for e in journal[:brackets[-1]])
            begin = getattr(self.replanner, "begin_bracket", None)
            if callable(begin):
                for i in brackets:
                    begin(int(journal[i]["step"]))
        kept = self.store.meta(CALIBRATION_KEY)
        recalibrate = getattr(self.replanner, "recalibrate", None)
        if kept is not None and callable(recalibrate):
            # How late the earlier runs' stages ran against their plans, and the first plan
            # of each stage of the bracket under way.
            try:
                recalibrate(json.loads(kept))
                self._calibration_kept = kept
            except ValueError as exc:   # (json's errors are ValueErrors too)
                log.warning("the stored re-planner calibration is unreadable, so the "
                            "re-planner starts without it: %s", exc)
        current = journal[brackets[-1] + 1:] if brackets else journal
        self._admission_closed = any(e["kind"] == "close" for e in current)
        limits = [int(e["step"]) for e in current if e["kind"] == "limit"]
        if limits:
            # An earlier run's re-plan shrank the job: keep it, and its re-planner too.
            self._admit_limit = limits[-1]
            restrict = getattr(self.replanner, "restrict", None)
            if callable(restrict):
                restrict(limits[-1])
        journaled = {e["trial_id"] for e in journal if e["kind"] == "job"}
        for tid in [t for t in self.trials if t not in journaled]:
            # Sampled, but the controller died before its first job was journaled: it never
            # ran, and the scheduler has never heard of it.
            del self.trials[tid]
            self.store.forget_trial(tid)
        self._replay_segments()
        if self.replanner is not None and self.trials:
            # Re-planned at the first tick, from the stage under way with the time and budget
            # left (the plan it starts with is the sweep's plan from its start).
            self._stage = int(getattr(self.scheduler, "stage", 0))
            self._replanned = (-1, -1)
        for trial in self.trials.values():
            if self.scheduler.status(trial.trial_id) is TrialStatus.RUNNING:
                # In flight, or stopped at the end of the last run: offered again.
                self._job_lost(trial.trial_id)
        self.sampler.restore([(t.trial_id, t.params, self._restored_state(t), t.value,
                               dict(t.last_report)) for t in self.trials.values()])
        for trial in self.trials.values():
            self._set_trial_state(trial, self._restored_state(trial), now)
        return len(self.trials)

    def _replay_segments(self) -> None:
        """Count the segments the earlier runs finished in the step times, in the order they
        ended, as if this controller had seen them end: its first re-plan fits what the
        sweep has measured, not the profile's prior alone."""
        first_steps: dict[str, float] = {}
        for r in self.store.query("SELECT segment_id, ts FROM reports WHERE step = 1 "
                                  "ORDER BY rowid"):
            first_steps.setdefault(r["segment_id"], float(r["ts"]))
        for r in self.store.query(
                "SELECT segment_id, trial_id, start_step, stop_step, last_step, gpus, "
                "started_at, finished_at FROM segments WHERE state = ? AND "
                "last_step > start_step AND finished_at IS NOT NULL "
                "ORDER BY finished_at, rowid", (SegmentState.DONE,)):
            trial = self.trials.get(r["trial_id"])
            if trial is None:
                continue
            finished = float(r["finished_at"])
            started = finished if r["started_at"] is None else float(r["started_at"])
            self._observe_segment(r["trial_id"], int(r["start_step"]), int(r["stop_step"]),
                                  int(r["last_step"]), int(r["gpus"] or 1), started, finished,
                                  first_steps.get(r["segment_id"]),
                                  this_bracket=trial.number > self._bracket_first)

    def _adopt(self, now: float) -> None:
        """Take over the instances the earlier run left running (found by the experiment's
        tag): no second launch, and their cost counted once (the earlier run's share is in
        the ledger's prior spend up to its last spend record)."""
        last = self.store.query("SELECT ts FROM spend ORDER BY rowid DESC LIMIT 1")
        counted_until = float(last[0]["ts"]) if last else now
        before = {r["instance_id"]: float(r["cost_usd"] or 0.0)
                  for r in self.store.instances()}
        ended: dict[str, float | None] = {}
        for inst in self.provider.list(self.spec.experiment_id):
            iid = inst.instance_id
            if inst.state == InstanceState.TERMINATED:
                ended[iid] = inst.terminated_at
            if inst.state == InstanceState.TERMINATED or iid in self.instances:
                continue
            self.instances[iid] = inst
            self.used_slots[iid] = 0
            self._booting.add(iid)          # ready once its worker is seen in the registry
            self.ledger.adopt(iid, inst.price_per_hour, inst.launched_at, counted_until)
            self._cost_before[iid] = before.get(iid, 0.0)
            self.store.upsert_instance(inst, self._instance_cost(iid, now))
            log.info("adopted %s from the earlier run", iid)
        for r in self.store.instances():
            if r["state"] != InstanceState.TERMINATED and r["instance_id"] not in self.instances:
                # Gone while no controller watched it (a local worker follows its parent; a
                # VM was preempted or deleted): it billed up to the last spend record at most.
                gone = ended.get(r["instance_id"])
                self.store.close_instance(r["instance_id"], gone if gone is not None else
                                          max(float(r["launched_at"]), counted_until))

    def _restored_state(self, trial: _Trial) -> TrialState:
        return _TRIAL_STATE[self.scheduler.status(trial.trial_id)]

    # -- dispatch ---------------------------------------------------------------------------
    def _free_instance(self, slots_needed: int, spot_ok: bool = True) -> Instance | None:
        best, best_free = None, -1
        for iid in self._has_free:
            if iid in self._draining or iid in self._noticed:
                continue
            inst = self.instances[iid]
            if inst.spot and not spot_ok:
                continue
            free = inst.slots - self.used_slots[iid]
            # Ties go to the smallest id: the same choice whatever order the set iterates in
            # (string hashes differ between processes), so a seeded simulation repeats.
            if free >= slots_needed and (free > best_free or (
                    free == best_free and best is not None and iid < best.instance_id)):
                best, best_free = inst, free
        return best

    def _seconds_per_step(self) -> float:
        return self.timings.seconds_per_step()

    def _dispatch(self, now: float) -> None:
        slots_needed = max(1, self.spec.gpus_per_trial)
        # A spot policy that has turned to on-demand gives its spot instances no more work.
        spot_ok = self.spec.spot_policy is None or self.scaling is None or self._spot_now(now)
        while not self._budget_blocked:
            inst = self._free_instance(slots_needed, spot_ok)
            if inst is None:
                self._queued = not self._starved
                return
            if self.reallocation is not None and not self._admission_closed:
                self._check_admission(now)
            if (self._admit_limit is not None and not self._admission_closed
                    and len(self.trials) - self._bracket_first >= self._admit_limit):
                self._close_admission(f"the plan is down to {self._admit_limit} trials")
            number = len(self.trials) + 1
            job = self.scheduler.next_job(f"t{number:04d}")
            if job is None:
                self._starved, self._queued = True, False
                return
            self._starved = False
            trial = self._trial_for(job, now)
            self.store.journal_add("job", job.trial_id, job.to_step, bracket=job.bracket,
                                   flag=job.new)
            steps = job.to_step - trial.step
            expected_end = now + steps * self._seconds_per_step() * 1.5
            if not self.ledger.can_commit(inst.instance_id, expected_end, now):
                if self.running:
                    # Hand the job back: it is offered again once running work has ended
                    # (and step times are better known).
                    self._job_lost(trial.trial_id)
                    self._set_trial_state(trial, TrialState.PAUSED, now)
                else:
                    # Nothing left to wait for: the sweep winds down with what it has.
                    self._budget_blocked = True
                    self._set_trial_state(trial, TrialState.STOPPED, now)
                return
            slots = self._width(trial, job, inst, slots_needed)
            segment_id = self._submit(trial, job, inst, slots, now)
            self.ledger.reserve(inst.instance_id, expected_end, segment_id)

    def _trial_for(self, job: Job, now: float) -> _Trial:
        if not job.new:
            return self.trials[job.trial_id]
        params = self.sampler.ask(job.trial_id)
        trial = _Trial(job.trial_id, len(self.trials) + 1, params, job.bracket)
        self.trials[job.trial_id] = trial
        self.store.add_trial(trial.trial_id, trial.number, params, job.bracket, now)
        return trial

    def _close_admission(self, why: str) -> None:
        """No new trials from now on (journaled, so a resumed sweep keeps it closed)."""
        log.info("admission closed: %s", why)
        self._admission_closed = True
        self.store.journal_add("close", "*")
        self.scheduler.close_admission()

    def _exploring(self) -> bool:
        """New trials may still take free slots."""
        return not self._admission_closed and len(self.trials) < self.scheduler.total_trials

    def _submit(self, trial: _Trial, job: Job, inst: Instance, slots: int, now: float) -> str:
        self._stage = max(self._stage, self._stage_now(job.to_step))
        n = self._seg_counter.get(trial.trial_id, 0) + 1
        self._seg_counter[trial.trial_id] = n
        segment = Segment(
            segment_id=f"{self.spec.experiment_id}/{trial.trial_id}/s{n}",
            experiment_id=self.spec.experiment_id, trial_id=trial.trial_id,
            trainable=self.spec.trainable, params=trial.params, start_step=trial.step,
            stop_step=job.to_step,
            gpus=slots if slots > max(1, self.spec.gpus_per_trial) else self.spec.gpus_per_trial,
            checkpoint_dir=f"{str(self.spec.checkpoint_root).rstrip('/')}/{trial.trial_id}",
            timeout_s=self.spec.segment_timeout_s, submitted_at=now)
        self.running[segment.segment_id] = _Running(segment, inst.instance_id, slots,
                                                    renewed_at=now)
        self.used_slots[inst.instance_id] += slots
        if self.used_slots[inst.instance_id] >= inst.slots:
            self._has_free.discard(inst.instance_id)
        self.store.add_segment(segment.segment_id, trial.trial_id, inst.instance_id,
                               segment.start_step, segment.stop_step, segment.gpus, now)
        self._set_trial_state(trial, TrialState.RUNNING, now)
        self.executor.submit(segment, inst)
        return segment.segment_id

    # -- events -----------------------------------------------------------------------------
    def _handle(self, events: list[Event]) -> None:
        rows: list[tuple[Any, ...]] = []
        now = self.clock.now() if events else 0.0
        for event in events:
            if isinstance(event, Report):
                run = self.running.get(event.segment_id)
                if run is None:
                    continue
                run.renewed_at = now
                value = event.metrics.get(self.spec.metric)
                if self.spec.metric not in event.metrics and self._wrong_metric is None:
                    self._wrong_metric = wrong_metric_message(
                        self.spec.metric, event.trial_id, list(event.metrics))
                    log.error("stopping the sweep: %s", self._wrong_metric)
                trial = self.trials[event.trial_id]
                if value is not None:
                    trial.last_report[event.step] = value
                if event.step == 1 and run.segment.start_step == 0 and run.first_step_at is None:
                    run.first_step_at = event.ts
                rows.append((event.trial_id, event.segment_id, event.step, value,
                             json.dumps(event.metrics), event.ts))
            elif isinstance(event, SegmentStarted):
                run = self.running.get(event.segment_id)
                if run is not None:
                    run.renewed_at = now
                    if run.started_at is not None:
                        # Delivered again (its worker process died and the message went back,
                        # as acks_late wants): it re-runs from the trial's last checkpoint, so
                        # what the first run reported is superseded.
                        if rows:
                            self.store.add_reports(rows)
                            rows = []
                        self.store.drop_reports(event.segment_id)
                        trial = self.trials[run.segment.trial_id]
                        trial.last_report = {s: v for s, v in trial.last_report.items()
                                             if s <= trial.step}
                        self.store.update_segment(event.segment_id,
                                                  state=SegmentState.RUNNING,
                                                  started_at=event.ts)
                        run.started_at, run.first_step_at = event.ts, None
                        continue
                    run.started_at = event.ts
                    self.latencies.append(event.ts - run.segment.submitted_at)
                    self.store.update_segment(event.segment_id, state=SegmentState.RUNNING,
                                              started_at=event.ts)
            elif isinstance(event, SegmentFinished):
                # A segment's end is one commit: its last reports, its state, its usage, its
                # journal entry and its trial's state, all or none (a controller killed here
                # leaves the segment in flight, so a resume re-runs it once).
                with self.store.atomic():
                    if rows:
                        self.store.add_reports(rows)
                        rows = []
                    self._finished(event)
        if rows:
            self.store.add_reports(rows)

    def _stage_now(self, to_step: int) -> int:
        """The stage a job to ``to_step`` starts; for a synchronous halving that promotes early,
        the stage being handed out (a job promoted early belongs to the stage after it, which
        begins when the scheduler decides this one)."""
        if getattr(self.scheduler, "early_promotion", False):
            return int(self.scheduler.stage)
        return self.scheduler.stage_of(to_step)

    def _finished(self, event: SegmentFinished) -> None:
        run = self.running.pop(event.segment_id, None)
        if run is None:
            return
        self._starved = False  # a segment's end may make new work (promotions, retries)
        now = self.clock.now()
        self.used_slots[run.instance_id] -= run.slots
        if run.instance_id in self.ready:
            self._has_free.add(run.instance_id)
        self.ledger.release(run.instance_id, event.segment_id)
        seg = run.segment
        trial = self.trials[seg.trial_id]
        started = run.started_at if run.started_at is not None else event.ts
        duration = max(0.0, event.ts - started)
        widening = seg.segment_id in self._widening
        self._widening.discard(seg.segment_id)
        if event.last_step > seg.start_step and event.status == SegmentState.DONE:
            self._observe_segment(trial.trial_id, seg.start_step, seg.stop_step,
                                  event.last_step, seg.gpus, started, event.ts,
                                  run.first_step_at)
        inst = self.instances[run.instance_id]
        # One transaction: a controller killed here leaves the segment and its journal
        # entry (rung, end, lost) both written or neither, so a resume never re-runs a rung
        # whose steps are already stored.
        with self.store.atomic():
            self.store.add_trial_usage(
                trial.trial_id, duration * seg.gpus,
                duration * inst.price_per_hour / 3600.0 * run.slots / inst.slots)
            self.store.update_segment(seg.segment_id, state=event.status, finished_at=event.ts,
                                      last_step=event.last_step,
                                      checkpoint_step=event.checkpoint_step, error=event.error)
            value = self._value_at(trial, event.last_step)
            if event.status in (SegmentState.DONE, SegmentState.ENDED, SegmentState.STOPPED) \
                    and event.last_step > trial.step:
                trial.step, trial.value = event.last_step, value
            if trial.trial_id in self._cut:
                # Pruned from its stage while it trained (see _cut_stragglers): what it
                # trained is kept; the scheduler has already settled the stage without it.
                pass
            elif event.status == SegmentState.DONE:
                self.sampler.report(trial.trial_id, value, seg.stop_step)
                self.store.journal_add("rung", trial.trial_id, seg.stop_step, value)
                self.scheduler.on_rung(trial.trial_id, seg.stop_step, value)
                if getattr(self.scheduler, "early_promotion", False):
                    # (the stage it decides now begins here: its jobs may all have gone early)
                    self._stage = max(self._stage, int(self.scheduler.stage))
            elif event.status == SegmentState.ENDED:
                self.store.journal_add("end", trial.trial_id, trial.step, value)
                self.scheduler.on_trial_end(trial.trial_id, trial.step, value, failed=False)
            elif event.status == SegmentState.STOPPED and seg.segment_id in self._evacuating:
                # Stopped ahead of a spot interruption, checkpoint taken: it continues elsewhere.
                self._evacuating.discard(seg.segment_id)
                self.store.update_segment(seg.segment_id, state=SegmentState.PREEMPTED)
                self._job_lost(trial.trial_id)
                self._set_trial_state(trial, TrialState.PAUSED, now)
                return
            elif event.status == SegmentState.STOPPED and widening:
                # Stopped to be re-run on more GPUs from this checkpoint: offered again at once.
                self._job_lost(trial.trial_id)
                self._set_trial_state(trial, TrialState.PAUSED, now)
                return
            elif event.status == SegmentState.STOPPED:
                self._set_trial_state(trial, TrialState.STOPPED, now)
                return
            elif event.status == SegmentState.FAILED and event.fatal:
                # Not the trial's fault, and every trial would fail the same way: stop cleanly.
                log.error("stopping the sweep: %s", event.error)
                self._fatal = event.error or "the checkpoint storage is full"
                self._job_lost(trial.trial_id)
                self._set_trial_state(trial, TrialState.PAUSED, now)
                return
            elif event.status == SegmentState.FAILED:
                trial.failures += 1
                if trial.failures <= self.spec.max_failures:
                    # Retried from the trial's last checkpoint: the retry's reports supersede
                    # this run's (a trial that fails for good keeps its last run's curve).
                    self.store.drop_reports(seg.segment_id)
                    trial.last_report = {s: v for s, v in trial.last_report.items()
                                         if s <= trial.step}
                    self._job_lost(trial.trial_id)
                else:
                    self.store.journal_add("end", trial.trial_id, trial.step, value, flag=True)
                    self.scheduler.on_trial_end(trial.trial_id, trial.step, value, failed=True)
                    self.store.update_trial(trial.trial_id, now, error=event.error)
                    self._failed_early |= trial.number <= fail_fast_at(
                        self.scheduler.total_trials)
            else:  # lost: infrastructure, not the trainable; offered again
                self._job_lost(trial.trial_id)
            self._sync_state(trial, now)

    def _observe_segment(self, trial_id: str, start_step: int, stop_step: int, last_step: int,
                         gpus: int, started: float, finished: float,
                         first_step_at: float | None, this_bracket: bool = True) -> None:
        """Count a segment that trained ``start_step`` to ``last_step`` (done) in the
        timings, at the rung it reached for ``this_bracket`` only."""
        rungs = getattr(self.scheduler, "rungs", None)
        rung = rungs.index(stop_step) if this_bracket and rungs and stop_step in rungs else None
        self.timings.observe(trial_id, start_step, last_step, gpus, started, finished,
                             first_step_at, rung)

    def _job_lost(self, trial_id: str) -> None:
        if trial_id in self._cut:
            return  # pruned while it trained: nothing to offer again
        self.store.journal_add("lost", trial_id)
        self.scheduler.on_job_lost(trial_id)

    def _value_at(self, trial: _Trial, step: int) -> float | None:
        if step in trial.last_report:
            return trial.last_report[step]
        earlier = [s for s in trial.last_report if s <= step]
        return trial.last_report[max(earlier)] if earlier else trial.value

    def _sync_state(self, trial: _Trial, now: float) -> None:
        state = _TRIAL_STATE[self.scheduler.status(trial.trial_id)]
        if state != trial.state and state in (TrialState.COMPLETED, TrialState.PRUNED,
                                              TrialState.FAILED):
            self.sampler.tell(trial.trial_id, state, trial.value)
        self._set_trial_state(trial, state, now)

    def _set_trial_state(self, trial: _Trial, state: TrialState, now: float) -> None:
        trial.state = state
        self.store.update_trial(trial.trial_id, now, state=state, last_step=trial.step,
                                value=trial.value, failures=trial.failures)

    def _tick(self, now: float) -> None:
        if self._launch_backlog and now >= self._retry_launch_at:
            backlog, self._launch_backlog = self._launch_backlog, 0
            self._launch(backlog, required=False)
        if (self.spec.spot or self.spec.spot_policy is not None) \
                and now - self._last_notice_check >= self.settings.notice_check_s:
            self._last_notice_check = now
            self._check_notices(now)
        if now - self._last_instance_check >= self.settings.instance_check_s:
            self._last_instance_check = now
            self._check_instances(now)
            if self.running and math.isfinite(self.settings.heartbeat_timeout_s):
                self._check_leases(self.clock.now())
        if now - self._last_spend_write >= self.settings.spend_every_s:
            self._last_spend_write = now
            self.store.record_spend(now, self.ledger.spent(now), self.ledger.committed(now),
                                    len(self.ledger.running()))
            if self.observer is not None:
                self.observer(self.snapshot(now))

    def _autoscale(self, now: float) -> None:
        """Follow the scaling policy's target: launch, drain, terminate (never mid-segment)."""
        assert self.scaling is not None
        live = [i for i, inst in self.instances.items() if inst.state != InstanceState.TERMINATED]
        busy = {run.instance_id for run in self.running.values()}
        # Launches under way count as booting instances: the policy sees the cluster as it will
        # be, and reconcile asks for no instance twice.
        view = ScaleView(now=now, live=len(live) + self._in_flight(),
                         busy=len(busy & set(live)),
                         starved=self._starved, queued=self._queued, stage=self._stage,
                         elapsed_s=now - self._started_at, next_work_s=self._next_work_s(now),
                         cuts_stages=getattr(self.replanner, "cost_budget_usd", None) is not None)
        target = self.scaling.target(view)
        leaving: list[str] = []
        on_demand_now = self.spec.spot_policy is not None and not self._spot_now(now)
        if on_demand_now:
            # On-demand from now on: the spot instances finish what they run and go; the
            # target is met with on-demand ones.
            leaving = [i for i in live if self.instances[i].spot]
            live = [i for i in live if not self.instances[i].spot]
        nodes = [Node(i, self.instances[i].launched_at, i in self.ready, i in busy)
                 for i in live]
        coming = [Node(f"{key}/{n}", launch.asked_at, False, False)
                  for key, launch in self._launching.items() for n in range(launch.count)
                  if not (on_demand_now and launch.spot)]
        decision = reconcile(target, nodes + coming, now,
                             billing_minimum_s=self.ledger.minimum_s)
        drain = [*decision.drain, *(i for i in leaving if i in busy)]
        self._draining = set(drain)
        idle_drained = [i for i in drain if i not in busy]
        # (a launch under way cannot be cut short: a surplus it brings goes once it is up)
        gone = [*(i for i in decision.terminate if i in self.instances), *idle_drained,
                *(i for i in leaving if i not in busy)]
        if gone:
            self._terminate(gone, now)
        if decision.launch:
            self._launch(decision.launch, required=False)

    def _terminate(self, instance_ids: list[str], now: float) -> None:
        for inst in self.provider.terminate(instance_ids):
            iid = inst.instance_id
            self.instances[iid] = inst
            for group in (self.ready, self._has_free, self._booting, self._draining):
                group.discard(iid)
            end = inst.terminated_at if inst.terminated_at is not None else now
            self.ledger.close(iid, end)
            self.store.upsert_instance(inst, self._instance_cost(iid, end))

    def _check_instances(self, now: float) -> None:
        """A worker that died (or a VM that vanished) costs its segments, never the sweep."""
        lost = 0
        for inst in self.provider.list(self.spec.experiment_id):
            known = self.instances.get(inst.instance_id)
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
                self._handle(self.executor.poll(0.0))
            if inst.instance_id not in self._noticed:
                lost += 1                # (a noticed one was replaced at its notice)
            self.instances[inst.instance_id] = inst
            self.ready.discard(inst.instance_id)
            self._has_free.discard(inst.instance_id)
            self._booting.discard(inst.instance_id)
            end = inst.terminated_at if inst.terminated_at is not None else now
            self.ledger.close(inst.instance_id, end)
            self.store.upsert_instance(inst, self._instance_cost(inst.instance_id, end))
            for seg_id, run in list(self.running.items()):
                if run.instance_id == inst.instance_id:
                    # A preempted VM is the cloud's doing, not the trial's: neither counts
                    # against the trial's failure budget; the state says which it was.
                    self._give_up(seg_id, SegmentState.PREEMPTED if inst.preempted
                                  else SegmentState.LOST, now)
        if lost:
            self._launch(lost, required=False)

    def _instance_cost(self, instance_id: str, t: float) -> float:
        return self._cost_before.get(instance_id, 0.0) + self.ledger.instance_cost(instance_id, t)

    def _check_notices(self, now: float) -> None:
        """Act on spot interruption notices before the VM goes: stop giving it work, ask its
        segments to stop and checkpoint (each then resumes elsewhere from that checkpoint,
        as PREEMPTED), and launch its replacement now rather than after it is gone."""
        fresh = [iid for iid in self.executor.notices()
                 if iid not in self._noticed and iid in self.instances
                 and self.instances[iid].state != InstanceState.TERMINATED]
        if not fresh:
            return
        for iid in fresh:
            self._noticed.add(iid)
            self._has_free.discard(iid)
            segs = [seg_id for seg_id, run in self.running.items() if run.instance_id == iid]
            log.warning("interruption notice for %s: evacuating %d segment(s)", iid, len(segs))
            self._evacuating.update(segs)
            self.executor.request_stop(segs)
        self._launch(len(fresh), required=False)

    def _give_up(self, seg_id: str, state: SegmentState, now: float) -> None:
        """A running segment is lost to the infrastructure (``lost``, ``preempted``,
        ``stale``): the trial goes back to the scheduler, not counted as a failure, and
        training resumes from its last checkpoint, so what the segment reported after it is
        superseded by the re-run."""
        run = self.running.pop(seg_id)
        self._evacuating.discard(seg_id)
        self._widening.discard(seg_id)
        self.store.drop_reports(seg_id)
        self.store.update_segment(seg_id, state=state, finished_at=now)
        trial = self.trials[run.segment.trial_id]
        trial.last_report = {s: v for s, v in trial.last_report.items() if s <= trial.step}
        self._job_lost(trial.trial_id)
        self._set_trial_state(trial, TrialState.PAUSED, now)

    def _check_leases(self, now: float) -> None:
        """Renew the lease of every segment whose worker beat since the last look; give up
        those whose lease lapsed, and replace the instances they ran on (a worker that
        stopped beating is dead or hung: its VM is paid for nothing)."""
        beats = self.executor.heartbeats()
        lapsed: dict[str, list[str]] = {}
        for seg_id, run in self.running.items():
            beat = beats.get(seg_id)
            if beat is not None and beat != run.beat:
                run.beat, run.renewed_at = beat, now
            elif now - run.renewed_at > self.settings.heartbeat_timeout_s:
                lapsed.setdefault(run.instance_id, []).append(seg_id)
        if not lapsed:
            return
        # Late events of these segments are ignored from now on; a worker that comes back
        # finds them in the stop set and does not start them again.
        self.executor.request_stop([s for ids in lapsed.values() for s in ids])
        for iid, seg_ids in lapsed.items():
            log.warning("no heartbeat from %s for %.0f s: giving up %s and replacing it",
                        iid, self.settings.heartbeat_timeout_s, ", ".join(seg_ids))
            for seg_id in seg_ids:
                run = self.running[seg_id]
                self.used_slots[iid] -= run.slots
                self.ledger.release(iid, seg_id)
                self._give_up(seg_id, SegmentState.STALE, now)
            for seg_id, run in list(self.running.items()):
                if run.instance_id == iid:
                    self._give_up(seg_id, SegmentState.LOST, now)
        self._terminate(list(lapsed), now)
        self._launch(len(lapsed), required=False)

    def _nothing_running(self) -> bool:
        """No segment runs that the sweep still waits for (those of trials cut from their
        stage are being stopped, and nothing waits for them)."""
        return not self.running or (bool(self._cut) and all(
            run.segment.trial_id in self._cut for run in self.running.values()))

    # -- the end ----------------------------------------------------------------------------
    def _shutdown(self, state: ExperimentState, reason: EndReason,
                  message: str | None) -> float:
        self._widening.clear()   # every running segment stops now, and stays stopped
        if self.running:
            self.executor.request_stop(list(self.running))
            # Out of money, stopped segments get a part of the reaction time (the rest is for
            # terminating instances); at the deadline they get the grace to checkpoint.
            wait = (self.settings.reaction_s * 0.4 if reason == EndReason.BUDGET
                    else self.settings.stop_grace_s)
            give_up = self.clock.now() + wait
            while not self._nothing_running() and self.clock.now() < give_up:
                if reason != EndReason.BUDGET and self.ledger.must_stop(self.clock.now(),
                                                                self.settings.reaction_s * 0.6):
                    break  # the grace to checkpoint never outranks the cost budget
                self._handle(self.executor.poll(min(self.settings.tick_s * 4, 0.2)))
            now = self.clock.now()
            for seg_id, run in list(self.running.items()):
                self.running.pop(seg_id)
                self.store.update_segment(seg_id, state=SegmentState.LOST, finished_at=now)
                trial = self.trials[run.segment.trial_id]
                if trial.trial_id in self._cut:
                    self._sync_state(trial, now)   # pruned, whatever it was still training
                else:
                    self._set_trial_state(trial, TrialState.STOPPED, now)
        self._terminate_live()
        if self._launching or self._launcher is not None:
            # (after the rest is terminated: no instance bills while these are waited for)
            self._end_launches()
            self._terminate_live()
        end = self.clock.now()
        self.scheduler.finalize()
        for trial in self.trials.values():
            if trial.state in (TrialState.RUNNING, TrialState.PAUSED):
                self._sync_state(trial, end)
                if trial.state == TrialState.RUNNING:
                    self._set_trial_state(trial, TrialState.STOPPED, end)
            if trial.state == TrialState.STOPPED:
                self.sampler.tell(trial.trial_id, TrialState.PRUNED, trial.value)
        spent = self.ledger.spent(end)
        self.store.record_spend(end, spent, spent, 0)
        best = self.best()
        self.store.update_experiment(
            state=state, started_at=self._started_at, finished_at=end,
            wall_s=end - self._started_at, spend_usd=spent,
            best_trial_id=best[0] if best else None, best_value=best[1] if best else None,
            message=message or reason)
        if self.observer is not None:
            self.observer(self.snapshot(end))
        self.executor.close()
        return end

    def _terminate_live(self) -> None:
        live = [i for i, inst in self.instances.items() if inst.state != InstanceState.TERMINATED]
        if live:
            for inst in self.provider.terminate(live):
                self.instances[inst.instance_id] = inst
                end = inst.terminated_at if inst.terminated_at is not None else self.clock.now()
                self.ledger.close(inst.instance_id, end)
                self.store.upsert_instance(inst, self._instance_cost(inst.instance_id, end))
    def _all_failed(self, first: int | None = None) -> str | None:
        """Why the sweep failed when its trials failed and none produced a value (with
        ``first``: trials 1 to ``first`` all failed); None when it did not."""
        def valued(t: _Trial) -> bool:
            values = [t.value, *t.last_report.values()]
            return any(v is not None and math.isfinite(v) for v in values)

        failed = nothing_but_failures(
            ((t.number, t.state, valued(t)) for t in self.trials.values()), first)
        if failed is None:
            return None
        first_trial = next(t.trial_id for t in self.trials.values() if t.number == failed[0])
        row = self.store.trial(first_trial) or {}
        return failures_message(self.spec.metric, len(failed), len(self.trials),
                                self.spec.max_failures + 1, first, first_trial,
                                row.get("error"))

    # -- views ------------------------------------------------------------------------------
    def best(self) -> tuple[str, float] | None:
        sign = 1.0 if self.spec.mode == "max" else -1.0
        scored = [(t.trial_id, t.value) for t in self.trials.values()
                  if t.value is not None and math.isfinite(t.value)
                  and t.state != TrialState.FAILED]
        if not scored:
            return None
        return max(scored, key=lambda tv: (sign * tv[1], -int(tv[0][1:])))

    def snapshot(self, now: float) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for t in self.trials.values():
            counts[t.state] = counts.get(t.state, 0) + 1
        best = self.best()
        return {
            "elapsed_s": now - self._started_at, "time_budget_s": self.spec.time_budget_s,
            "spend_usd": self.ledger.spent(now), "cost_budget_usd": self.spec.cost_budget_usd,
            "trials": counts, "total": len(self.trials),
            "best_value": best[1] if best else None, "best_trial_id": best[0] if best else None,
            "workers": len(self.ready), "running_segments": len(self.running),
        }
