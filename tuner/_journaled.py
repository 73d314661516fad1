"""The scheduler as the controller calls it: every call that changes its state and the journal
entry a resumed sweep replays it from are one operation (see :mod:`tuner._journal`).

Capabilities beyond :class:`tuner.schedulers.Scheduler` are checked once, here: ``staged`` is
the scheduler when it is synchronous successive halving, ``rungs`` its ladder when it has one,
``bracketed`` the scheduler when it can start another bracket, ``admitting`` when it can admit
more trials while trials still run (None otherwise).
"""

from __future__ import annotations

from tuner._store import Store
from tuner.schedulers import (
    Admitting,
    Bracketed,
    Job,
    Laddered,
    Scheduler,
    Staged,
    TrialStatus,
)


class JournaledScheduler:
    def __init__(self, scheduler: Scheduler, store: Store) -> None:
        self.inner = scheduler
        self.store = store
        self.staged: Staged | None = scheduler if isinstance(scheduler, Staged) else None
        self._laddered: Laddered | None = (scheduler if isinstance(scheduler, Laddered)
                                           else None)
        self.bracketed: Bracketed | None = (scheduler if isinstance(scheduler, Bracketed)
                                            else None)
        self.admitting: Admitting | None = (scheduler if isinstance(scheduler, Admitting)
                                            else None)
        self.early_promotion = bool(self.staged is not None and self.staged.early_promotion)

    # -- reads ------------------------------------------------------------------------------
    @property
    def rungs(self) -> list[int] | None:
        return self._laddered.rungs if self._laddered is not None else None

    def status(self, trial_id: str) -> TrialStatus:
        return self.inner.status(trial_id)

    def is_finished(self) -> bool:
        return self.inner.is_finished()

    @property
    def max_resource(self) -> int:
        return self.inner.max_resource

    @property
    def total_trials(self) -> int:
        return self.inner.total_trials

    @property
    def stage(self) -> int:
        """The stage a synchronous halving is handing out (0 for other schedulers)."""
        return self.staged.stage if self.staged is not None else 0

    def stage_of(self, step: int) -> int:
        return self.inner.stage_of(step)

    def rung_index(self, step: int) -> int | None:
        """Which rung of the ladder ``step`` is (None: not a rung, or no ladder)."""
        rungs = self.rungs
        return rungs.index(step) if rungs and step in rungs else None

    # -- calls, each journaled ----------------------------------------------------------------
    def next_job(self, new_trial_id: str) -> Job | None:
        """The next job (journaled; the caller writes the trial it samples for a new one in
        the same transaction, so a replayed job always has its trial)."""
        job = self.inner.next_job(new_trial_id)
        if job is not None:
            self.store.journal_add("job", job.trial_id, job.to_step, bracket=job.bracket,
                                   flag=job.new)
        return job

    def on_rung(self, trial_id: str, step: int, value: float | None) -> None:
        self.store.journal_add("rung", trial_id, step, value)
        self.inner.on_rung(trial_id, step, value)

    def on_trial_end(self, trial_id: str, step: int, value: float | None,
                     failed: bool) -> None:
        self.store.journal_add("end", trial_id, step, value, flag=failed)
        self.inner.on_trial_end(trial_id, step, value, failed=failed)

    def on_job_lost(self, trial_id: str) -> None:
        self.store.journal_add("lost", trial_id)
        self.inner.on_job_lost(trial_id)

    def close_admission(self) -> None:
        self.store.journal_add("close", "*")
        self.inner.close_admission()

    def decide_stage(self) -> list[str]:
        """Decide a synchronous stage without its stragglers; returns those cut."""
        assert self.staged is not None
        self.store.journal_add("decide", "*")
        return self.staged.decide_stage()

    def hand_out_first(self, trial_id: str) -> None:
        """Hand ``trial_id``'s queued promotion out before the others (journaled)."""
        assert self.staged is not None
        self.store.journal_add("first", trial_id)
        self.staged.hand_out_first(trial_id)

    def resize_stage(self, stage: int, trials: int) -> None:
        """Promote ``trials`` into ``stage``: fewer than successive halving would (a limit)
        or more (a widening); journaled only when the sizes changed."""
        assert self.staged is not None
        before = list(self.staged.sizes)
        more = trials > self.staged.natural_sizes[stage]
        (self.staged.widen_stage if more else self.staged.limit_stage)(stage, trials)
        if self.staged.sizes != before:
            self.store.journal_add("widen" if more else "promote", "*", trials, bracket=stage)

    def new_bracket(self, num_trials: int) -> None:
        """Start another bracket of ``num_trials`` (journaled first: write-ahead)."""
        assert self.bracketed is not None
        self.store.journal_add("bracket", "*", num_trials)
        self.bracketed.new_bracket(num_trials)

    def admit_more(self, num_trials: int) -> None:
        """Admit ``num_trials`` more trials while trials still run (journaled first:
        write-ahead)."""
        assert self.admitting is not None
        self.store.journal_add("admit", "*", num_trials)
        self.admitting.admit_more(num_trials)

    def limit_admission(self, num_trials: int) -> None:
        """The controller's own entry: a re-plan admits at most ``num_trials`` trials in the
        bracket under way (the scheduler is not told; the controller closes admission)."""
        self.store.journal_add("limit", "*", num_trials)

    def finalize(self) -> None:
        self.inner.finalize()
