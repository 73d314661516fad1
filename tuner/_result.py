"""What ``tune()`` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass
class TuneResult:
    experiment_id: str
    experiment_dir: Path
    state: str
    best_params: dict[str, Any] | None
    best_value: float | None
    best_trial_id: str | None
    best_checkpoint: Path | str | None   # a local path, or a URI in object storage
    trials: pd.DataFrame
    spend_usd: float
    cost_budget_usd: float | None
    wall_s: float
    time_budget_s: float | None
    deadline_met: bool
    budget_respected: bool
    plans: list[dict[str, Any]] = field(default_factory=list)
    dispatch_latencies_s: list[float] = field(default_factory=list, repr=False)
    status: dict[str, Any] = field(default_factory=dict, repr=False)
    message: str | None = None           # why the sweep failed (state "failed"), else None
