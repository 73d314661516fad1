"""What the controller tells experiment trackers (a sweep's ``loggers``), and the one place
that tells them.

:class:`SweepCallback` is the protocol a tracker implements (as Ray Tune's
``LoggerCallback``: a trial starts, reports, ends; the sweep starts and ends). :class:`Hooks` is
what the controller calls: it logs each (trial, step) once (a re-run segment reports again the
steps after its trial's last checkpoint, and a resumed sweep the steps its crashed run had
logged) and hands each event to every tracker on a thread of their own, so that a tracker
that waits on a slow or absent server never holds up the loop that keeps the sweep within its
budgets. A tracker that raises does not lose the sweep: a warning names the tracker and the
error, the tracker gets no more events, and the error is kept in the store
(``logger_errors`` in ``elastune status --json``). Ray Tune logs such an error and goes on too.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from worker.records import TrialState

if TYPE_CHECKING:
    from tuner._store import Store
    from tuner._sweep_state import TrialRecord

log = logging.getLogger(__name__)

LOGGER_ERRORS = "logger_errors"   # the store's meta key: {tracker name: its error}
# A trial's run ends for good in these states (a stopped or paused one may go on after a
# resume, and its run with it).
FINAL = frozenset({TrialState.COMPLETED, TrialState.PRUNED, TrialState.FAILED})
# How long the end of a sweep waits for its trackers to log what they have left.
DRAIN_S = 300.0


@dataclass(frozen=True)
class SweepInfo:
    """The sweep a tracker logs: its identity, objective, budgets and stored configuration."""

    experiment_id: str
    name: str
    metric: str
    mode: str
    time_budget_s: float | None
    cost_budget_usd: float | None
    config: Mapping[str, Any]                 # the sweep as stored (sweep.yaml's keys)
    experiment_dir: Path | None               # None: a simulation that keeps no folder


@dataclass(frozen=True)
class TrialInfo:
    """A trial as the controller knows it now."""

    trial_id: str
    number: int
    params: Mapping[str, Any]
    bracket: int = 0
    step: int = 0                             # last step a finished segment reached
    value: float | None = None                # the sweep's metric at ``step``


@dataclass(frozen=True)
class SweepSummary:
    """How a run of the sweep ended (what ``elastune status`` says of it)."""

    state: str                                # finished | stopped | failed
    reason: str                               # done | deadline | budget | ...
    message: str | None
    spend_usd: float
    wall_s: float
    time_budget_s: float | None
    cost_budget_usd: float | None
    best_trial_id: str | None
    best_value: float | None
    best_params: Mapping[str, Any] | None
    trials: Mapping[str, int] = field(default_factory=dict)   # trials by state


@runtime_checkable
class SweepCallback(Protocol):
    """An experiment tracker: called by the controller, on its thread, as the sweep goes.

    ``on_trial_end`` comes once a trial is completed, pruned or failed, and at the end of
    the sweep's run for each trial still open (stopped, paused); a trial the sweep takes up
    again later (a resume, a promotion) reports again, so a tracker re-opens its run when
    asked to log for a trial it has ended. ``on_result`` gets the finite numbers a trial
    reported at ``step``, each (trial, step) once, not always in step order."""

    name: str

    def on_sweep_start(self, sweep: SweepInfo) -> None: ...

    def on_trial_start(self, trial: TrialInfo) -> None: ...

    def on_result(self, trial: TrialInfo, step: int, metrics: Mapping[str, float]) -> None: ...

    def on_trial_end(self, trial: TrialInfo, state: str, gpu_s: float, usd: float) -> None: ...

    def on_sweep_end(self, summary: SweepSummary) -> None: ...


def trial_info(trial: TrialRecord) -> TrialInfo:
    return TrialInfo(trial.trial_id, trial.number, dict(trial.params), trial.bracket,
                     trial.step, trial.value)


def numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a report (trackers keep numbers; a bool or a string is not one)."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}


class Hooks:
    """The controller's trackers, each event handed to each; with none, every call returns at
    once (a sweep without ``loggers`` pays nothing)."""

    def __init__(self, callbacks: Sequence[SweepCallback] = (), store: Store | None = None,
                 sweep: SweepInfo | None = None) -> None:
        self.callbacks = list(callbacks)
        self.store = store
        self.sweep = sweep
        self.errors: dict[str, str] = {}
        self.logged: dict[str, set[int]] = {}    # steps logged per trial
        self.ended: set[str] = set()             # trials whose run has ended
        self.open: set[str] = set()              # trials told of in this run, not ended
        self._queue: queue.SimpleQueue[tuple[str, tuple[Any, ...]] | None] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._recorded = 0                       # errors written to the store
        if self.callbacks and store is not None:
            # What an earlier run of the experiment logged (its reports are in the store, also
            # those of a segment it left in flight, before the restore drops them) and which of
            # its trials ended for good: neither is logged again.
            self.logged = store.reported_steps()
            self.ended = {r["trial_id"] for r in store.trial_rows() if r["state"] in FINAL}
            if store.meta(LOGGER_ERRORS) not in (None, "{}"):
                store.set_meta(LOGGER_ERRORS, "{}")   # this run tries its trackers again

    def _call(self, method: str, *args: Any) -> None:
        """Hand an event to the trackers' thread (started on the first), and record in the
        store any tracker that has failed since the last event."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._deliver, name="elastune-trackers",
                                            daemon=True)
            self._thread.start()
        self._queue.put((method, args))
        self._record_errors()

    def _deliver(self) -> None:
        """The trackers' thread: each event to each tracker still working, in order."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            method, args = item
            for cb in self.callbacks:
                if cb.name in self.errors:
                    continue
                try:
                    getattr(cb, method)(*args)
                except Exception as exc:   # a tracker must not lose the sweep
                    why = f"{type(exc).__name__}: {exc}"[:500]
                    self.errors[cb.name] = why
                    log.warning("the %s logger failed in %s (%s): it logs nothing more of "
                                "this run of the sweep, which goes on", cb.name, method, why)

    def _record_errors(self) -> None:
        if self.store is None or len(self.errors) == self._recorded:
            return
        errors = dict(self.errors)
        self._recorded = len(errors)
        try:
            self.store.set_meta(LOGGER_ERRORS, json.dumps(errors))
        except Exception:   # (the store's own trouble is the controller's to report)
            log.exception("could not record the trackers' errors: %s", errors)

    # -- what the controller calls ----------------------------------------------------------
    def sweep_started(self) -> None:
        if self.callbacks and self.sweep is not None:
            self._call("on_sweep_start", self.sweep)

    def trial_started(self, trial: TrialRecord) -> None:
        if not self.callbacks:
            return
        self.open.add(trial.trial_id)
        self.ended.discard(trial.trial_id)
        self._call("on_trial_start", trial_info(trial))

    def result(self, trial: TrialRecord, step: int, metrics: Mapping[str, Any]) -> None:
        if not self.callbacks:
            return
        steps = self.logged.setdefault(trial.trial_id, set())
        if step in steps:
            return
        steps.add(step)
        self.open.add(trial.trial_id)
        self.ended.discard(trial.trial_id)
        self._call("on_result", trial_info(trial), step, numbers(metrics))

    def trial_state(self, trial: TrialRecord, state: TrialState) -> None:
        """A trial's state was set: its run ends when the state is final."""
        if not self.callbacks or state not in FINAL or trial.trial_id in self.ended:
            return
        self._end(trial, state)

    def _end(self, trial: TrialRecord, state: TrialState) -> None:
        self.ended.add(trial.trial_id)
        self.open.discard(trial.trial_id)
        row = (self.store.trial(trial.trial_id) if self.store is not None else None) or {}
        self._call("on_trial_end", trial_info(trial), str(state),
                   float(row.get("gpu_seconds") or 0.0), float(row.get("cost_usd") or 0.0))

    def sweep_ended(self, trials: Iterable[TrialRecord], summary: SweepSummary) -> None:
        """The sweep's run ended: the runs of trials still open end too (with their state
        now: stopped or paused), then the sweep's; waits for the trackers to log it all (at
        most ``DRAIN_S``: the sweep has stopped its instances, so the wait costs no money)."""
        if not self.callbacks:
            return
        for trial in trials:
            if trial.trial_id in self.open:
                self._end(trial, trial.state)
        self._call("on_sweep_end", summary)
        self._queue.put(None)
        assert self._thread is not None
        self._thread.join(DRAIN_S)
        if self._thread.is_alive():
            for cb in self.callbacks:
                self.errors.setdefault(cb.name, f"still logging {DRAIN_S:.0f} s after the "
                                                "sweep ended: what it had left is not logged")
            log.warning("the trackers were still logging %.0f s after the sweep ended; the "
                        "sweep returns without waiting for them", DRAIN_S)
        self._record_errors()
