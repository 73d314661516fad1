"""The experiment controller: one event loop over an injected clock, executor and provider.

Each tick it stops the sweep at the deadline or before the cost budget would be passed, fills
free worker slots with the scheduler's next jobs (as segments from each trial's last
checkpoint), and folds the executor's events into the scheduler, the sampler, the ledger and
the store. The same loop runs on the wall clock with Celery workers and, in simulation, on a
simulated clock, executor and provider.

The loop is this class; its parts are composed, each with one job: the cluster
(:mod:`tuner._cluster`), the segment book (:mod:`tuner._segments`), the timings
(:mod:`tuner._timings`), plan following (:mod:`tuner._plan_following`), the deadline policy
(:mod:`tuner._deadline_policy`) and restore (:mod:`tuner._restore`); they share one
:class:`tuner._sweep_state.SweepState`, and call the scheduler through
:class:`tuner._journaled.JournaledScheduler`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from budgets import (
    Clock,
    FollowPlan,
    Ledger,
    Plan,
    Reallocation,
    Replanning,
    ScaleView,
    ScalingPolicy,
)
from cloud import Provider, WarmPool
from tuner._cluster import Cluster
from tuner._deadline_policy import DeadlinePolicy
from tuner._executor import Executor
from tuner._failures import fail_fast_at, failures_message, nothing_but_failures
from tuner._hooks import Hooks, SweepSummary
from tuner._journaled import JournaledScheduler
from tuner._plan_following import PlanFollowing
from tuner._run_spec import Outcome, RunSpec, Settings
from tuner._sampling import Sampler
from tuner._segments import Segments
from tuner._store import Store
from tuner._sweep_state import SweepState, TrialRecord
from tuner._timings import Timings
from tuner.schedulers import Job, Scheduler
from worker.records import EndReason, ExperimentState, SegmentState, TrialState

__all__ = ["Controller", "Outcome", "RunSpec", "Settings"]

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, spec: RunSpec, *, scheduler: Scheduler, sampler: Sampler,
                 executor: Executor, provider: Provider, ledger: Ledger, store: Store,
                 clock: Clock, settings: Settings | None = None,
                 observer: Callable[[dict[str, Any]], None] | None = None,
                 scaling: ScalingPolicy | None = None, replanner: Replanning | None = None,
                 reallocation: Reallocation | None = None, more_brackets: bool = False,
                 fill_idle: bool = False, max_trials: int | None = None,
                 pool_plan: Callable[[int], Plan] | None = None,
                 warm: WarmPool | None = None,
                 hooks: Hooks | None = None) -> None:
        """``scaling``: None for a fixed cluster of ``spec.workers``; ``replanner`` re-plans
        the rest of the sweep at rung boundaries and on drift (its plans replace the plan a
        FollowPlan policy follows; one is set if there is no policy); ``reallocation``:
        HyperSched's deadline policy (None: every trial runs on ``gpus_per_trial`` and
        admission stays open); ``more_brackets``: a sweep whose number of trials the planner
        chose, which may start another bracket with time and budget left; ``fill_idle``: a
        sweep whose number of trials the planner chose, which under asynchronous halving on
        a fixed cluster admits more trials while a worker would idle and the budgets allow
        (:meth:`PlanFollowing.admit_idle`), no more than ``max_trials`` in all (a finite
        space's size; None: no limit); ``pool_plan``: on
        a shared pool, the fixed-cluster plan for a pool of that many trial slots (re-planned
        and stored whenever the pool's size changes); ``warm``: VMs kept warm between sweeps
        (taken up before launching; this sweep's idle ones kept at its end); ``hooks``: the
        sweep's experiment trackers (see :mod:`tuner._hooks`)."""
        self.spec = spec
        self.scheduler = scheduler
        self.sampler = sampler
        self.executor = executor
        self.provider = provider
        self.ledger = ledger
        self.store = store
        self.clock = clock
        self.settings = settings = settings or Settings()
        self.observer = observer
        self.hooks = hooks = hooks or Hooks()
        self.state = state = SweepState()
        self.journaled = journaled = JournaledScheduler(scheduler, store)
        if journaled.early_promotion and replanner is not None and \
                replanner.cost_budget_usd is not None:
            raise ValueError("early_promotion with a re-planner that has a cost budget: it may "
                             "cut a stage under way, which a trial promoted early would not "
                             "allow")
        self.cluster = cluster = Cluster(
            spec, settings, provider=provider, ledger=ledger, store=store, clock=clock,
            executor=executor, state=state, market=self._market,
            lost=lambda seg_id, seg_state, now: self.segments.give_up(seg_id, seg_state, now),
            drain_events=lambda: self.segments.handle(executor.poll(0.0)), warm=warm)
        self.plans = plans = PlanFollowing(
            spec, settings, state=state, scheduler=journaled, cluster=cluster, ledger=ledger,
            store=store, executor=executor, scaling=scaling, replanner=replanner,
            more_brackets=more_brackets, fill_idle=fill_idle, max_trials=max_trials)
        # What the sweep has measured of its trainable (step times, segment times, paces).
        self.timings = plans.timings = Timings(
            settings.prior_s_per_step, plans.steps_weight,
            None if reallocation is None else reallocation.speedup)
        self.segments = Segments(
            spec, settings, state=state, scheduler=journaled, sampler=sampler, cluster=cluster,
            timings=self.timings, ledger=ledger, store=store, executor=executor, clock=clock,
            hooks=hooks)
        self.deadline_policy = None if reallocation is None else DeadlinePolicy(
            reallocation, spec, state=state, scheduler=journaled, cluster=cluster,
            timings=self.timings, executor=executor, close_admission=self._close_admission)
        self._last_spend_write = -math.inf
        self._last_budget_check = -math.inf
        self._last_scale = -math.inf
        self._last_stop_check = -math.inf
        self._pool_plan = pool_plan
        self._pool_size = spec.workers   # (what the first plan was made for)

    # -- views of the parts -----------------------------------------------------------------
    @property
    def scaling(self) -> ScalingPolicy | None:
        return self.plans.scaling

    @scaling.setter
    def scaling(self, policy: ScalingPolicy | None) -> None:
        self.plans.scaling = policy

    @property
    def replanner(self) -> Replanning | None:
        return self.plans.replanner

    @property
    def trials(self) -> dict[str, TrialRecord]:
        return self.state.trials

    @property
    def latencies(self) -> list[float]:
        return self.segments.latencies

    def restore(self) -> int:
        """Take up the experiment in the store where it stopped (before :meth:`run`); see
        :func:`tuner._restore.restore`. Returns the number of trials."""
        from tuner._restore import restore

        return restore(self)

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> Outcome:
        state, cluster, segments = self.state, self.cluster, self.segments
        self.hooks.sweep_started()   # (the trackers log on a thread of their own)
        state.run_started = self.clock.now()
        state.started_at = start = state.run_started - self.spec.elapsed_before_s
        deadline = start + self.spec.time_budget_s if self.spec.time_budget_s else math.inf
        state.deadline = deadline
        outcome_state, reason, message = ExperimentState.FINISHED, EndReason.DONE, None
        self.store.update_experiment(started_at=start, state=ExperimentState.RUNNING,
                                     message=None)
        if isinstance(self.scaling, FollowPlan):
            self.store.add_plan(start, self.scaling.plan.to_json())
        try:
            if (self.spec.workers or self.scaling is None) and not cluster.discovers:
                # (else the scaling policy launches); instances adopted on resume count
                adopted = len(cluster.live())
                if self.spec.workers - adopted > 0 or not adopted:
                    cluster.launch(max(0, self.spec.workers - adopted))
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
                    outcome_state, reason = ExperimentState.STOPPED, EndReason.REQUESTED
                    break
                if segments.fatal is not None:
                    outcome_state, reason = ExperimentState.FAILED, EndReason.STORAGE
                    message = segments.fatal
                    break
                cluster.fold_launches(now)
                if segments.wrong_metric is not None:
                    outcome_state, reason = ExperimentState.FAILED, EndReason.METRIC
                    message = segments.wrong_metric
                    break
                if segments.failed_early:
                    segments.failed_early = False
                    why = self._all_failed(first=fail_fast_at(self.journaled.total_trials))
                    if why is not None:
                        outcome_state, reason, message = (ExperimentState.FAILED,
                                                          EndReason.FAILURES, why)
                        break
                cluster.check_boot(now)
                self._dispatch(now)
                if self.deadline_policy is not None and state.starved:
                    self.deadline_policy.reallocate(now)
                if (self.scaling or self.replanner) and (
                        now - self._last_scale >= self.settings.tick_s):
                    # Right after dispatch, so the policy sees whether the scheduler had work.
                    self._last_scale = now
                    if self.replanner is not None:
                        self.plans.replan(now)
                        self.plans.cut_stragglers(now)
                    if self.scaling is not None:
                        self._autoscale(now)
                if state.nothing_running() and (self.journaled.is_finished()
                                                or state.budget_blocked):
                    if not state.budget_blocked and self.plans.next_bracket(now):
                        continue
                    reason = (EndReason.DONE if self.journaled.is_finished()
                              else EndReason.BUDGET)
                    break
                wait = min(self.settings.tick_s, max(0.0, deadline - now))
                segments.handle(self.executor.poll(wait))
                self._tick(self.clock.now())
            if outcome_state == ExperimentState.FINISHED:
                # Ended with nothing to show but errors: failed, not finished, and loudly.
                why = self._all_failed()
                if why is not None:
                    outcome_state, reason, message = (ExperimentState.FAILED,
                                                      EndReason.FAILURES, why)
        except KeyboardInterrupt:
            outcome_state, reason = ExperimentState.STOPPED, EndReason.INTERRUPTED
        except Exception as exc:
            outcome_state, reason = ExperimentState.FAILED, EndReason.ERROR
            message = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            end = self._shutdown(outcome_state, reason, message)
        best = self.best()
        return Outcome(outcome_state, reason, start, end, self.ledger.spent(end),
                       best[0] if best else None, best[1] if best else None,
                       list(self.latencies), message)

    def _stop_requested(self, now: float) -> bool:
        if self.settings.stop_file is None or now - self._last_stop_check < 0.5:
            return False
        self._last_stop_check = now
        return self.settings.stop_file.exists()

    def _market(self, now: float) -> bool:
        return self.plans.spot_now(now)

    # -- dispatch ---------------------------------------------------------------------------
    def _dispatch(self, now: float) -> None:
        state = self.state
        self.plans.order_stage()
        slots_needed = max(1, self.spec.gpus_per_trial)
        # A spot policy that has turned to on-demand gives its spot instances no more work.
        spot_ok = (self.spec.spot_policy is None or self.scaling is None
                   or self.plans.spot_now(now))
        while not state.budget_blocked:
            inst = self.cluster.free_instance(slots_needed, spot_ok)
            if inst is None:
                staged = self.journaled.staged
                if not spot_ok and staged is not None and staged.handed_out() \
                        and not state.starved:
                    # A segment ended on a spot instance the market turned from: no job
                    # asked for it, yet the stage has none to give (counting one queued, the
                    # scaling policy would launch the stage's count, then let it go).
                    state.starved = True
                state.queued = not state.starved
                return
            if self.deadline_policy is not None and not state.admission_closed:
                self.deadline_policy.check_admission(now)
            if (state.admit_limit is not None and not state.admission_closed
                    and len(state.trials) - state.bracket_first >= state.admit_limit):
                self._close_admission(f"the plan is down to {state.admit_limit} trials")
            with self.store.atomic():
                # The job and its new trial's row, both or neither.
                new_id = f"t{len(state.trials) + 1:04d}"
                job = self.journaled.next_job(new_id)
                if job is None and self.plans.admit_idle(
                        now, self._expected_s(self.plans.first_rung_steps)):
                    job = self.journaled.next_job(new_id)
                if job is None:
                    state.starved, state.queued = True, False
                    self.cluster.unclaim(inst.instance_id)
                    return
                trial = self._trial_for(job, now)
            state.starved = False
            expected_end = now + self._expected_s(job.to_step - trial.step)
            self.cluster.bill(inst.instance_id, now)
            if not self.ledger.can_commit(inst.instance_id, expected_end, now):
                self.cluster.unclaim(inst.instance_id)
                if state.running:
                    # Hand the job back: it is offered again once running work has ended
                    # (and step times are better known).
                    self.segments.job_lost(trial.trial_id)
                    self.segments.set_trial_state(trial, TrialState.PAUSED, now)
                else:
                    # Nothing left to wait for: the sweep winds down with what it has.
                    state.budget_blocked = True
                    self.segments.set_trial_state(trial, TrialState.STOPPED, now)
                return
            slots = (slots_needed if self.deadline_policy is None
                     else self.deadline_policy.width(trial, job, inst, slots_needed))
            segment_id = self.segments.submit(trial, job, inst, slots, now)
            self.ledger.reserve(inst.instance_id, expected_end, segment_id)

    def _expected_s(self, steps: int) -> float:
        """The seconds a segment of ``steps`` steps is reserved for: half again the recent
        median step time (the ledger commits the money for them)."""
        return steps * self.timings.seconds_per_step() * 1.5

    def _trial_for(self, job: Job, now: float) -> TrialRecord:
        if not job.new:
            return self.state.trials[job.trial_id]
        params = self.sampler.ask(job.trial_id)
        trial = TrialRecord(job.trial_id, len(self.state.trials) + 1, params, job.bracket)
        self.state.trials[job.trial_id] = trial
        self.store.add_trial(trial.trial_id, trial.number, params, job.bracket, now)
        self.hooks.trial_started(trial)
        return trial

    def _close_admission(self, why: str) -> None:
        """No new trials from now on (journaled, so a resumed sweep keeps it closed)."""
        log.info("admission closed: %s", why)
        self.state.admission_closed = True
        self.journaled.close_admission()

    # -- each tick --------------------------------------------------------------------------
    def _tick(self, now: float) -> None:
        self.cluster.tick(now)
        if self.cluster.instances_due(now):
            self.segments.check_leases(self.clock.now())
            self._replan_pool(now)
        if now - self._last_spend_write >= self.settings.spend_every_s:
            self._last_spend_write = now
            self.store.record_spend(now, self.ledger.spent(now), self.ledger.committed(now),
                                    len(self.ledger.running()))
            if self.observer is not None:
                self.observer(self.snapshot(now))

    def _replan_pool(self, now: float) -> None:
        """A shared pool is the cluster: when workers join or leave, the plan (what the
        sweep is predicted to take, planned vs actual) is made again for its size now."""
        if self._pool_plan is None:
            return
        size = self.cluster.trial_slots()
        if size == 0 or size == self._pool_size:
            return
        plan = self._pool_plan(size)
        log.info("the pool has room for %d trials at once (was %d): predicted %.0f s, "
                 "%.4f USD", size, self._pool_size, plan.predicted_wall_s,
                 plan.predicted_cost_usd)
        self._pool_size = size
        self.store.add_plan(now, plan.to_json())

    def _autoscale(self, now: float) -> None:
        """Follow the scaling policy's target: launch, drain, terminate (never mid-segment)."""
        assert self.scaling is not None
        state, cluster = self.state, self.cluster
        on_demand_now = self.spec.spot_policy is not None and not self.plans.spot_now(now)
        live = cluster.live()
        if on_demand_now:
            # Spot instances finish what they run and go: the policy sizes the on-demand
            # cluster that replaces them (counting them, it would launch one on-demand
            # instance per spot one at every tick while jobs queue).
            live = [i for i in live if not cluster.instances[i].spot]
        busy = {run.instance_id for run in state.running.values()}
        # Launches under way count as booting instances: the policy sees the cluster as it will
        # be, and reconcile asks for no instance twice.
        view = ScaleView(now=now, live=len(live) + len(cluster.launcher.coming(on_demand_now)),
                         busy=len(busy & set(live)), starved=state.starved,
                         queued=state.queued, stage=state.stage,
                         elapsed_s=now - state.started_at,
                         next_work_s=self.plans.next_work_s(now),
                         cuts_stages=self.plans.cuts_stages)
        target = self.scaling.target(view)
        cluster.follow(target, now, on_demand_now=on_demand_now)

    # -- the end ----------------------------------------------------------------------------
    def _shutdown(self, outcome_state: ExperimentState, reason: EndReason,
                  message: str | None) -> float:
        state = self.state
        state.widening.clear()   # every running segment stops now, and stays stopped
        if state.running:
            self.executor.request_stop(list(state.running))
            # Out of money, stopped segments get a part of the reaction time (the rest is for
            # terminating instances); at the deadline they get the grace to checkpoint.
            wait = (self.settings.reaction_s * 0.4 if reason == EndReason.BUDGET
                    else self.settings.stop_grace_s)
            give_up = self.clock.now() + wait
            while not state.nothing_running() and self.clock.now() < give_up:
                if reason != EndReason.BUDGET and self.ledger.must_stop(self.clock.now(),
                                                                self.settings.reaction_s * 0.6):
                    break  # the grace to checkpoint never outranks the cost budget
                self.segments.handle(self.executor.poll(min(self.settings.tick_s * 4, 0.2)))
            now = self.clock.now()
            if self.cluster.discovers and state.running:
                # A pool worker outlives the sweep: what it still runs may write nothing more.
                self.executor.revoke(list(state.running))
            for seg_id, run in list(state.running.items()):
                state.running.pop(seg_id)
                self.store.update_segment(seg_id, state=SegmentState.LOST, finished_at=now)
                trial = state.trials[run.segment.trial_id]
                if trial.trial_id in state.cut:
                    self.segments.sync_state(trial, now)  # pruned, whatever it still trained
                else:
                    self.segments.set_trial_state(trial, TrialState.STOPPED, now)
        if reason != EndReason.BUDGET:
            self.cluster.keep_warm(self.clock.now())
        self.cluster.terminate_all()
        end = self.clock.now()
        self.journaled.finalize()
        for trial in state.trials.values():
            if trial.state in (TrialState.RUNNING, TrialState.PAUSED):
                self.segments.sync_state(trial, end)
                if trial.state == TrialState.RUNNING:
                    self.segments.set_trial_state(trial, TrialState.STOPPED, end)
            if trial.state == TrialState.STOPPED:
                self.sampler.tell(trial.trial_id, TrialState.PRUNED, trial.value)
        spent = self.ledger.spent(end)
        self.store.record_spend(end, spent, spent, 0)
        best = self.best()
        self.store.update_experiment(
            state=outcome_state, started_at=state.started_at, finished_at=end,
            wall_s=end - state.started_at, spend_usd=spent,
            best_trial_id=best[0] if best else None, best_value=best[1] if best else None,
            message=message or reason)
        if self.observer is not None:
            self.observer(self.snapshot(end))
        self.hooks.sweep_ended(state.trials.values(), SweepSummary(
            state=str(outcome_state), reason=str(reason), message=message, spend_usd=spent,
            wall_s=end - state.started_at, time_budget_s=self.spec.time_budget_s,
            cost_budget_usd=self.spec.cost_budget_usd,
            best_trial_id=best[0] if best else None, best_value=best[1] if best else None,
            best_params=dict(state.trials[best[0]].params) if best else None,
            trials=self.snapshot(end)["trials"]))
        self.executor.close()
        return end

    def _all_failed(self, first: int | None = None) -> str | None:
        """Why the sweep failed when its trials failed and none produced a value (with
        ``first``: trials 1 to ``first`` all failed); None when it did not."""
        def valued(t: TrialRecord) -> bool:
            values = [t.value, *t.last_report.values()]
            return any(v is not None and math.isfinite(v) for v in values)

        trials = self.state.trials
        failed = nothing_but_failures(
            ((t.number, t.state, valued(t)) for t in trials.values()), first)
        if failed is None:
            return None
        first_trial = next(t.trial_id for t in trials.values() if t.number == failed[0])
        row = self.store.trial(first_trial) or {}
        return failures_message(self.spec.metric, len(failed), len(trials),
                                self.spec.max_failures + 1, first, first_trial,
                                row.get("error"))

    # -- views ------------------------------------------------------------------------------
    def best(self) -> tuple[str, float] | None:
        sign = 1.0 if self.spec.mode == "max" else -1.0
        scored = [(t.trial_id, t.value) for t in self.state.trials.values()
                  if t.value is not None and math.isfinite(t.value)
                  and t.state != TrialState.FAILED]
        if not scored:
            return None
        return max(scored, key=lambda tv: (sign * tv[1], -int(tv[0][1:])))

    def snapshot(self, now: float) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for t in self.state.trials.values():
            counts[t.state] = counts.get(t.state, 0) + 1
        best = self.best()
        # Where each trial is headed now: the step its running segment trains to (a larger
        # one than before is a promotion, for a line per trial event).
        heading = {run.segment.trial_id: run.segment.stop_step
                   for run in self.state.running.values()}
        return {
            "elapsed_s": now - self.state.started_at, "time_budget_s": self.spec.time_budget_s,
            "spend_usd": self.ledger.spent(now), "cost_budget_usd": self.spec.cost_budget_usd,
            "trials": counts, "total": len(self.state.trials),
            "best_value": best[1] if best else None, "best_trial_id": best[0] if best else None,
            "workers": len(self.cluster.ready), "running_segments": len(self.state.running),
            "metric": self.spec.metric, "mode": self.spec.mode,
            "by_trial": {t.trial_id: {"state": str(t.state), "step": t.step, "value": t.value,
                                      "to_step": heading.get(t.trial_id), "params": t.params}
                         for t in self.state.trials.values()},
        }
