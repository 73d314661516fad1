"""The live status of a running sweep: trials by state, best so far, spend and time against
the budgets, drawn by one renderer (:func:`render`, a rich table) wherever the sweep runs from:
a terminal (a rich Live panel on stderr), a notebook (one output refreshed in place, without
widgets) or a log (a line now and then), each fed the controller's snapshots."""

from __future__ import annotations

import html
import io
import time
from typing import IO, Any, Protocol

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text


def _bar(used: float, total: float | None, unit: str) -> str:
    if not total:
        return f"{used:.2f}{unit}"
    frac = min(1.0, used / total)
    filled = int(frac * 20)
    return f"[{'#' * filled}{'.' * (20 - filled)}] {used:.2f}/{total:.2f}{unit}"


def duration(seconds: float) -> str:
    """``seconds`` as people read it: ``42s``, ``3m 05s``, ``2h 01m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def _time_left(snapshot: dict[str, Any]) -> str:
    budget = snapshot["time_budget_s"]
    if not budget:
        return "no time budget"
    return f"{duration(budget - snapshot['elapsed_s'])} left"


def _trials(snapshot: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {state}" for state, n in sorted(snapshot["trials"].items()))
    return f"{snapshot['total']} started" + (f": {counts}" if counts else "")


def _best(snapshot: dict[str, Any]) -> str:
    best = snapshot["best_value"]
    return "-" if best is None else f"{best:.4f} ({snapshot['best_trial_id']})"


def render(snapshot: dict[str, Any], title: str) -> Table:
    """The status table of one controller snapshot (``Controller.snapshot``)."""
    table = Table(title=title, show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    metric = snapshot.get("metric")
    rows = [
        ("trials", _trials(snapshot)),
        (f"best {metric}" if metric else "best", _best(snapshot)),
        ("spend", _bar(snapshot["spend_usd"], snapshot["cost_budget_usd"], " USD")),
        ("time", _bar(snapshot["elapsed_s"], snapshot["time_budget_s"], " s")
         + f" ({_time_left(snapshot)})"),
        ("workers", f"{snapshot['workers']} ready, "
                    f"{snapshot['running_segments']} segments running"),
    ]
    for name, value in rows:   # (as text: a bar's brackets are not markup)
        table.add_row(Text(name), Text(value))
    return table


def status_line(snapshot: dict[str, Any]) -> str:
    """The same status on one line, for a log."""
    budget = snapshot["cost_budget_usd"]
    spend = f"{snapshot['spend_usd']:.2f}" + (f"/{budget:.2f}" if budget else "") + " USD"
    return (f"[{duration(snapshot['elapsed_s']):>7}] trials {_trials(snapshot)}; best "
            f"{_best(snapshot)}; spend {spend}; {_time_left(snapshot)}")


class View(Protocol):
    """Where the status goes: ``update`` with each snapshot, ``line`` for a trial event."""

    def start(self) -> None: ...

    def update(self, snapshot: dict[str, Any]) -> None: ...

    def line(self, text: str) -> None: ...

    def close(self) -> None: ...


class LiveView:
    """A rich Live panel on stderr (a terminal), trial events printed above it."""

    def __init__(self, title: str, console: Console | None = None) -> None:
        self._title = title
        self._live = Live(console=console or Console(stderr=True), refresh_per_second=4,
                          transient=False)
        self._started = False

    def start(self) -> None:
        self._live.start()
        self._started = True

    def __enter__(self) -> LiveView:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, snapshot: dict[str, Any]) -> None:
        self._live.update(render(snapshot, self._title))

    def line(self, text: str) -> None:
        self._live.console.print(text, highlight=False, markup=False)

    def close(self) -> None:
        if self._started:
            self._started = False
            self._live.stop()


class _Every:
    """True at most once per ``seconds`` of wall time (a simulated sweep snapshots far more
    often than anyone reads)."""

    def __init__(self, seconds: float) -> None:
        self._seconds, self._last = seconds, -float("inf")

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self._last < self._seconds:
            return False
        self._last = now
        return True


class NotebookView:
    """One output of a notebook cell, replaced in place (``IPython.display`` with a
    ``display_id``): HTML for Jupyter, text for a plain front end; no widgets needed."""

    def __init__(self, title: str, every_s: float = 0.5) -> None:
        self._title = title
        self._due = _Every(every_s)
        self._handle: Any = None
        self._last: dict[str, Any] | None = None
        self._shown: dict[str, Any] | None = None

    def _bundle(self, snapshot: dict[str, Any] | None) -> dict[str, str]:
        if snapshot is None:
            return {"text/plain": f"{self._title}: starting"}
        # (force_jupyter=False: in a kernel rich would display the table itself)
        console = Console(file=io.StringIO(), record=True, width=100, color_system=None,
                          force_jupyter=False)
        console.print(render(snapshot, self._title))
        text = console.export_text()
        return {"text/plain": text,
                "text/html": f"<pre style='white-space: pre'>{html.escape(text)}</pre>"}

    def start(self) -> None:
        from IPython.display import display

        self._handle = display(self._bundle(None), raw=True, display_id=True)

    def update(self, snapshot: dict[str, Any]) -> None:
        self._last = snapshot
        if self._handle is not None and self._due():
            self._show()

    def _show(self) -> None:
        self._shown = self._last
        self._handle.update(self._bundle(self._last), raw=True)

    def line(self, text: str) -> None:
        print(text, flush=True)

    def close(self) -> None:
        if self._handle is not None and self._last is not self._shown:
            self._show()      # the last snapshot, whenever it came


class LogView:
    """A line now and then on ``stream`` (a log file, a pipe): where a live panel cannot
    redraw itself."""

    def __init__(self, stream: IO[str], every_s: float = 30.0) -> None:
        self._stream = stream
        self._due = _Every(every_s)
        self._last: dict[str, Any] | None = None
        self._shown: dict[str, Any] | None = None

    def start(self) -> None:
        return None

    def update(self, snapshot: dict[str, Any]) -> None:
        self._last = snapshot
        if self._due():
            self._show()

    def _show(self) -> None:
        assert self._last is not None
        self._shown = self._last
        self.line(status_line(self._last))

    def line(self, text: str) -> None:
        print(text, file=self._stream, flush=True)

    def close(self) -> None:
        if self._last is not None and self._last is not self._shown:
            self._show()
