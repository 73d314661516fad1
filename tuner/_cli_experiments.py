"""``elastune ls`` and ``elastune stop``: find experiments under a root, stop a running one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner._errors import ConfigError
from tuner._status import status_document
from tuner._store import STORE_NAME, Store
from worker.records import ExperimentState


def experiment_dirs(root: Path) -> list[Path]:
    """Folders under ``root`` (or ``root`` itself) that hold an experiment store, sorted."""
    if (root / STORE_NAME).exists():
        return [root]
    if not root.is_dir():
        raise ConfigError("ROOT", f"{root} is not a directory")
    return sorted(p.parent for p in root.glob(f"*/{STORE_NAME}"))


def list_experiments(root: Path) -> list[dict[str, Any]]:
    """The status document of every experiment under ``root``."""
    docs = []
    for folder in experiment_dirs(root):
        store = Store(folder, readonly=True)
        try:
            docs.append(status_document(store, folder))
        finally:
            store.close()
    return docs


def request_stop(folder: Path, stop_file: str) -> dict[str, Any]:
    """Ask the sweep running in ``folder`` to stop (it stops within a second); returns its
    status document. Stopping a finished sweep is an error naming its state."""
    if not (folder / STORE_NAME).exists():
        raise ConfigError("DIR", f"{folder} holds no experiment ({STORE_NAME} not found)")
    store = Store(folder, readonly=True)
    try:
        doc = status_document(store, folder)
    finally:
        store.close()
    if doc["state"] != ExperimentState.RUNNING:
        raise ConfigError("DIR", f"experiment {doc['experiment']} is {doc['state']}, not running")
    (folder / stop_file).touch()
    return doc
