"""One controller per experiment: an exclusive lock on ``DIR/controller.lock``.

``fcntl.flock`` is released by the kernel when the holder dies, however it dies, so a crashed
controller never leaves a stale lock behind, and a second ``run``/``resume`` of a live
experiment is refused instead of racing the first for the store and the cluster.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from tuner._errors import ConfigError

LOCK_NAME = "controller.lock"


class ControllerLock:
    def __init__(self, experiment_dir: Path) -> None:
        self.path = Path(experiment_dir) / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> ControllerLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ConfigError("experiment_dir", f"{self.path.parent} is being run by another "
                              f"controller (pid {holder}); stop it first") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
