"""Hyperband: several synchronous successive-halving brackets of different aggressiveness."""

from __future__ import annotations

from dataclasses import replace

from tuner.schedulers._base import Job, Mode, Scheduler, TrialStatus
from tuner.schedulers._rungs import hyperband_brackets, hyperband_rungs, validate_arguments
from tuner.schedulers._sha import SuccessiveHalving


def scale_sizes(sizes: list[int], total: int) -> list[int]:
    """Split ``total`` in proportion to ``sizes`` (largest remainder), at least 1 each.

    With ``total < len(sizes)`` only the first ``total`` sizes are kept, at 1 each.
    """
    sizes = sizes[:total]
    whole = sum(sizes)
    scaled = [total * n // whole for n in sizes]
    by_remainder = sorted(range(len(sizes)), key=lambda i: (-(total * sizes[i] % whole), i))
    for i in by_remainder[: total - sum(scaled)]:
        scaled[i] += 1
    for i, n in enumerate(scaled):
        if n == 0:  # take one from the largest, the least aggressive of equals
            donor = max(range(len(scaled)), key=lambda j: (scaled[j], j))
            scaled[donor] -= 1
            scaled[i] = 1
    return scaled


class Hyperband(Scheduler):
    """Hyperband (Li et al., "Hyperband: A Novel Bandit-Based Approach to Hyperparameter
    Optimization", JMLR 2018): synchronous successive-halving brackets, run concurrently.

    Bracket ``i`` (``s = s_max - i``, most aggressive first) starts ``n_s`` trials at resource
    ``r_s`` and has rungs ``R * eta**(j - s)`` for ``j = 0 .. s``. Given ``num_trials``, the
    ``n_s`` are scaled to sum to it. ``next_job`` offers lost segments first, then promotions in
    any bracket, then a new trial for the bracket with the most unfilled slots.

    Example:

        >>> from tuner.schedulers import Hyperband
        >>> hb = Hyperband(min_resource=1, max_resource=9, reduction_factor=3)
        >>> hb.bracket_sizes, [b.rungs for b in hb.brackets]
        ([9, 5, 3], [[1, 3, 9], [3, 9], [9]])
        >>> hb.next_job("t0")
        Job(trial_id='t0', to_step=1, bracket=0, new=True)
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
        plan = hyperband_brackets(min_resource, max_resource, reduction_factor)
        sizes = [n for n, _ in plan]
        if num_trials is not None:
            sizes = scale_sizes(sizes, num_trials)
        s_max = len(plan) - 1
        self.mode = mode
        self.bracket_sizes = sizes
        self.brackets = [
            SuccessiveHalving._with_rungs(
                hyperband_rungs(min_resource, max_resource, reduction_factor, s_max - i),
                reduction_factor,
                mode,
                n,
            )
            for i, n in enumerate(sizes)
        ]
        self._bracket_of: dict[str, int] = {}

    @property
    def max_resource(self) -> int:
        return self.brackets[0].max_resource

    @property
    def total_trials(self) -> int:
        return sum(self.bracket_sizes)

    def next_job(self, new_trial_id: str) -> Job | None:
        lost_first = sorted(range(len(self.brackets)), key=lambda i: not self.brackets[i]._lost)
        for i in lost_first:
            job = self.brackets[i]._resume_job()
            if job is not None:
                return replace(job, bracket=i)
        unfilled = [b.num_trials - len(b._trials) for b in self.brackets]
        i = max(range(len(self.brackets)), key=lambda j: (unfilled[j], -j))
        job = self.brackets[i]._new_job(new_trial_id)
        if job is None:
            return None
        self._bracket_of[new_trial_id] = i
        return replace(job, bracket=i)

    def close_admission(self) -> None:
        for bracket in self.brackets:
            bracket.close_admission()

    def _bracket(self, trial_id: str) -> SuccessiveHalving:
        return self.brackets[self._bracket_of[trial_id]]

    def on_rung(self, trial_id: str, step: int, value: float | None) -> None:
        self._bracket(trial_id).on_rung(trial_id, step, value)

    def on_trial_end(self, trial_id: str, step: int, value: float | None, failed: bool) -> None:
        self._bracket(trial_id).on_trial_end(trial_id, step, value, failed)

    def on_job_lost(self, trial_id: str) -> None:
        self._bracket(trial_id).on_job_lost(trial_id)

    def status(self, trial_id: str) -> TrialStatus:
        return self._bracket(trial_id).status(trial_id)

    def is_finished(self) -> bool:
        return all(b.is_finished() for b in self.brackets)

    def finalize(self) -> None:
        for bracket in self.brackets:
            bracket.finalize()
