"""ASHA: asynchronous successive halving, pausing trials at rungs and promoting them later."""

from __future__ import annotations

import bisect

from budgets import entry_shares
from tuner.schedulers._base import Job, Mode, TrialStatus, _RungScheduler, sortable
from tuner.schedulers._rungs import is_number, rung_steps, validate_arguments


class ASHA(_RungScheduler):
    """Asynchronous successive halving (Li et al., "A System for Massively Parallel
    Hyperparameter Tuning", MLSys 2020, Algorithm 2).

    A trial that reaches a rung pauses there. Whenever a slot frees, the best paused trial that
    ranks in the top ``1 / reduction_factor`` of its rung (rounded up, from two results on) is
    promoted (highest rung first) and
    continues from its rung step; otherwise a new trial starts, until ``num_trials`` have started
    (default ``reduction_factor ** (len(rungs) - 1)``).

    ``brackets`` > 1 is asynchronous Hyperband (Li et al. 2020, section 3.3; Ray Tune's and Syne
    Tune's ``brackets``): a new trial enters at one of the first ``brackets`` rungs, in
    Hyperband's proportions (:func:`budgets.entry_shares`, most aggressive first, each trial
    to the rung furthest behind its share), and competes there with the trials promoted into
    that rung. It hedges against early rungs that rank trials unlike later ones; 1 is plain ASHA.

    Example:

        >>> from tuner.schedulers import ASHA
        >>> asha = ASHA(min_resource=1, max_resource=9, reduction_factor=3)
        >>> asha.rungs, asha.num_trials
        ([1, 3, 9], 9)
        >>> for i, value in enumerate([0.2, 0.9]):
        ...     job = asha.next_job(f"t{i}")
        ...     asha.on_rung(job.trial_id, job.to_step, value)
        >>> asha.next_job("t2")                     # the top ceil(2/3) = 1 of rung 1
        Job(trial_id='t1', to_step=3, bracket=0, new=False)
    """

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int = 3,
        mode: Mode = "max",
        num_trials: int | None = None,
        brackets: int = 1,
    ) -> None:
        validate_arguments(min_resource, max_resource, reduction_factor, mode, num_trials)
        rungs = rung_steps(min_resource, max_resource, reduction_factor)
        if isinstance(brackets, bool) or not isinstance(brackets, int) \
                or not 1 <= brackets <= len(rungs):
            raise ValueError(f"The value of brackets is {brackets!r}, but must be an int from 1 "
                             f"to the number of rungs ({len(rungs)})")
        if num_trials is None:
            num_trials = reduction_factor ** (len(rungs) - 1)
        super().__init__(rungs, reduction_factor, mode, num_trials)
        self.num_brackets = brackets
        self._shares = entry_shares(len(rungs), reduction_factor, brackets)
        self._entered = [0] * brackets   # new trials that entered at each rung
        self._keys: list[list[float]] = [[] for _ in rungs]
        self._candidates: list[list[tuple[float, int, str]]] = [[] for _ in rungs]
        self._arrivals = 0

    def new_bracket(self, num_trials: int) -> None:
        """Once the sweep is finished, admit ``num_trials`` more trials: what a sweep whose
        number of trials the planner chose does with the time and budget left (Ray Tune's
        ``num_samples=-1`` and Optuna's ``n_trials=None`` keep sampling until a budget runs
        out). ASHA has no brackets to start: the new trials join the same rungs, and a trial
        paused at a rung may still be promoted as they fill it (its top ``1 / eta`` grows).
        The controller calls it as it starts another bracket of
        :class:`SuccessiveHalving`, and a resumed sweep replays it from the journal.

        >>> asha = ASHA(min_resource=1, max_resource=3, reduction_factor=3, num_trials=2)
        >>> for i, value in enumerate([0.2, 0.9]):
        ...     job = asha.next_job(f"t{i}")
        ...     asha.on_rung(job.trial_id, job.to_step, value)
        >>> asha.next_job("t2")                     # t1 is the top third of rung 1
        Job(trial_id='t1', to_step=3, bracket=0, new=False)
        >>> asha.on_rung("t1", 3, 0.95)
        >>> asha.is_finished()
        True
        >>> asha.new_bracket(3)
        >>> asha.next_job("t2"), asha.total_trials
        (Job(trial_id='t2', to_step=1, bracket=0, new=True), 5)
        """
        if isinstance(num_trials, bool) or not isinstance(num_trials, int) or num_trials < 1:
            raise ValueError(f"num_trials is {num_trials!r}, but must be an int >= 1")
        if not self.is_finished():
            raise ValueError("more trials can join only once the sweep is finished")
        self.num_trials = len(self._trials) + num_trials
        self._closed = False

    def admit_more(self, num_trials: int) -> None:
        """Admit ``num_trials`` more trials while trials still run: what a sweep whose number
        of trials the planner chose does when a worker is free, every trial it admitted has
        started and no promotion is due (the controller's rule: docs/concepts/schedulers.md).
        Unlike :meth:`new_bracket` it does not wait for the sweep to finish, so no worker
        idles while the last promotions train. A resumed sweep replays it from the journal.

        >>> asha = ASHA(min_resource=1, max_resource=3, reduction_factor=3, num_trials=1)
        >>> job = asha.next_job("t0")
        >>> asha.next_job("t1") is None             # t0 runs; its count is used up
        True
        >>> asha.admit_more(1)
        >>> asha.next_job("t1"), asha.total_trials
        (Job(trial_id='t1', to_step=1, bracket=0, new=True), 2)
        """
        if isinstance(num_trials, bool) or not isinstance(num_trials, int) or num_trials < 1:
            raise ValueError(f"num_trials is {num_trials!r}, but must be an int >= 1")
        if self._closed or len(self._trials) < self.num_trials:
            raise ValueError("more trials can be admitted only once every admitted trial has "
                             "started and while admission is open")
        self.num_trials += num_trials

    def _new_job(self, new_trial_id: str) -> Job | None:
        if self._all_started():
            return None
        # The rung furthest behind its share (the most aggressive of equals): a function of
        # the count alone, so a resumed sweep's replay enters every trial where it entered.
        n = sum(self._entered) + 1
        b = max(range(self.num_brackets),
                key=lambda j: (self._shares[j] * n - self._entered[j], -j))
        self._entered[b] += 1
        return self._commit(Job(new_trial_id, self.rungs[b], bracket=b, new=True))

    def _record(self, trial_id: str, step: int, value: float | None) -> None:
        super()._record(trial_id, step, value)
        if step not in self.rungs:
            return
        k = self.rungs.index(step)
        key = sortable(value, self.mode)
        bisect.insort(self._keys[k], key)
        if k < len(self.rungs) - 1 and is_number(value):
            # Best candidate last; among equal values the earliest arrival wins.
            self._arrivals += 1
            bisect.insort(self._candidates[k], (key, -self._arrivals, trial_id))

    def _paused_at(self, trial_id: str, k: int) -> bool:
        trial = self._trials[trial_id]
        return trial.status is TrialStatus.PAUSED and trial.step == trial.to_step == self.rungs[k]

    def _top_rung(self) -> int:
        """The index of the highest rung a trial may be promoted to now."""
        return len(self.rungs) - 1

    def _promotion(self) -> Job | None:
        # Kept incrementally (sorted keys per rung, candidates per rung, stale ones dropped
        # lazily) so that a decision costs O(log n), not a sort of the whole rung.
        for k in range(self._top_rung() - 1, -1, -1):
            candidates = self._candidates[k]
            while candidates and not self._paused_at(candidates[-1][2], k):
                candidates.pop()
            keys = self._keys[k]
            # The top 1/eta of the rung, rounded up, once it has two results (a trial at or
            # above the rung's 1 - 1/eta quantile, as Syne Tune's and Ray Tune's ASHA decide):
            # the paper's floor would hold the best trial of every rung back until eta results
            # are in, which costs a sweep its early promotions. A rung no trial will arrive to
            # fill promotes its best however few it has.
            top = -(-len(keys) // self.reduction_factor) \
                if len(keys) >= 2 or self._closed else 0
            if not candidates or top == 0:
                continue
            key, _, trial_id = candidates[-1]
            if key >= keys[len(keys) - top]:
                return Job(trial_id, self.rungs[k + 1])
        return None
