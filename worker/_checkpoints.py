"""Checkpoint files of one trial: ``step-000009.pkl`` in the trial's folder, written atomically."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any

_NAME = re.compile(r"^step-(\d+)\.pkl$")
KEEP = 2


def checkpoint_steps(folder: str | Path) -> list[int]:
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _NAME.match(p.name)))


def save_checkpoint(folder: str | Path, step: int, state: Any) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"step-{step:06d}.pkl"
    tmp = folder / f".step-{step:06d}.pkl.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        pickle.dump(state, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    for old in checkpoint_steps(folder)[:-KEEP]:
        (folder / f"step-{old:06d}.pkl").unlink(missing_ok=True)
    return final


def load_checkpoint(folder: str | Path, at_most: int) -> tuple[int, Any] | None:
    """The newest checkpoint at or before step ``at_most``, as (step, state)."""
    steps = [s for s in checkpoint_steps(folder) if s <= at_most]
    if not steps:
        return None
    with open(Path(folder) / f"step-{steps[-1]:06d}.pkl", "rb") as fh:
        return steps[-1], pickle.load(fh)
