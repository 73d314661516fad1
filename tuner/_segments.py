"""The controller's segment book: what happens to a segment from its submission to its end.

It submits segments, folds the workers' events (reports, starts, ends) into the trial, the
scheduler, the sampler, the ledger, the timings and the store, gives up segments whose
instance is gone or whose lease lapsed (training resumes from the trial's last checkpoint),
and keeps each trial's state in the store as the scheduler sees it.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from budgets import Clock, Ledger
from tuner._cluster import Cluster
from tuner._executor import Executor
from tuner._failures import fail_fast_at, wrong_metric_message
from tuner._hooks import Hooks
from tuner._journaled import JournaledScheduler
from tuner._run_spec import RunSpec, Settings
from tuner._sampling import Sampler
from tuner._store import Store
from tuner._sweep_state import Running, SweepState, TrialRecord
from tuner._timings import Timings
from tuner.schedulers import Job, TrialStatus
from worker.records import (
    Event,
    Instance,
    Report,
    Segment,
    SegmentFinished,
    SegmentStarted,
    SegmentState,
    TrialState,
)

log = logging.getLogger("tuner._controller")

# The store's word for what the scheduler says of a trial.
TRIAL_STATE: dict[TrialStatus, TrialState] = {
    TrialStatus.RUNNING: TrialState.RUNNING, TrialStatus.PAUSED: TrialState.PAUSED,
    TrialStatus.COMPLETED: TrialState.COMPLETED, TrialStatus.PRUNED: TrialState.PRUNED,
    TrialStatus.FAILED: TrialState.FAILED}


class Segments:
    """Its verdicts for the loop: ``wrong_metric`` (a report without the sweep's metric),
    ``fatal`` (why no trial can go on: storage full) and ``failed_early`` (a trial among the
    first few failed for good)."""

    def __init__(self, spec: RunSpec, settings: Settings, *, state: SweepState,
                 scheduler: JournaledScheduler, sampler: Sampler, cluster: Cluster,
                 timings: Timings, ledger: Ledger, store: Store, executor: Executor,
                 clock: Clock, hooks: Hooks | None = None) -> None:
        self.spec = spec
        self.settings = settings
        self.state = state
        self.scheduler = scheduler
        self.sampler = sampler
        self.cluster = cluster
        self.timings = timings
        self.ledger = ledger
        self.store = store
        self.executor = executor
        self.clock = clock
        self.hooks = hooks or Hooks()
        self.latencies: list[float] = []
        self.counter: dict[str, int] = {}   # segments per trial (ids are numbered)
        self.wrong_metric: str | None = None
        self.fatal: str | None = None
        self.failed_early = False

    # -- submission -------------------------------------------------------------------------
    def submit(self, trial: TrialRecord, job: Job, inst: Instance, slots: int,
               now: float) -> str:
        self.state.stage = max(self.state.stage, self._stage_now(job))
        n = self.counter.get(trial.trial_id, 0) + 1
        self.counter[trial.trial_id] = n
        segment = Segment(
            segment_id=f"{self.spec.experiment_id}/{trial.trial_id}/s{n}",
            experiment_id=self.spec.experiment_id, trial_id=trial.trial_id,
            trainable=self.spec.trainable, params=trial.params, start_step=trial.step,
            stop_step=job.to_step,
            gpus=slots if slots > max(1, self.spec.gpus_per_trial) else self.spec.gpus_per_trial,
            checkpoint_dir=f"{str(self.spec.checkpoint_root).rstrip('/')}/{trial.trial_id}",
            timeout_s=self.spec.segment_timeout_s, submitted_at=now)
        self.state.running[segment.segment_id] = Running(segment, inst.instance_id, slots,
                                                         renewed_at=now)
        self.cluster.take(inst.instance_id, slots)
        self.store.add_segment(segment.segment_id, trial.trial_id, inst.instance_id,
                               segment.start_step, segment.stop_step, segment.gpus, now)
        self.set_trial_state(trial, TrialState.RUNNING, now)
        self.executor.submit(segment, inst)
        return segment.segment_id

    def _stage_now(self, job: Job) -> int:
        """The stage ``job`` starts; for a synchronous halving that promotes early, the stage
        being handed out (a job promoted early belongs to the stage after it, which begins
        when the scheduler decides this one). A new ASHA trial belongs to the first stage
        wherever it enters (``brackets``: it trains the first stage's steps on its way)."""
        if self.scheduler.early_promotion:
            return self.scheduler.stage
        if job.new and self.scheduler.admitting is not None:
            return 0
        return self.scheduler.stage_of(job.to_step)

    # -- events -----------------------------------------------------------------------------
    def handle(self, events: list[Event]) -> None:
        rows: list[tuple[Any, ...]] = []
        now = self.clock.now() if events else 0.0
        running, trials = self.state.running, self.state.trials
        for event in events:
            if isinstance(event, Report):
                run = running.get(event.segment_id)
                if run is None:
                    continue
                run.renewed_at = now
                value = event.metrics.get(self.spec.metric)
                if self.spec.metric not in event.metrics and self.wrong_metric is None:
                    self.wrong_metric = wrong_metric_message(
                        self.spec.metric, event.trial_id, list(event.metrics))
                    log.error("stopping the sweep: %s", self.wrong_metric)
                trial = trials[event.trial_id]
                if value is not None:
                    trial.last_report[event.step] = value
                if event.step == 1 and run.segment.start_step == 0 and run.first_step_at is None:
                    run.first_step_at = event.ts
                rows.append((event.trial_id, event.segment_id, event.step, value,
                             json.dumps(event.metrics), event.ts))
                self.hooks.result(trial, event.step, event.metrics)
            elif isinstance(event, SegmentStarted):
                run = running.get(event.segment_id)
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
                        trials[run.segment.trial_id].forget_after_checkpoint()
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

    def _finished(self, event: SegmentFinished) -> None:
        state = self.state
        run = state.running.pop(event.segment_id, None)
        if run is None:
            return
        state.starved = False  # a segment's end may make new work (promotions, retries)
        now = self.clock.now()
        self.cluster.give_back(run.instance_id, run.slots)
        self.ledger.release(run.instance_id, event.segment_id)
        seg = run.segment
        trial = state.trials[seg.trial_id]
        started = run.started_at if run.started_at is not None else event.ts
        duration = max(0.0, event.ts - started)
        widening = seg.segment_id in state.widening
        state.widening.discard(seg.segment_id)
        if event.last_step > seg.start_step and event.status == SegmentState.DONE:
            self.observe(trial.trial_id, seg.start_step, seg.stop_step, event.last_step,
                         seg.gpus, started, event.ts, run.first_step_at)
        inst = self.cluster.instances[run.instance_id]
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
            value = trial.value_at(event.last_step)
            if event.status in (SegmentState.DONE, SegmentState.ENDED, SegmentState.STOPPED) \
                    and event.last_step > trial.step:
                trial.step, trial.value = event.last_step, value
            if trial.trial_id in state.cut:
                # Pruned from its stage while it trained (see PlanFollowing.cut_stragglers):
                # what it trained is kept; the scheduler has already settled the stage.
                pass
            elif event.status == SegmentState.DONE:
                self.sampler.report(trial.trial_id, value, seg.stop_step)
                self.scheduler.on_rung(trial.trial_id, seg.stop_step, value)
                if self.scheduler.early_promotion:
                    # (the stage it decides now begins here: its jobs may all have gone early)
                    state.stage = max(state.stage, self.scheduler.stage)
            elif event.status == SegmentState.ENDED:
                self.scheduler.on_trial_end(trial.trial_id, trial.step, value, failed=False)
            elif event.status == SegmentState.STOPPED and seg.segment_id in state.evacuating:
                # Stopped ahead of a spot interruption, checkpoint taken: it continues elsewhere.
                state.evacuating.discard(seg.segment_id)
                self.store.update_segment(seg.segment_id, state=SegmentState.PREEMPTED)
                self.job_lost(trial.trial_id)
                self.set_trial_state(trial, TrialState.PAUSED, now)
                return
            elif event.status == SegmentState.STOPPED and widening:
                # Stopped to be re-run on more GPUs from this checkpoint: offered again at once.
                self.job_lost(trial.trial_id)
                self.set_trial_state(trial, TrialState.PAUSED, now)
                return
            elif event.status == SegmentState.STOPPED:
                self.set_trial_state(trial, TrialState.STOPPED, now)
                return
            elif event.status == SegmentState.FAILED and event.fatal:
                # Not the trial's fault, and every trial would fail the same way: stop cleanly.
                log.error("stopping the sweep: %s", event.error)
                self.fatal = event.error or "the checkpoint storage is full"
                self.job_lost(trial.trial_id)
                self.set_trial_state(trial, TrialState.PAUSED, now)
                return
            elif event.status == SegmentState.FAILED:
                trial.failures += 1
                if trial.failures <= self.spec.max_failures:
                    # Retried from the trial's last checkpoint: the retry's reports supersede
                    # this run's (a trial that fails for good keeps its last run's curve).
                    self.store.drop_reports(seg.segment_id)
                    trial.forget_after_checkpoint()
                    self.job_lost(trial.trial_id)
                else:
                    self.scheduler.on_trial_end(trial.trial_id, trial.step, value, failed=True)
                    self.store.update_trial(trial.trial_id, now, error=event.error)
                    self.failed_early |= trial.number <= fail_fast_at(
                        self.scheduler.total_trials)
            else:  # lost: infrastructure, not the trainable; offered again
                self.job_lost(trial.trial_id)
            self.sync_state(trial, now)

    def observe(self, trial_id: str, start_step: int, stop_step: int, last_step: int,
                gpus: int, started: float, finished: float, first_step_at: float | None,
                this_bracket: bool = True) -> None:
        """Count a segment that trained ``start_step`` to ``last_step`` (done) in the
        timings, at the rung it reached for ``this_bracket`` only."""
        rung = self.scheduler.rung_index(stop_step) if this_bracket else None
        self.timings.observe(trial_id, start_step, last_step, gpus, started, finished,
                             first_step_at, rung)

    # -- giving up --------------------------------------------------------------------------
    def give_up(self, seg_id: str, seg_state: SegmentState, now: float) -> None:
        """A running segment is lost to the infrastructure (``lost``, ``preempted``,
        ``stale``): the trial goes back to the scheduler, not counted as a failure, and
        training resumes from its last checkpoint, so what the segment reported after it is
        superseded by the re-run."""
        run = self.state.running.pop(seg_id)
        # Its job is offered again: work to hand out (a sweep left starved here would ask
        # for no instance to run it, and wait for nothing until its deadline).
        self.state.starved = False
        if run.started_at is not None:
            self.state.lost_work_s += max(0.0, now - run.started_at)
        self.executor.revoke([seg_id])
        self.state.evacuating.discard(seg_id)
        self.state.widening.discard(seg_id)
        self.store.drop_reports(seg_id)
        self.store.update_segment(seg_id, state=seg_state, finished_at=now)
        trial = self.state.trials[run.segment.trial_id]
        trial.forget_after_checkpoint()
        self.job_lost(trial.trial_id)
        self.set_trial_state(trial, TrialState.PAUSED, now)

    def check_leases(self, now: float) -> None:
        """Renew the lease of every segment whose worker beat since the last look; give up
        those whose lease lapsed, and replace the instances they ran on (a worker that
        stopped beating is dead or hung: its VM is paid for nothing)."""
        if not self.state.running or not math.isfinite(self.settings.heartbeat_timeout_s):
            return
        beats = self.executor.heartbeats()
        lapsed: dict[str, list[str]] = {}
        for seg_id, run in self.state.running.items():
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
                run = self.state.running[seg_id]
                self.cluster.used_slots[iid] -= run.slots
                self.ledger.release(iid, seg_id)
                self.give_up(seg_id, SegmentState.STALE, now)
            for seg_id in self.state.on(iid):
                self.give_up(seg_id, SegmentState.LOST, now)
        self.cluster.terminate(list(lapsed), now)
        self.cluster.launch(len(lapsed), required=False)

    # -- trial states -----------------------------------------------------------------------
    def job_lost(self, trial_id: str) -> None:
        if trial_id in self.state.cut:
            return  # pruned while it trained: nothing to offer again
        self.scheduler.on_job_lost(trial_id)

    def sync_state(self, trial: TrialRecord, now: float) -> None:
        state = TRIAL_STATE[self.scheduler.status(trial.trial_id)]
        if state != trial.state and state in (TrialState.COMPLETED, TrialState.PRUNED,
                                              TrialState.FAILED):
            self.sampler.tell(trial.trial_id, state, trial.value)
        self.set_trial_state(trial, state, now)

    def set_trial_state(self, trial: TrialRecord, state: TrialState, now: float) -> None:
        trial.state = state
        self.store.update_trial(trial.trial_id, now, state=state, last_step=trial.step,
                                value=trial.value, failures=trial.failures)
        self.hooks.trial_state(trial, state)
