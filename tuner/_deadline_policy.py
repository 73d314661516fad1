"""The controller's part of HyperSched's deadline policy (Liaw et al., SoCC '19): admission
closes once a new trial could no longer reach the top rung by the deadline, and the best
running trials take free GPUs when the projected gain beats the restart cost. The decisions
are :class:`budgets.Reallocation`'s; this mixin feeds it what the controller sees and acts on
its answers (a :class:`tuner._controller.Controller` is the only class that mixes it in).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from records import Instance
    from tuner._timings import Timings
    from tuner.schedulers import Job

log = logging.getLogger("tuner._controller")


class DeadlinePolicyMixin:
    """Methods of the controller that run the deadline policy (``self.reallocation``)."""

    # Provided by the controller.
    reallocation: Any
    settings: Any
    scheduler: Any
    running: dict[str, Any]
    trials: dict[str, Any]
    instances: dict[str, Any]
    used_slots: dict[str, int]
    spec: Any
    executor: Any
    timings: Timings
    _deadline: float
    _widening: set[str]
    _evacuating: set[str]
    _has_free: set[str]
    _draining: set[str]
    _noticed: set[str]

    def _unit_s_per_step(self) -> float:
        """Seconds per step on one GPU: the median of recent finished segments."""
        return self.timings.unit_seconds_per_step()

    def _check_admission(self, now: float) -> None:
        """Close admission for good once a new trial could not reach the top rung by the
        deadline (judged only once a segment has been measured)."""
        assert self.reallocation is not None
        if not self.timings.unit_step_times or math.isinf(self._deadline):
            return
        if self.reallocation.admit(self._deadline - now, self._unit_s_per_step(),
                                   self.scheduler.max_resource):
            return
        self._close_admission(f"a new trial could not reach step "
                              f"{self.scheduler.max_resource} by the deadline")

    def _width(self, trial: Any, job: Job, inst: Instance, slots_needed: int) -> int:
        """Slots for the job's segment: ``slots_needed``, or more of the instance's free ones
        when the deadline policy finds it pays and no new trial could use them."""
        if self.reallocation is None or job.new or self._exploring():
            return slots_needed
        free = inst.slots - self.used_slots[inst.instance_id]
        g = self.reallocation.width(free, job.to_step - trial.step, self._unit_s_per_step(),
                                    current=slots_needed)
        return max(slots_needed, g)

    def _reallocate(self, now: float) -> None:
        """Free slots and no job for them: stop the best running trial that would gain from
        them (it checkpoints at the end of its current step) and run it on more GPUs."""
        assert self.reallocation is not None
        if self._exploring():
            return
        pending = {self.running[w].instance_id for w in self._widening if w in self.running}
        candidates = []
        for seg_id, run in self.running.items():
            iid = run.instance_id
            if (iid in pending or seg_id in self._evacuating or run.started_at is None
                    or iid not in self._has_free or iid in self._draining
                    or iid in self._noticed):
                continue
            trial = self.trials[run.segment.trial_id]
            # Best trial first (by its value at its last rung), the earliest among equals.
            v = trial.value
            key = -math.inf if v is None or not math.isfinite(v) else (
                v if self.spec.mode == "max" else -v)
            candidates.append((-key, trial.number, seg_id))
        for _, _, seg_id in sorted(candidates):
            run = self.running[seg_id]
            inst = self.instances[run.instance_id]
            free = inst.slots - self.used_slots[run.instance_id]
            if free <= 0:
                continue
            trial = self.trials[run.segment.trial_id]
            done = max([s for s in trial.last_report if s <= run.segment.stop_step],
                       default=run.segment.start_step)
            steps_left = run.segment.stop_step - max(done, run.segment.start_step) - 1
            g = self.reallocation.width(free + run.slots, steps_left, self._unit_s_per_step(),
                                        current=run.slots)
            if g > run.slots:
                log.info("reallocating %s from %d to %d GPUs", seg_id, run.slots, g)
                self._widening.add(seg_id)
                self.executor.request_stop([seg_id])
                return   # one at a time: the next one sees the slots this one takes
