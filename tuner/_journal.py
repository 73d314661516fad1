"""Replay the scheduler journal: rebuild a scheduler's state after a restart.

The controller writes every call that changes its scheduler's state to the store (a job it
committed, a rung reached, a trial that ended, a job lost, admission closed, a stage decided
early, a stage's promotions limited or widened or one handed out first, a new bracket
started, more trials admitted while trials still run) in order.
Schedulers are pure and deterministic, so the same calls in the same order into a fresh
scheduler rebuild the same rungs, promotions and brackets; each replayed job is checked against
the journal, and a mismatch (a journal from another scheduler or another version) is an error,
not a guess.
Event sourcing rather than per-scheduler snapshots: one mechanism for ASHA, SHA and Hyperband,
through their public interface only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tuner.schedulers import Scheduler

# Journal kinds that resize a stage's promotions: the scheduler method each replays, and
# what it does (for the error when the scheduler has none).
_RESIZES = {"promote": ("limit_stage", "limit"), "widen": ("widen_stage", "widen")}


class RestoreError(RuntimeError):
    """The journal does not replay into this scheduler (the message says where it diverged)."""


def replay(scheduler: Scheduler, entries: Iterable[Mapping[str, Any]]) -> int:
    """Feed ``entries`` (``Store.journal()`` rows) to ``scheduler``; returns how many. A call
    the scheduler refuses (ValueError: e.g. a promotion to hand out first that a scheduler of
    other sizes has not queued) is a RestoreError too."""
    n = 0
    for n, e in enumerate(entries, start=1):
        try:
            _apply(scheduler, n, e)
        except ValueError as exc:
            raise RestoreError(f"journal entry {n}: {type(scheduler).__name__} refuses "
                               f"{e['kind']!r} of {e['trial_id']!r}: {exc}") from None
    return n


def _apply(scheduler: Scheduler, n: int, e: Mapping[str, Any]) -> None:
    """Replay journal entry ``n``, ``e``, into ``scheduler``."""
    kind, trial_id = e["kind"], e["trial_id"]
    if kind == "job":
        job = scheduler.next_job(trial_id)
        got = None if job is None else (job.trial_id, job.to_step, job.bracket, job.new)
        want = (trial_id, e["step"], e["bracket"], bool(e["flag"]))
        if got != want:
            raise RestoreError(f"journal entry {n}: the scheduler offers {got}, the journal "
                               f"recorded {want}")
    elif kind == "rung":
        scheduler.on_rung(trial_id, e["step"], e["value"])
    elif kind == "end":
        scheduler.on_trial_end(trial_id, e["step"], e["value"], failed=bool(e["flag"]))
    elif kind == "lost":
        scheduler.on_job_lost(trial_id)
    elif kind == "close":
        scheduler.close_admission()
    elif kind == "decide":
        decide = getattr(scheduler, "decide_stage", None)
        if decide is None:
            raise RestoreError(f"journal entry {n}: {type(scheduler).__name__} cannot "
                               "decide a stage early")
        decide()
    elif kind == "first":
        first = getattr(scheduler, "hand_out_first", None)
        if first is None:
            raise RestoreError(f"journal entry {n}: {type(scheduler).__name__} cannot "
                               "order a stage's jobs")
        first(trial_id)
    elif kind in _RESIZES:
        name, verb = _RESIZES[kind]
        resize = getattr(scheduler, name, None)
        if resize is None:
            raise RestoreError(f"journal entry {n}: {type(scheduler).__name__} cannot "
                               f"{verb} a stage's promotions")
        resize(int(e["bracket"]), int(e["step"]))
    elif kind == "bracket":
        start = getattr(scheduler, "new_bracket", None)
        if start is None:
            raise RestoreError(f"journal entry {n}: {type(scheduler).__name__} cannot "
                               "start a new bracket")
        start(int(e["step"]))
    elif kind == "admit":
        admit = getattr(scheduler, "admit_more", None)
        if admit is None:
            raise RestoreError(f"journal entry {n}: {type(scheduler).__name__} cannot "
                               "admit more trials while trials run")
        admit(int(e["step"]))
    elif kind == "limit":
        pass  # the controller's: a re-plan admits no more than ``step`` trials
    else:
        raise RestoreError(f"journal entry {n}: unknown kind {kind!r}")
