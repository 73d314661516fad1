"""The live view of ``elastune run``: trials by state, best value, spend and time vs budget."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table


def _bar(used: float, total: float | None, unit: str) -> str:
    if not total:
        return f"{used:.2f}{unit}"
    frac = min(1.0, used / total)
    filled = int(frac * 20)
    return f"[{'#' * filled}{'.' * (20 - filled)}] {used:.2f}/{total:.2f}{unit}"


def render(snapshot: dict[str, Any], title: str) -> Table:
    table = Table(title=title, show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    counts = snapshot["trials"]
    table.add_row("trials", f"{snapshot['total']} started: " + ", ".join(
        f"{n} {state}" for state, n in sorted(counts.items())))
    best = snapshot["best_value"]
    table.add_row("best", "-" if best is None else f"{best:.4f} ({snapshot['best_trial_id']})")
    table.add_row("spend", _bar(snapshot["spend_usd"], snapshot["cost_budget_usd"], " USD"))
    table.add_row("time", _bar(snapshot["elapsed_s"], snapshot["time_budget_s"], " s"))
    table.add_row("workers", f"{snapshot['workers']} ready, "
                             f"{snapshot['running_segments']} segments running")
    return table


class LiveView:
    """A rich Live panel on stderr, fed by the controller's snapshots."""

    def __init__(self, title: str) -> None:
        self._title = title
        self._live = Live(console=Console(stderr=True), refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(*exc)  # type: ignore[arg-type]

    def update(self, snapshot: dict[str, Any]) -> None:
        self._live.update(render(snapshot, self._title))
