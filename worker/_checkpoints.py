"""Checkpoint files of one trial: ``step-000009.pkl`` in the trial's location, written atomically.

The location is a local folder or a storage URI (``s3://bucket/prefix/trial``,
``gs://...``, ``file:///...``); every write goes through :func:`worker._storage.open_store`,
whose stores make a new object visible all at once. The newest two checkpoints are kept.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

from worker._storage import ObjectStore, open_store

_NAME = re.compile(r"^step-(\d+)\.pkl$")
KEEP = 2


def is_uri(location: str | Path) -> bool:
    """Whether ``location`` names object storage (``scheme://...``) rather than a folder."""
    return not isinstance(location, Path) and "://" in location


def _name(step: int) -> str:
    return f"step-{step:06d}.pkl"


def _steps(store: ObjectStore) -> list[int]:
    return sorted(int(m.group(1)) for key in store.list()
                  if (m := _NAME.match(key)))


def checkpoint_steps(location: str | Path) -> list[int]:
    """The steps that have a checkpoint at ``location``, ascending."""
    return _steps(open_store(location))


def save_checkpoint(location: str | Path, step: int, state: Any) -> Path | str:
    """Save ``state`` as the checkpoint of ``step`` and drop all but the newest two; returns
    the file's path (a folder) or URI (object storage)."""
    store = open_store(location)
    name = _name(step)
    store.put(name, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    for old in _steps(store)[:-KEEP]:
        store.delete(_name(old))
    if is_uri(location):
        return f"{str(location).rstrip('/')}/{name}"
    return Path(location) / name


def load_checkpoint(location: str | Path, at_most: int) -> tuple[int, Any] | None:
    """The newest checkpoint at or before step ``at_most``, as (step, state)."""
    store = open_store(location)
    for step in reversed([s for s in _steps(store) if s <= at_most]):
        data = store.get(_name(step))
        if data is not None:   # None: another writer dropped it since the listing
            return step, pickle.loads(data)
    return None
