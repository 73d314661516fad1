"""MLflow: one run per trial, nested under one run for the sweep (the ``mlflow.parentRunId``
tag MLflow's UI groups by), in a tracking store on disk or on a server.

Like Ray Tune's ``MLflowLoggerCallback``: a trial's params are logged when it starts, its
metrics by step as they arrive, and its run ends FINISHED (completed, pruned), FAILED, or
KILLED (stopped or paused when the sweep ended: a resume re-opens it).
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tuner._hooks import SweepInfo, SweepSummary, TrialInfo
from tuner.loggers._common import folder, param_value, sweep_params
from tuner.loggers._runs import RunIds

_STATUS = {"completed": "FINISHED", "pruned": "FINISHED", "failed": "FAILED"}
_SWEEP_STATUS = {"finished": "FINISHED", "failed": "FAILED"}
_BAD_KEY = re.compile(r"[^\w\-. /]")   # what MLflow refuses in a metric or param name
_MAX_PARAM = 6000                       # MLflow's longest param value


def _answers(uri: str, timeout_s: float = 10.0) -> None:
    """Raise at once when a tracking server does not take connections (MLflow's client
    would retry for many minutes first)."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"the MLflow tracking server {uri} does not answer: "
                              f"{exc}") from None


def _key(name: str) -> str:
    return _BAD_KEY.sub("_", name)[:250]


class MLflowLogger:
    """Log a sweep to MLflow. ``tracking_uri``: default ``MLFLOW_TRACKING_URI``, else a
    SQLite store in ``mlflow/`` inside the experiment directory; ``experiment_name``: default
    the sweep's name; ``tags``: set on every run."""

    name = "mlflow"

    def __init__(self, tracking_uri: str | None = None, experiment_name: str | None = None,
                 tags: Mapping[str, str] | None = None, *,
                 experiment_dir: Path | None = None) -> None:
        self.tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
        self.experiment_name = experiment_name
        self.tags = dict(tags or {})
        self.experiment_dir = experiment_dir
        self.artifacts: Path | None = None
        if self.tracking_uri is None:
            where = folder(None, experiment_dir, "mlflow", "loggers.mlflow")
            self.tracking_uri = f"sqlite:///{where.resolve() / 'mlflow.db'}"
            self.artifacts = where.resolve() / "artifacts"
        self.runs: dict[str, str] = {}     # trial id (or "sweep") -> its open run
        self.client: Any = None

    # -- runs ---------------------------------------------------------------------------------
    def _open(self, key: str, name: str, tags: dict[str, str],
              params: Mapping[str, Any]) -> str:
        """The run of ``key``: open already, re-opened from the stored id, or new."""
        if key in self.runs:
            return self.runs[key]
        from mlflow.entities import Param, RunStatus

        stored = self.ids.get(key)
        if stored is not None:
            self.client.update_run(stored, status=RunStatus.to_string(RunStatus.RUNNING))
            self.runs[key] = stored
            return stored
        run = self.client.create_run(self.experiment_id, run_name=name,
                                     tags={**self.tags, **tags})
        run_id = str(run.info.run_id)
        self.ids.set(key, run_id)
        self.runs[key] = run_id
        batch = [Param(_key(k), str(param_value(v))[:_MAX_PARAM]) for k, v in params.items()]
        for i in range(0, len(batch), 100):   # (MLflow takes 100 params a call)
            self.client.log_batch(run_id, params=batch[i:i + 100])
        return run_id

    def _trial_run(self, trial: TrialInfo) -> str:
        return self._open(trial.trial_id, trial.trial_id, {
            "mlflow.parentRunId": self.runs["sweep"], "elastune.experiment": self.sweep_id,
            "elastune.trial_id": trial.trial_id, "elastune.kind": "trial"}, trial.params)

    def _metrics(self, run_id: str, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(_key(k), float(v), now, step) for k, v in metrics.items()]
        for i in range(0, len(batch), 1000):   # (MLflow takes 1000 metrics a call)
            self.client.log_batch(run_id, metrics=batch[i:i + 1000])

    # -- hooks --------------------------------------------------------------------------------
    def on_sweep_start(self, sweep: SweepInfo) -> None:
        _answers(str(self.tracking_uri))
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        name = self.experiment_name or sweep.name
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            self.experiment_id = found.experiment_id
        else:
            location = None if self.artifacts is None else self.artifacts.as_uri()
            self.experiment_id = self.client.create_experiment(name,
                                                               artifact_location=location)
        self.sweep_id = sweep.experiment_id
        self.ids = RunIds(sweep, f"mlflow {self.tracking_uri} {name}")
        self.run_index = int(self.ids.get("runs") or 0)
        self.ids.set("runs", str(self.run_index + 1))
        parent = self._open("sweep", sweep.experiment_id, {
            "elastune.experiment": sweep.experiment_id, "elastune.kind": "sweep"},
            sweep_params(sweep))
        budgets = {"time_budget_s": sweep.time_budget_s,
                   "cost_budget_usd": sweep.cost_budget_usd}
        # Budgets as metrics, one value a run of the sweep: a resume may give larger ones.
        self._metrics(parent, {k: v for k, v in budgets.items() if v is not None},
                      self.run_index)

    def on_trial_start(self, trial: TrialInfo) -> None:
        self._trial_run(trial)

    def on_result(self, trial: TrialInfo, step: int, metrics: Mapping[str, float]) -> None:
        self._metrics(self._trial_run(trial), metrics, step)

    def on_trial_end(self, trial: TrialInfo, state: str, gpu_s: float, usd: float) -> None:
        run_id = self._trial_run(trial)
        self._metrics(run_id, {"gpu_seconds": gpu_s, "cost_usd": usd}, trial.step)
        self.client.set_tag(run_id, "elastune.state", state)
        self.client.set_terminated(run_id, _STATUS.get(state, "KILLED"))
        self.runs.pop(trial.trial_id, None)

    def on_sweep_end(self, summary: SweepSummary) -> None:
        parent = self.runs["sweep"]
        end = {"spend_usd": summary.spend_usd, "wall_s": summary.wall_s,
               **{f"trials_{k}": float(v) for k, v in summary.trials.items()}}
        if summary.best_value is not None:
            end["best_value"] = summary.best_value
        self._metrics(parent, end, self.run_index)
        for tag, value in (("elastune.state", summary.state),
                           ("elastune.reason", summary.reason),
                           ("elastune.best_trial_id", summary.best_trial_id),
                           ("elastune.best_run_id", self.ids.get(summary.best_trial_id or "")),
                           ("elastune.message", summary.message)):
            if value is not None:
                self.client.set_tag(parent, tag, str(value)[:5000])
        for key in [k for k in self.runs if k != "sweep"]:   # (ended by the hooks already)
            self.client.set_terminated(self.runs.pop(key), "KILLED")
        self.client.set_terminated(parent, _SWEEP_STATUS.get(summary.state, "KILLED"))
        self.runs.clear()
