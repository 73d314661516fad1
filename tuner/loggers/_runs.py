"""The run ids a tracker gave an experiment's trials and its sweep, kept in the experiment
directory (``loggers.json``) so that a resumed sweep continues the same runs instead of
starting new ones."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tuner._hooks import SweepInfo

RUNS_FILE = "loggers.json"


class RunIds:
    """Run ids by experiment and tracker target (``sim mlflow sqlite:///...``), and by trial id
    (``sweep`` for the sweep's run); in memory only when the experiment keeps no directory."""

    def __init__(self, sweep: SweepInfo, target: str) -> None:
        folder = sweep.experiment_dir
        self.path = None if folder is None else Path(folder) / RUNS_FILE
        self.target = f"{sweep.experiment_id} {target}"
        self.ids: dict[str, str] = dict(self._read().get(self.target, {}))

    def _read(self) -> dict[str, Any]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> str | None:
        return self.ids.get(key)

    def set(self, key: str, run_id: str) -> None:
        self.ids[key] = run_id
        if self.path is None:
            return
        data = self._read()
        data[self.target] = self.ids
        tmp = self.path.with_name(f".{RUNS_FILE}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)   # (a crash leaves the old file or the new one)
