"""Take up an experiment in the store where an earlier run stopped (before the loop runs).

Trials come back with their params, steps, values and failures; the scheduler's journal is
replayed into the (fresh) scheduler; the sampler is told every trial's params and results;
segments that were in flight are marked lost and their jobs offered again (training resumes
from each trial's last checkpoint); the finished ones are counted in the step times the
re-planner fits, as if this controller had seen them end; the instances the earlier run left
are adopted. Everything is read through :class:`tuner._store.Store`'s methods.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from tuner._journal import replay
from tuner._plan_following import CALIBRATION_KEY
from tuner._segments import TRIAL_STATE
from tuner._sweep_state import TrialRecord
from tuner.schedulers import TrialStatus
from worker.records import SegmentState, TrialState

if TYPE_CHECKING:
    from tuner._controller import Controller

log = logging.getLogger("tuner._controller")


def restore(ctrl: Controller) -> int:
    """Restore ``ctrl`` from its store; returns the number of trials."""
    state, store, segments, plans = ctrl.state, ctrl.store, ctrl.segments, ctrl.plans
    now = ctrl.clock.now()
    for r in store.trial_rows():
        state.trials[r["trial_id"]] = TrialRecord(
            r["trial_id"], r["number"], json.loads(r["params"]), r["bracket"],
            step=r["last_step"], value=r["value"], failures=r["failures"],
            state=TrialState(r["state"]))
    for r in store.reports():
        trial = state.trials.get(r["trial_id"])
        if trial is not None and r["value"] is not None and r["step"] <= trial.step:
            trial.last_report[r["step"]] = r["value"]
    in_flight = []
    for r in store.segments():
        n = int(r["segment_id"].rsplit("/s", 1)[1])
        tid = r["trial_id"]
        segments.counter[tid] = max(segments.counter.get(tid, 0), n)
        if r["state"] in (SegmentState.SUBMITTED, SegmentState.RUNNING):
            in_flight.append(r["segment_id"])
            store.drop_reports(r["segment_id"])
            store.update_segment(r["segment_id"], state=SegmentState.LOST, finished_at=now)
    if in_flight:
        # A VM that outlived its controller may still run one: it stops, and a copy still
        # queued is not started.
        ctrl.executor.request_stop(in_flight)
    ctrl.cluster.adopt(now)
    journal = store.journal()
    replay(ctrl.scheduler, journal)
    replanner = plans.replanner
    brackets = [i for i, e in enumerate(journal) if e["kind"] == "bracket"]
    if brackets:
        # Later brackets were started: what follows the last one is the bracket under way.
        state.bracket_first = sum(e["kind"] == "job" and bool(e["flag"])
                                  for e in journal[:brackets[-1]])
        if replanner is not None:
            for i in brackets:
                replanner.begin_bracket(int(journal[i]["step"]))
    kept = store.meta(CALIBRATION_KEY)
    if kept is not None and replanner is not None:
        # How late the earlier runs' stages ran against their plans, and the first plan of
        # each stage of the bracket under way.
        try:
            replanner.recalibrate(json.loads(kept))
            plans.calibration_kept = kept
        except ValueError as exc:   # (json's errors are ValueErrors too)
            log.warning("the stored re-planner calibration is unreadable, so the re-planner "
                        "starts without it: %s", exc)
    current = journal[brackets[-1] + 1:] if brackets else journal
    state.admission_closed = any(e["kind"] == "close" for e in current)
    limits = [int(e["step"]) for e in current if e["kind"] == "limit"]
    if limits:
        # An earlier run's re-plan shrank the job: keep it, and its re-planner too.
        state.admit_limit = limits[-1]
        if replanner is not None:
            replanner.restrict(limits[-1])
    journaled = {e["trial_id"] for e in journal if e["kind"] == "job"}
    for tid in [t for t in state.trials if t not in journaled]:
        # Sampled, but the controller died before its first job was journaled: it never
        # ran, and the scheduler has never heard of it.
        del state.trials[tid]
        store.forget_trial(tid)
    _replay_segments(ctrl)
    if replanner is not None and state.trials:
        # Re-planned at the first tick, from the stage under way with the time and budget
        # left (the plan it starts with is the sweep's plan from its start).
        state.stage = ctrl.journaled.stage
        plans.replanned = (-1, -1)
    for trial in state.trials.values():
        if ctrl.scheduler.status(trial.trial_id) is TrialStatus.RUNNING:
            # In flight, or stopped at the end of the last run: offered again.
            segments.job_lost(trial.trial_id)

    def restored(t: TrialRecord) -> TrialState:
        return TRIAL_STATE[ctrl.scheduler.status(t.trial_id)]

    ctrl.sampler.restore([(t.trial_id, t.params, restored(t), t.value, dict(t.last_report))
                          for t in state.trials.values()])
    for trial in state.trials.values():
        segments.set_trial_state(trial, restored(trial), now)
    return len(state.trials)


def _replay_segments(ctrl: Controller) -> None:
    """Count the segments the earlier runs finished in the step times, in the order they
    ended, as if this controller had seen them end: its first re-plan fits what the sweep has
    measured, not the profile's prior alone."""
    first_steps = ctrl.store.first_step_times()
    for r in ctrl.store.finished_segments():
        trial = ctrl.state.trials.get(r["trial_id"])
        if trial is None:
            continue
        finished = float(r["finished_at"])
        started = finished if r["started_at"] is None else float(r["started_at"])
        ctrl.segments.observe(r["trial_id"], int(r["start_step"]), int(r["stop_step"]),
                              int(r["last_step"]), int(r["gpus"] or 1), started, finished,
                              first_steps.get(r["segment_id"]),
                              this_bracket=trial.number > ctrl.state.bracket_first)
