"""What a sweep shows while it runs (``verbose``), as Ray Tune and Optuna users expect: 0
nothing, 1 the live status, 2 also a line per trial event (started, promoted, pruned,
completed, failed, stopped). Unset, a sweep shows its status on a terminal or in a notebook
and keeps quiet otherwise (a test, a pipe, a batch job). The status itself is drawn by
:mod:`tuner._live`; here it is chosen where it goes and fed the controller's snapshots."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, Any

from tuner._errors import ConfigError
from tuner._live import LiveView, LogView, NotebookView, View, duration

Observer = Callable[[dict[str, Any]], None]
VERBOSE_HELP = ("0: silent; 1: the live status; 2: also a line per trial event; None: 1 on a "
                "terminal or in a notebook, else 0")


def check_verbose(value: object) -> int | None:
    """``verbose`` as given, checked (ConfigError on ``verbose``)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)
                         and value in (0, 1, 2)):
        return value
    raise ConfigError("verbose", f"expected 0, 1, 2 or None ({VERBOSE_HELP}); got {value!r}"
                      [:300])


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (a notebook, JupyterLab, VS Code, Colab), not a
    terminal IPython. IPython is only asked if something imported it already."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    if shell is None:
        return False
    return (type(shell).__name__ == "ZMQInteractiveShell"
            or "IPKernelApp" in getattr(shell, "config", {}))


def resolve_verbose(verbose: object, stream: IO[str] | None = None) -> int:
    """The verbosity to run at: ``verbose`` when given, else 1 in a notebook or when
    ``stream`` (default stderr, where the status goes) is a terminal, else 0."""
    chosen = check_verbose(verbose)
    if chosen is not None:
        return chosen
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return 1 if in_notebook() or (callable(isatty) and isatty()) else 0


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_value(v)}" if isinstance(v, float) else f"{k}={v!r}"
                     for k, v in params.items())


class TrialEvents:
    """Lines for what happened to each trial between two snapshots (the snapshot's
    ``by_trial``): started, promoted (headed to a larger step than before), and how it
    ended. A trial seen for the first time already ended gets both lines."""

    _ENDS = ("completed", "pruned", "failed", "stopped")

    def __init__(self) -> None:
        self._state: dict[str, str] = {}
        self._heading: dict[str, int] = {}

    def seed(self, snapshot: dict[str, Any]) -> None:
        """Take the trials of ``snapshot`` as known (a resumed sweep's earlier trials)."""
        for trial_id, t in snapshot.get("by_trial", {}).items():
            self._state[trial_id] = t["state"]
            self._heading[trial_id] = max(t["to_step"] or 0, t["step"])

    def lines(self, snapshot: dict[str, Any]) -> list[str]:
        out: list[str] = []
        at = f"[{duration(snapshot['elapsed_s']):>7}]"   # (as the status line's)
        metric = snapshot.get("metric", "value")
        for trial_id, t in snapshot.get("by_trial", {}).items():
            before = self._state.get(trial_id)
            heading = t["to_step"]
            if before is None:
                out.append(f"{at} {trial_id} started: {_params(t['params'])}")
            elif heading is not None and heading > self._heading.get(trial_id, 0):
                out.append(f"{at} {trial_id} promoted to step {heading}")
            if heading is not None:
                self._heading[trial_id] = max(heading, self._heading.get(trial_id, 0))
            state = t["state"]
            if state in self._ENDS and state != before:
                line = f"{at} {trial_id} {state} at step {t['step']}"
                if state != "failed":
                    line += f": {metric}={_value(t['value'])}"
                if state == "completed" and snapshot.get("best_trial_id") == trial_id:
                    line += " (best so far)"
                out.append(line)
            self._state[trial_id] = state
        return out


class Progress:
    """The controller's observer for a run at ``verbose``: the status view chosen for where
    the sweep runs, trial event lines at 2, and the caller's own ``observer`` besides.
    ``observer`` is None when there is nothing to feed (no snapshot is then made)."""

    def __init__(self, verbose: object, title: str, observer: Observer | None = None,
                 stream: IO[str] | None = None) -> None:
        level = resolve_verbose(verbose, stream)
        self._user = observer
        self._events = TrialEvents() if level >= 2 else None
        self._view: View | None = None
        if level >= 1:
            if in_notebook():
                self._view = NotebookView(title)
            else:
                out = sys.stderr if stream is None else stream
                isatty = getattr(out, "isatty", None)
                if callable(isatty) and isatty():
                    from rich.console import Console

                    self._view = LiveView(title, Console(file=out))
                else:
                    self._view = LogView(out)

    @property
    def observer(self) -> Observer | None:
        return self if (self._view is not None or self._user is not None) else None

    def seed(self, snapshot: dict[str, Any]) -> None:
        """What was there before this run (a resumed sweep's trials): no event lines."""
        if self._events is not None:
            self._events.seed(snapshot)

    def __call__(self, snapshot: dict[str, Any]) -> None:
        if self._view is not None:
            if self._events is not None:
                for text in self._events.lines(snapshot):
                    self._view.line(text)
            self._view.update(snapshot)
        if self._user is not None:
            self._user(snapshot)

    def __enter__(self) -> Progress:
        if self._view is not None:
            self._view.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._view is not None:
            self._view.close()
