"""ASHA: asynchronous successive halving, pausing trials at rungs and promoting them later."""

from __future__ import annotations

from tuner.schedulers._base import Job, Mode, TrialStatus, _RungScheduler, sortable
from tuner.schedulers._rungs import is_number, promotion_cutoff, rung_steps, validate_arguments


class ASHA(_RungScheduler):
    """Asynchronous successive halving (Li et al., "A System for Massively Parallel
    Hyperparameter Tuning", MLSys 2020, Algorithm 2).

    A trial that reaches a rung pauses there. Whenever a slot frees, the best paused trial that
    ranks in the top ``1 / reduction_factor`` of its rung is promoted (highest rung first) and
    continues from its rung step; otherwise a new trial starts, until ``num_trials`` have started
    (default ``reduction_factor ** (len(rungs) - 1)``).

    Example:

        >>> from tuner.schedulers import ASHA
        >>> asha = ASHA(min_resource=1, max_resource=9, reduction_factor=3)
        >>> asha.rungs, asha.num_trials
        ([1, 3, 9], 9)
        >>> for i, value in enumerate([0.2, 0.9, 0.5]):
        ...     job = asha.next_job(f"t{i}")
        ...     asha.on_rung(job.trial_id, job.to_step, value)
        >>> asha.next_job("t3")
        Job(trial_id='t1', to_step=3, bracket=0, new=False)
    """

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int = 3,
        mode: Mode = "max",
        num_trials: int | None = None,
    ) -> None:
        validate_arguments(min_resource, max_resource, reduction_factor, mode, num_trials)
        rungs = rung_steps(min_resource, max_resource, reduction_factor)
        if num_trials is None:
            num_trials = reduction_factor ** (len(rungs) - 1)
        super().__init__(rungs, reduction_factor, mode, num_trials)

    def _promotion(self) -> Job | None:
        for k in range(len(self.rungs) - 2, -1, -1):
            records = self._values[k]
            cutoff = promotion_cutoff([v for _, v in records], self.reduction_factor, self.mode)
            if cutoff is None:
                continue
            best: tuple[float, str] | None = None
            for trial_id, value in records:  # in arrival order: among ties the earliest wins
                trial = self._trials[trial_id]
                paused_here = trial.status is TrialStatus.PAUSED and (
                    trial.step == trial.to_step == self.rungs[k]
                )
                key = sortable(value, self.mode)
                if paused_here and is_number(value) and key >= cutoff:
                    if best is None or key > best[0]:
                        best = (key, trial_id)
            if best is not None:
                return Job(best[1], self.rungs[k + 1])
        return None
