"""The states of trials, segments and experiments, and why a sweep ended.

String enums: a member equals its text and ``json.dumps`` writes the text, so the store, the
``--json`` status document, the dashboard and the worker's events keep the words they had.
"""

from __future__ import annotations

from enum import StrEnum


class TrialState(StrEnum):
    """Where a trial stands (the ``trials`` table's ``state``)."""

    RUNNING = "running"        # a segment of it is in flight, or its job waits for a slot
    PAUSED = "paused"          # waiting at a rung for a promotion decision, or to be re-run
    COMPLETED = "completed"    # reached the top rung, or its trainable ended it
    PRUNED = "pruned"          # stopped at a rung by successive halving
    FAILED = "failed"          # its trainable raised, more often than max_failures allows
    STOPPED = "stopped"        # the sweep ended (deadline, budget, stop) while it had work left


class SegmentState(StrEnum):
    """Where a segment stands (the ``segments`` table's ``state``); the five from ``DONE`` to
    ``LOST`` are also what a worker's ``finished`` event says."""

    SUBMITTED = "submitted"    # sent to a worker's queue, not started yet
    RUNNING = "running"        # a worker runs it
    DONE = "done"              # reached its stop step: the trial's value there counts at the rung
    ENDED = "ended"            # the trainable returned before the stop step: the trial is complete
    STOPPED = "stopped"        # asked to stop (deadline, budget, widening): checkpointed, kept
    FAILED = "failed"          # the trainable raised or timed out: counts against max_failures
    LOST = "lost"              # its worker died: re-run from the trial's last checkpoint, not
    #                            the trainable's fault
    PREEMPTED = "preempted"    # the cloud took its spot VM back: re-run from the last checkpoint
    STALE = "stale"            # its worker's heartbeat lapsed: re-run elsewhere, VM replaced



class ExperimentState(StrEnum):
    """Where a sweep stands (the status document's ``state``)."""

    RUNNING = "running"        # its controller runs (or died without ending it)
    FINISHED = "finished"      # ended at its deadline, its budget, or with all its work done
    STOPPED = "stopped"        # stopped by ``elastune stop`` or Ctrl-C
    FAILED = "failed"          # cannot succeed: ``message`` says why


class EndReason(StrEnum):
    """Why a sweep's run ended (the controller's ``Outcome.reason``; the store's ``message``
    when the sweep did not fail)."""

    DONE = "done"              # every trial ran as far as the scheduler wanted
    DEADLINE = "deadline"      # the time budget ran out
    BUDGET = "budget"          # the cost budget would have been passed
    REQUESTED = "requested"    # ``elastune stop``
    INTERRUPTED = "interrupted"  # Ctrl-C
    ERROR = "error"            # the controller raised
    STORAGE = "storage"        # the checkpoint storage is full
    METRIC = "metric"          # a report without the sweep's metric
    FAILURES = "failures"      # its trials failed and none produced a value
