"""Synchronous successive halving: a rung is decided only when all of its trials have reported."""

from __future__ import annotations

from tuner.schedulers._base import Job, Mode, TrialStatus, _RungScheduler, sortable
from tuner.schedulers._rungs import is_number, rung_steps, sha_sizes, validate_arguments


class SuccessiveHalving(_RungScheduler):
    """Synchronous successive halving (Jamieson and Talwalkar, "Non-stochastic Best Arm
    Identification and Hyperparameter Optimization", AISTATS 2016), in the stage model of
    RubberBand (Misra et al., EuroSys 2021).

    All ``num_trials`` trials (default ``reduction_factor ** (len(rungs) - 1)``) run to the first
    rung. When every trial of the stage has reported (or ended), the best ``sizes[k + 1]`` paused
    trials are promoted to the next rung and the others are pruned at once. ``first_reduction``
    (None: ``reduction_factor``) is the first rung's cut alone (2: the best half go on), as
    :class:`budgets.JobShape` has it. ``next_job`` returns
    None while the stage waits for stragglers. NaN/None values are never promoted; among equal
    values the trial that started first wins.

    With ``early_promotion``, a trial goes on before its stage is decided once it is certain
    to be promoted: its rank among the trials that have reached the rung is within the next
    stage's size less the trials still to report there (each of those could rank above it,
    none can push it out). The trials promoted, and so every result, are those above; the
    next stage's work starts while the stage waits for its stragglers, rather than its
    workers waiting with them ([docs/benchmarks/tuning-log.md][early-promotion-idle-share]).
    Not for a stage that a re-plan may still cut (:meth:`limit_stage`, :meth:`widen_stage`
    refuse to change its sizes once it has promoted early).

    Example:

        >>> from tuner.schedulers import SuccessiveHalving
        >>> sha = SuccessiveHalving(min_resource=1, max_resource=9, reduction_factor=3)
        >>> sha.rungs, sha.sizes
        ([1, 3, 9], [9, 3, 1])
        >>> jobs = [sha.next_job(f"t{i}") for i in range(10)]
        >>> jobs[-1] is None  # all 9 trials started, none reported
        True
        >>> for i, job in enumerate(jobs[:-1]):
        ...     sha.on_rung(job.trial_id, job.to_step, float(i))
        >>> [sha.next_job("t9").trial_id for _ in range(3)]
        ['t8', 't7', 't6']
        >>> str(sha.status("t0"))
        'pruned'
    """

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int = 3,
        mode: Mode = "max",
        num_trials: int | None = None,
        first_reduction: int | None = None,
        *,
        early_promotion: bool = False,
    ) -> None:
        validate_arguments(min_resource, max_resource, reduction_factor, mode, num_trials)
        if not isinstance(early_promotion, bool):
            raise ValueError(f"The value of early_promotion is {early_promotion!r}, but must be "
                             "a bool")
        if first_reduction is not None and (isinstance(first_reduction, bool)
                                            or not isinstance(first_reduction, int)
                                            or first_reduction < 2):
            raise ValueError(f"The value of first_reduction is {first_reduction!r}, but must be "
                             "None or an int >= 2")
        rungs = rung_steps(min_resource, max_resource, reduction_factor)
        self._setup(rungs, reduction_factor, mode, num_trials, first_reduction)
        self.early_promotion = early_promotion

    @classmethod
    def _with_rungs(
        cls, rungs: list[int], reduction_factor: int, mode: Mode, num_trials: int
    ) -> SuccessiveHalving:
        """A bracket with given rung steps (Hyperband rounds them differently)."""
        sha = cls.__new__(cls)
        sha._setup(rungs, reduction_factor, mode, num_trials)
        return sha

    def _setup(
        self, rungs: list[int], reduction_factor: int, mode: Mode, num_trials: int | None,
        first_reduction: int | None = None,
    ) -> None:
        if num_trials is None:
            num_trials = reduction_factor ** (len(rungs) - 1)
        super().__init__(rungs, reduction_factor, mode, num_trials)
        self.first_reduction = first_reduction
        self.sizes = sha_sizes(num_trials, len(rungs), reduction_factor, first_reduction)
        self._natural = list(self.sizes)  # the sizes without limit_stage's cuts
        self._stage = 0
        self._members: list[str] = []  # trials of the current stage
        self._bracket = 0              # brackets started before this one (new_bracket)
        self.early_promotion = False
        self._early: list[str] = []    # members promoted before their stage was decided
        self._rung_values: dict[tuple[int, str], float | None] = {}   # (rung index, trial)

    def _record(self, trial_id: str, step: int, value: float | None) -> None:
        super()._record(trial_id, step, value)
        if step in self.rungs:
            self._rung_values[(self.rungs.index(step), trial_id)] = value

    def _promote_early(self) -> None:
        """With ``early_promotion``: queue the current stage's members certain to go on."""
        k = self._stage
        if not self.early_promotion or k >= len(self.rungs) - 1:
            return
        rung = self.rungs[k]
        reported, unreported = [], 0
        if not self._all_started():
            unreported += self.num_trials - len(self._trials)
        for t in self._members:
            trial = self._trials[t]
            if t in self._early:
                reported.append(t)
            elif trial.status is TrialStatus.PAUSED and trial.step == trial.to_step == rung:
                if is_number(trial.value):   # (NaN/None is never promoted)
                    reported.append(t)
            elif trial.status in (TrialStatus.RUNNING, TrialStatus.PAUSED):
                unreported += 1              # training, or its lost segment offered again
        certain = self.sizes[k + 1] - unreported
        if certain <= len(self._early):
            return
        ranked = sorted(reported, reverse=True,  # stable: among ties the earlier member wins
                        key=lambda t: sortable(self._rung_values[(k, t)], self.mode))
        for t in ranked[:certain]:
            if t not in self._early:
                self._early.append(t)
                self._ready.append(Job(t, self.rungs[k + 1], bracket=self._bracket))

    def _new_job(self, new_trial_id: str) -> Job | None:
        if self._all_started():
            return None
        job = self._commit(Job(new_trial_id, self.rungs[0], bracket=self._bracket, new=True))
        self._members.append(job.trial_id)
        return job

    def on_job_lost(self, trial_id: str) -> None:
        super().on_job_lost(trial_id)
        lost = self._lost[-1]
        self._lost[-1] = Job(lost.trial_id, lost.to_step, bracket=self._bracket)

    @property
    def bracket(self) -> int:
        """The bracket being run: 0, then one more per :meth:`new_bracket`."""
        return self._bracket

    def new_bracket(self, num_trials: int) -> None:
        """Once this bracket is finished, start another of ``num_trials`` new trials on the same
        rungs (and first cut): what a sweep whose number of trials the planner chose does with
        the time and budget its first bracket left (Ray Tune's ``num_samples=-1`` and Optuna's
        ``n_trials=None`` keep sampling until a budget runs out; successive halving does so a
        bracket at a time, as Hyperband runs several). The trials so far keep their results
        and statuses; the new ones are ranked among themselves only.

        >>> sha = SuccessiveHalving(min_resource=1, max_resource=3, reduction_factor=3)
        >>> for i in range(3):
        ...     job = sha.next_job(f"t{i}")
        ...     sha.on_rung(job.trial_id, job.to_step, float(i))
        >>> job = sha.next_job("t3")
        >>> sha.on_rung(job.trial_id, job.to_step, 2.5)
        >>> sha.is_finished()
        True
        >>> sha.new_bracket(3)
        >>> sha.next_job("t3"), sha.total_trials, sha.sizes
        (Job(trial_id='t3', to_step=1, bracket=1, new=True), 6, [3, 1])
        """
        if isinstance(num_trials, bool) or not isinstance(num_trials, int) or num_trials < 1:
            raise ValueError(f"num_trials is {num_trials!r}, but must be an int >= 1")
        if not self.is_finished():
            raise ValueError("a new bracket can start only once the current one is finished")
        for trial in self._trials.values():
            if trial.status is TrialStatus.PAUSED:
                trial.status = TrialStatus.PRUNED
        self._bracket += 1
        self.num_trials = len(self._trials) + num_trials
        self._closed = False
        self.sizes = sha_sizes(num_trials, len(self.rungs), self.reduction_factor,
                               self.first_reduction)
        self._natural = list(self.sizes)
        self._stage = 0
        self._members = []
        self._early = []

    @property
    def stage(self) -> int:
        """The stage whose jobs are being handed out (its rung index)."""
        return self._stage

    def members(self) -> list[str]:
        """The trials of the current stage; from the second stage on, best-ranked first (by
        their value at the rung before)."""
        return list(self._members)

    def close_admission(self) -> None:
        """No new trials: the stage being filled is decided with the trials it has, and the
        later stages are sized from them."""
        super().close_admission()
        if self._stage == 0 and len(self._trials) < self.num_trials:
            # (this bracket's trials: in its first stage, its members)
            self._natural = sha_sizes(len(self._members), len(self.rungs), self.reduction_factor,
                                      self.first_reduction)
            self.sizes = [min(a, b) for a, b in zip(self.sizes, self._natural, strict=True)]
            self._settle()

    @property
    def natural_sizes(self) -> list[int]:
        """Trials per stage as successive halving sizes them (``1/eta`` of each stage into the
        next), from the trials admitted and, after the current stage, from its trials;
        ``sizes`` less any :meth:`limit_stage` cut still to take effect."""
        out = list(self._natural)
        now = self.sizes[self._stage]
        eta = self.reduction_factor
        first = (self.first_reduction or eta) if self._stage == 0 else eta
        for k in range(self._stage + 1, len(out)):
            out[k] = min(out[k], max(1, now // (first * eta ** (k - self._stage - 1))))
        return out

    def limit_stage(self, stage: int, trials: int) -> None:
        """Promote ``trials`` trials into stage ``stage``, and ``1/eta`` of each stage into the
        next from there on, never more than :attr:`natural_sizes`: a sweep short of budget
        ends a smaller top of the ladder rather than being stopped before its last rung (the
        best are still the ones promoted). Only a stage not decided yet can be limited; a
        later call replaces an earlier one (a re-plan that sees the budget go further may
        give the cut back until the stage is decided).

        >>> sha = SuccessiveHalving(min_resource=1, max_resource=27, reduction_factor=3)
        >>> sha.limit_stage(2, 2)
        >>> sha.sizes
        [27, 9, 2, 1]
        >>> sha.limit_stage(2, 99)
        >>> sha.sizes
        [27, 9, 3, 1]
        """
        self._check_resize(stage, trials)
        natural, sizes = self.natural_sizes, list(self.sizes)
        for k in range(stage, len(self.rungs)):
            cap = max(1, trials // self.reduction_factor ** (k - stage))
            sizes[k] = min(natural[k], cap)
        self._resize(sizes)

    def widen_stage(self, stage: int, trials: int) -> None:
        """Promote ``trials`` trials into stage ``stage``, and ``1/eta`` of each stage into
        the next from there on, never fewer than :attr:`natural_sizes` nor more than the
        stage before has: a sweep with budget to spare gives the trials ranked just below
        the cut their next rung (a late bloomer pruned early is what synchronous halving
        loses against ASHA). Only a stage not decided yet can be widened; a later call, or a
        :meth:`limit_stage`, replaces an earlier one.

        >>> sha = SuccessiveHalving(min_resource=1, max_resource=27, reduction_factor=3)
        >>> sha.widen_stage(1, 15)
        >>> sha.sizes
        [27, 15, 5, 1]
        >>> sha.widen_stage(1, 99)
        >>> sha.sizes
        [27, 27, 9, 3]
        >>> sha.limit_stage(1, 9)
        >>> sha.sizes
        [27, 9, 3, 1]
        """
        self._check_resize(stage, trials)
        natural, sizes = self.natural_sizes, list(self.sizes)
        sizes[stage] = min(sizes[stage - 1], max(natural[stage], trials))
        for k in range(stage + 1, len(self.rungs)):
            cap = max(1, sizes[stage] // self.reduction_factor ** (k - stage))
            sizes[k] = min(sizes[k - 1], max(natural[k], cap))
        self._resize(sizes)

    def _resize(self, sizes: list[int]) -> None:
        """Take ``sizes``; refused once a trial of the stage under way has been promoted
        early and they differ (it was promoted on the sizes as they stood; a re-plan that
        keeps them changes nothing)."""
        if self._early and sizes != self.sizes:
            raise ValueError("a stage whose trials have been promoted early cannot be resized")
        self.sizes = sizes

    def _check_resize(self, stage: int, trials: int) -> None:
        """The arguments of :meth:`limit_stage` and :meth:`widen_stage`: a stage not decided
        yet, and a number of trials >= 1."""
        if isinstance(stage, bool) or not isinstance(stage, int) \
                or not self._stage < stage < len(self.rungs):
            raise ValueError(f"stage is {stage!r}, but must be a stage not decided yet, an int "
                             f"in ({self._stage}, {len(self.rungs)})")
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise ValueError(f"trials is {trials!r}, but must be an int >= 1")

    def handed_out(self) -> bool:
        """Whether every job of the current stage has been handed out (no new trial, lost
        segment or promotion is still to start): the stage waits only for the segments
        running, and its promotions can still be changed (:meth:`limit_stage`,
        :meth:`widen_stage`) until the last of them reports."""
        return self._all_started() and not self._lost and not self._ready

    def queued(self) -> list[str]:
        """The trials whose promotions are decided and not handed out yet, in the order they
        go out (after the job of any lost segment, which goes first and is not listed)."""
        return [job.trial_id for job in self._ready]

    def hand_out_first(self, trial_id: str) -> None:
        """Hand out ``trial_id``'s queued promotion before the other promotions (the order
        of a stage's jobs is the controller's to choose: starting its slowest trials first
        can end the stage sooner). Raises ValueError when no promotion of it is queued."""
        at = next((i for i, job in enumerate(self._ready) if job.trial_id == trial_id), None)
        if at is None:
            raise ValueError(f"trial_id is {trial_id!r}, but no promotion of it is queued")
        self._ready.insert(0, self._ready.pop(at))

    def stragglers(self) -> list[str]:
        """The trials a :meth:`decide_stage` now would prune: those of the current stage still
        training in it, when at least enough others have reached its rung to fill the next
        stage, and every job of the stage has been handed out (no new trial, lost segment or
        promotion is still to start); else none."""
        if self._stage >= len(self.rungs) - 1 or not self.handed_out():
            return []
        rung = self.rungs[self._stage]
        early = set(self._early)   # (reached the rung; now training in the next stage)
        reached = len(early) + sum(
            self._trials[t].status is TrialStatus.PAUSED and self._trials[t].step == rung
            for t in self._members if t not in early)
        if reached < self.sizes[self._stage + 1]:
            return []
        return [t for t in self._members
                if t not in early and self._trials[t].status is TrialStatus.RUNNING]

    def decide_stage(self) -> list[str]:
        """Decide the current stage now with the trials that have reached its rung, pruning
        its :meth:`stragglers` (HyperSched's admission control near a deadline: waiting for
        them would leave the stages after it too little time). Returns the pruned trials."""
        cut = self.stragglers()
        for trial_id in cut:
            self._trials[trial_id].status = TrialStatus.PRUNED
        if cut:
            self._settle()
        return cut

    def _settled(self, trial_id: str) -> bool:
        if trial_id in self._early:
            return True
        trial = self._trials[trial_id]
        if trial.status is TrialStatus.PAUSED:
            return trial.step == trial.to_step == self.rungs[self._stage]
        return trial.status is not TrialStatus.RUNNING

    def _settle(self) -> None:
        self._promote_early()
        while (
            self._stage < len(self.rungs) - 1
            and self._all_started()
            and all(self._settled(t) for t in self._members)
        ):
            k, early = self._stage, set(self._early)
            paused = [t for t in self._members
                      if t not in early and self._trials[t].status is TrialStatus.PAUSED]
            ranked = sorted(  # stable: among ties the earlier member wins
                (t for t in self._members
                 if t in early or (t in paused and is_number(self._trials[t].value))),
                key=lambda t: sortable(self._rung_values[(k, t)], self.mode),
                reverse=True,
            )
            self._stage += 1
            self._members = ranked[: self.sizes[self._stage]]
            assert early <= set(self._members), "a trial promoted early fell out of the top"
            for trial_id in paused:
                if trial_id not in self._members:
                    self._trials[trial_id].status = TrialStatus.PRUNED
            self._ready += [Job(t, self.rungs[self._stage], bracket=self._bracket)
                            for t in self._members if t not in early]
            self._early = []
            self._promote_early()
