"""CSV: what a sweep logged, in plain files any tool reads (no library needed).

In the logger's folder: ``<trial_id>.csv``, a trial's metrics by step (one row a step, in the
order the reports arrived; a metric first reported later widens the file); ``trials.csv``,
one row a trial (its number, state, last step, value, GPU-seconds, dollars and ``params.*``),
rewritten as trials start and end; ``sweep.csv``, the sweep's one row (budgets, state, spend,
best trial and value). Like Ray Tune's ``CSVLoggerCallback`` (``progress.csv`` per trial).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner._hooks import SweepInfo, SweepSummary, TrialInfo
from tuner.loggers._common import folder

TRIAL_COLUMNS = ("trial_id", "number", "state", "step", "value", "gpu_seconds", "cost_usd")


def _write(path: Path, header: list[str], rows: list[Mapping[str, Any]]) -> None:
    """Write the whole file at once (a crash leaves the old file or the new one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, header, restval="")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    if not path.exists():
        return [], []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


class CSVLogger:
    """Write a sweep's CSV files under ``dir`` (default: ``csv/`` inside the experiment
    directory)."""

    name = "csv"

    def __init__(self, dir: str | None = None, *, experiment_dir: Path | None = None) -> None:
        self.dir = folder(dir, experiment_dir, "csv", "loggers.csv")
        self.headers: dict[str, list[str]] = {}        # each trial file's columns
        self.trials: dict[str, dict[str, Any]] = {}    # trials.csv's rows
        self.sweep: dict[str, Any] = {}

    def on_sweep_start(self, sweep: SweepInfo) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        # A resumed sweep: what its earlier runs wrote is kept.
        _, rows = _read(self.dir / "trials.csv")
        self.trials = {row["trial_id"]: dict(row) for row in rows}
        self.sweep = {"experiment": sweep.experiment_id, "name": sweep.name,
                      "metric": sweep.metric, "mode": sweep.mode, "state": "running",
                      "time_budget_s": sweep.time_budget_s,
                      "cost_budget_usd": sweep.cost_budget_usd}
        _write(self.dir / "sweep.csv", list(self.sweep), [self.sweep])

    def _trial_row(self, trial: TrialInfo, **fields: Any) -> None:
        row = self.trials.setdefault(trial.trial_id, {"state": "running"})
        row.update(trial_id=trial.trial_id, number=trial.number, step=trial.step,
                   value=trial.value, **fields)
        row.update({f"params.{k}": v for k, v in trial.params.items()})
        header = list(TRIAL_COLUMNS)
        for r in self.trials.values():
            header += [k for k in r if k not in header]
        _write(self.dir / "trials.csv", header, list(self.trials.values()))

    def on_trial_start(self, trial: TrialInfo) -> None:
        self._trial_row(trial, state="running")

    def on_result(self, trial: TrialInfo, step: int, metrics: Mapping[str, float]) -> None:
        path = self.dir / f"{trial.trial_id}.csv"
        header = self.headers.get(trial.trial_id)
        if header is None:
            header = self.headers[trial.trial_id] = _read(path)[0] or ["step"]
        row = {"step": step, **metrics}
        if any(k not in header for k in row):
            # A new metric: the file is written again with a wider header.
            header += [k for k in row if k not in header]
            _write(path, header, [*_read(path)[1], row])
            return
        with path.open("a", newline="") as f:
            writer = csv.DictWriter(f, header, restval="")
            if f.tell() == 0:
                writer.writeheader()
            writer.writerow(row)

    def on_trial_end(self, trial: TrialInfo, state: str, gpu_s: float, usd: float) -> None:
        self._trial_row(trial, state=state, gpu_seconds=gpu_s, cost_usd=usd)

    def on_sweep_end(self, summary: SweepSummary) -> None:
        self.sweep.update(
            state=summary.state, reason=summary.reason, spend_usd=summary.spend_usd,
            wall_s=summary.wall_s, time_budget_s=summary.time_budget_s,
            cost_budget_usd=summary.cost_budget_usd, best_trial_id=summary.best_trial_id,
            best_value=summary.best_value, message=summary.message,
            **{f"trials_{k}": v for k, v in summary.trials.items()})
        _write(self.dir / "sweep.csv", list(self.sweep), [self.sweep])
