"""The controller's part of HyperSched's deadline policy (Liaw et al., SoCC '19): admission
closes once a new trial could no longer reach the top rung by the deadline, and the best
running trials take free GPUs when the projected gain beats the restart cost. The decisions
are :class:`budgets.Reallocation`'s; this part feeds it what the sweep has measured and acts
on its answers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from budgets import Reallocation
from tuner._executor import Executor
from tuner._journaled import JournaledScheduler
from tuner._run_spec import RunSpec
from tuner._sweep_state import SweepState, TrialRecord
from tuner.schedulers import Job
from worker.records import Instance

if TYPE_CHECKING:
    from tuner._cluster import Cluster
    from tuner._timings import Timings

log = logging.getLogger("tuner._controller")


class DeadlinePolicy:
    """``close_admission(why)``: the loop's, which closes admission for good."""

    def __init__(self, reallocation: Reallocation, spec: RunSpec, *, state: SweepState,
                 scheduler: JournaledScheduler, cluster: Cluster, timings: Timings,
                 executor: Executor, close_admission: Callable[[str], None]) -> None:
        self.reallocation = reallocation
        self.spec = spec
        self.state = state
        self.scheduler = scheduler
        self.cluster = cluster
        self.timings = timings
        self.executor = executor
        self._close_admission = close_admission

    def exploring(self) -> bool:
        """New trials may still take free slots."""
        return (not self.state.admission_closed
                and len(self.state.trials) < self.scheduler.total_trials)

    def check_admission(self, now: float) -> None:
        """Close admission for good once a new trial could not reach the top rung by the
        deadline (judged only once a segment has been measured)."""
        deadline = self.state.deadline
        if not self.timings.unit_step_times or math.isinf(deadline):
            return
        if self.reallocation.admit(deadline - now, self.timings.unit_seconds_per_step(),
                                   self.scheduler.max_resource):
            return
        self._close_admission(f"a new trial could not reach step "
                              f"{self.scheduler.max_resource} by the deadline")

    def width(self, trial: TrialRecord, job: Job, inst: Instance, slots_needed: int) -> int:
        """Slots for the job's segment: ``slots_needed``, or more of the instance's free ones
        when the deadline policy finds it pays and no new trial could use them."""
        if job.new or self.exploring():
            return slots_needed
        free = inst.slots - self.cluster.used_slots[inst.instance_id]
        g = self.reallocation.width(free, job.to_step - trial.step,
                                    self.timings.unit_seconds_per_step(), current=slots_needed)
        return max(slots_needed, g)

    def reallocate(self, now: float) -> None:
        """Free slots and no job for them: stop the best running trial that would gain from
        them (it checkpoints at the end of its current step) and run it on more GPUs."""
        if self.exploring():
            return
        state, cluster = self.state, self.cluster
        pending = {state.running[w].instance_id for w in state.widening if w in state.running}
        candidates = []
        for seg_id, run in state.running.items():
            iid = run.instance_id
            if (iid in pending or seg_id in state.evacuating or run.started_at is None
                    or iid not in cluster.has_free or iid in cluster.draining
                    or iid in cluster.noticed):
                continue
            trial = state.trials[run.segment.trial_id]
            # Best trial first (by its value at its last rung), the earliest among equals.
            v = trial.value
            key = -math.inf if v is None or not math.isfinite(v) else (
                v if self.spec.mode == "max" else -v)
            candidates.append((-key, trial.number, seg_id))
        for _, _, seg_id in sorted(candidates):
            run = state.running[seg_id]
            inst = cluster.instances[run.instance_id]
            free = inst.slots - cluster.used_slots[run.instance_id]
            if free <= 0:
                continue
            trial = state.trials[run.segment.trial_id]
            done = max([s for s in trial.last_report if s <= run.segment.stop_step],
                       default=run.segment.start_step)
            steps_left = run.segment.stop_step - max(done, run.segment.start_step) - 1
            g = self.reallocation.width(free + run.slots, steps_left,
                                        self.timings.unit_seconds_per_step(), current=run.slots)
            if g > run.slots:
                log.info("reallocating %s from %d to %d GPUs", seg_id, run.slots, g)
                state.widening.add(seg_id)
                self.executor.request_stop([seg_id])
                return   # one at a time: the next one sees the slots this one takes
