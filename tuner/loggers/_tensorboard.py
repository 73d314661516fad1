"""TensorBoard: event files, one folder per trial (``t0001/``) and one for the sweep
(``sweep/``), written with tensorboardX (a small writer; TensorBoard itself only reads them).

Like Ray Tune's ``TBXLoggerCallback``: each reported metric is a scalar at the trial's step,
and a trial's params go to the HPARAMS tab with its final value when it ends.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner._hooks import SweepInfo, SweepSummary, TrialInfo
from tuner.loggers._common import folder, param_value
from tuner.loggers._runs import RunIds

# Writers open at once (each holds a file and a thread): an ASHA sweep keeps many trials
# paused; the least recently written is closed, and re-opened (a new event file in the same
# folder, which TensorBoard reads as one run) when its trial goes on.
MAX_OPEN = 32


class TensorBoardLogger:
    """Write a sweep's event files under ``dir`` (default: ``tensorboard/`` inside the
    experiment directory)."""

    name = "tensorboard"

    def __init__(self, dir: str | None = None, *, experiment_dir: Path | None = None) -> None:
        self.dir = folder(dir, experiment_dir, "tensorboard", "loggers.tensorboard")
        self.writers: OrderedDict[str, Any] = OrderedDict()
        self.metric = ""
        self.run_index = 0

    def _writer(self, key: str) -> Any:
        writer = self.writers.get(key)
        if writer is None:
            from tensorboardX import SummaryWriter

            writer = SummaryWriter(logdir=str(self.dir / key), flush_secs=10)
            self.writers[key] = writer
            while len(self.writers) > MAX_OPEN:
                oldest = next(k for k in self.writers if k != "sweep")
                self.writers.pop(oldest).close()
        self.writers.move_to_end(key)
        return writer

    def _close(self, key: str) -> None:
        writer = self.writers.pop(key, None)
        if writer is not None:
            writer.close()

    def on_sweep_start(self, sweep: SweepInfo) -> None:
        self.metric = sweep.metric
        # Sweep-level values are at the run's index (0, then 1 after a resume, ...).
        ids = RunIds(sweep, f"tensorboard {self.dir.resolve()}")
        self.run_index = int(ids.get("runs") or 0)
        ids.set("runs", str(self.run_index + 1))
        writer = self._writer("sweep")
        writer.add_text("config", f"```\n{json.dumps(dict(sweep.config), indent=1)}\n```",
                        self.run_index)
        for key, value in (("time_budget_s", sweep.time_budget_s),
                           ("cost_budget_usd", sweep.cost_budget_usd)):
            if value is not None:
                writer.add_scalar(key, value, self.run_index)

    def on_trial_start(self, trial: TrialInfo) -> None:
        self._writer(trial.trial_id)

    def on_result(self, trial: TrialInfo, step: int, metrics: Mapping[str, float]) -> None:
        writer = self._writer(trial.trial_id)
        for key, value in metrics.items():
            writer.add_scalar(key, value, step)

    def on_trial_end(self, trial: TrialInfo, state: str, gpu_s: float, usd: float) -> None:
        from tensorboardX.summary import hparams

        writer = self._writer(trial.trial_id)
        writer.add_scalar("gpu_seconds", gpu_s, trial.step)
        writer.add_scalar("cost_usd", usd, trial.step)
        writer.add_text("state", state, trial.step)
        values = {k: param_value(v) for k, v in trial.params.items()}
        final = {} if trial.value is None else {self.metric: trial.value}
        for summary in hparams(values, final):   # (experiment, session start, session end)
            writer.file_writer.add_summary(summary)
        self._close(trial.trial_id)

    def on_sweep_end(self, summary: SweepSummary) -> None:
        writer = self._writer("sweep")
        end = {"spend_usd": summary.spend_usd, "wall_s": summary.wall_s}
        if summary.best_value is not None:
            end["best_value"] = summary.best_value
        for key, value in end.items():
            writer.add_scalar(key, value, self.run_index)
        text = json.dumps({
            "state": summary.state, "reason": summary.reason,
            "best_trial_id": summary.best_trial_id, "best_value": summary.best_value,
            "best_params": dict(summary.best_params or {}), "trials": dict(summary.trials),
            "message": summary.message}, indent=1)
        writer.add_text("summary", f"```\n{text}\n```", self.run_index)
        for key in list(self.writers):
            self._close(key)
