"""A worker on a VM exits when its controller is gone, so the VM can power itself off.

The controller keeps a heartbeat key in the broker (see the controller's beacon). A worker
started with ``--controller-key`` checks it every few seconds; once the key has been missing
for ``orphan_timeout_s`` (a broker outage counts as missing: a worker that reaches no broker
can do no work either), it asks Celery for a warm shutdown and, if that has not ended the
process within ``grace_s``, exits hard. The startup script then shuts the VM down.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

ORPHAN_EXIT_CODE = 3


def _leave(grace_s: float) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(ORPHAN_EXIT_CODE)


def watch_controller(client: Any, key: str, orphan_timeout_s: float, *,
                     poll_s: float | None = None, grace_s: float = 30.0,
                     on_orphaned: Callable[[], None] | None = None,
                     clock: Callable[[], float] = time.monotonic) -> threading.Thread:
    """Start a daemon thread that calls ``on_orphaned`` (default: shut this worker down) once
    ``key`` has been absent from Redis for ``orphan_timeout_s`` seconds."""
    if orphan_timeout_s <= 0:
        raise ValueError(f"orphan_timeout_s must be > 0, got {orphan_timeout_s}")
    poll = poll_s if poll_s is not None else min(5.0, orphan_timeout_s / 3)
    act = on_orphaned or (lambda: _leave(grace_s))

    def run() -> None:
        last_seen = clock()          # the controller beats before it launches any VM
        while True:
            time.sleep(poll)
            try:
                if client.exists(key):
                    last_seen = clock()
                    continue
            except Exception as exc:
                log.warning("cannot reach the broker to check the controller: %s", exc)
            if clock() - last_seen >= orphan_timeout_s:
                log.warning("controller gone for %.0f s (no %s); this worker stops",
                            clock() - last_seen, key)
                act()
                return

    thread = threading.Thread(target=run, name="controller-watchdog", daemon=True)
    thread.start()
    return thread
