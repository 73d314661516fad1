"""Weights & Biases: one run per trial and one for the sweep, in one group, offline unless
asked otherwise (the runs are written under ``wandb/`` and uploaded later with
``wandb sync``; nothing needs the network).

Like Ray Tune's ``WandbLoggerCallback``: a trial's params are its run's config, its metrics
are logged as they arrive (against the trial's ``step``, which W&B plots as the x axis, so a
step that arrives late is kept), and its state, GPU-seconds and dollars are its summary.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tuner._hooks import SweepInfo, SweepSummary, TrialInfo
from tuner.loggers._common import folder, param_value, sweep_params
from tuner.loggers._runs import RunIds

_ID = re.compile(r"[^A-Za-z0-9_-]")


class WandbLogger:
    """Log a sweep to W&B. ``project``: default the sweep's name; ``group``: default the
    experiment id; ``dir``: where W&B's ``wandb/`` folder goes (default the experiment
    directory); ``mode``: ``offline`` (default) or ``online``."""

    name = "wandb"

    def __init__(self, project: str | None = None, entity: str | None = None,
                 group: str | None = None, dir: str | None = None, mode: str = "offline",
                 tags: Sequence[str] | None = None, *,
                 experiment_dir: Path | None = None) -> None:
        self.project, self.entity, self.group = project, entity, group
        self.dir = folder(dir, experiment_dir, ".", "loggers.wandb").resolve()
        self.mode = mode
        self.tags = list(tags or [])
        self.runs: dict[str, Any] = {}     # trial id (or "sweep") -> its open run

    def _open(self, key: str, name: str, job_type: str, config: Mapping[str, Any]) -> Any:
        """The run of ``key``: open already, resumed from its stored id, or new."""
        if key in self.runs:
            return self.runs[key]
        import wandb

        run_id = self.ids.get(key)
        if run_id is None:
            # Unique in the project across experiments of the same name.
            base = _ID.sub("-", f"{self.sweep.experiment_id}-{key}")[:50]
            run_id = f"{base}-{secrets.token_hex(4)}"
            self.ids.set(key, run_id)
        self.dir.mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=self.project or self.sweep.name, entity=self.entity,
            group=self.group or self.sweep.experiment_id, job_type=job_type, name=name,
            id=run_id, resume="allow", reinit="create_new", dir=str(self.dir),
            mode=self.mode, tags=self.tags or None,
            config={k: param_value(v) for k, v in config.items()},
            settings=wandb.Settings(silent=True, console="off", save_code=False,
                                    disable_git=True, x_disable_stats=True))
        # The trial's step is the x axis of every metric (W&B's own _step counts calls).
        run.define_metric("step")
        run.define_metric("*", step_metric="step")
        self.runs[key] = run
        return run

    def _trial_run(self, trial: TrialInfo) -> Any:
        return self._open(trial.trial_id, trial.trial_id, "trial", trial.params)

    def on_sweep_start(self, sweep: SweepInfo) -> None:
        self.sweep = sweep
        self.ids = RunIds(sweep,
                          f"wandb {self.entity or ''}/{self.project or sweep.name} {self.dir}")
        run = self._open("sweep", sweep.experiment_id, "sweep", sweep_params(sweep))
        run.summary.update({"time_budget_s": sweep.time_budget_s,
                            "cost_budget_usd": sweep.cost_budget_usd})

    def on_trial_start(self, trial: TrialInfo) -> None:
        self._trial_run(trial)

    def on_result(self, trial: TrialInfo, step: int, metrics: Mapping[str, float]) -> None:
        self._trial_run(trial).log({**metrics, "step": step})

    def on_trial_end(self, trial: TrialInfo, state: str, gpu_s: float, usd: float) -> None:
        run = self._trial_run(trial)
        run.summary.update({"state": state, "last_step": trial.step, "gpu_seconds": gpu_s,
                            "cost_usd": usd})
        run.finish(exit_code=1 if state == "failed" else 0)
        self.runs.pop(trial.trial_id, None)

    def on_sweep_end(self, summary: SweepSummary) -> None:
        for key in [k for k in self.runs if k != "sweep"]:   # (ended by the hooks already)
            self.runs.pop(key).finish()
        run = self.runs.pop("sweep")
        run.summary.update({
            "state": summary.state, "reason": summary.reason, "spend_usd": summary.spend_usd,
            "wall_s": summary.wall_s, "time_budget_s": summary.time_budget_s,
            "cost_budget_usd": summary.cost_budget_usd, "best_trial_id": summary.best_trial_id,
            "best_value": summary.best_value,
            "best_params": dict(summary.best_params or {}), "trials": dict(summary.trials)})
        run.finish(exit_code=1 if summary.state == "failed" else 0)
