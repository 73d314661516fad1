"""A worker on a VM exits when its controller is gone, so the VM can power itself off.

The controller keeps a heartbeat key in the broker (see the controller's beacon). A worker
started with ``--controller-key`` checks it every few seconds; once the key has been missing
for ``orphan_timeout_s`` (a broker outage counts as missing: a worker that reaches no broker
can do no work either), it asks Celery for a warm shutdown and, if that has not ended the
process within ``grace_s``, exits hard. The startup script then shuts the VM down.

A worker its sweep kept warm (``provider.keep_warm``) stays while its paid-for deadline has
not passed and leaves the moment it has; a later sweep that takes it up names the heartbeat
it follows from then on (see ``worker.records.warm_until_key`` and ``follows_key``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from worker.records import follows_key, warm_until_key

log = logging.getLogger(__name__)

ORPHAN_EXIT_CODE = 3


def _leave(grace_s: float) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(ORPHAN_EXIT_CODE)


def watch_controller(client: Any, key: str, orphan_timeout_s: float, *,
                     poll_s: float | None = None, grace_s: float = 30.0,
                     on_orphaned: Callable[[], None] | None = None,
                     clock: Callable[[], float] = time.monotonic, worker: str | None = None,
                     wall: Callable[[], float] = time.time) -> threading.Thread:
    """Start a daemon thread that calls ``on_orphaned`` (default: shut this worker down) once
    ``key`` has been absent from Redis for ``orphan_timeout_s`` seconds.

    ``worker`` (this worker's name) makes it follow the key a later sweep named for it, and
    wait, while kept warm, until the paid-for deadline (``wall`` time) and not a second more."""
    if orphan_timeout_s <= 0:
        raise ValueError(f"orphan_timeout_s must be > 0, got {orphan_timeout_s}")
    poll = poll_s if poll_s is not None else min(5.0, orphan_timeout_s / 3)
    act = on_orphaned or (lambda: _leave(grace_s))

    def alive() -> bool:
        """Whether a controller (or a paid-for warm deadline) still holds this worker; raises
        StopIteration once the warm deadline has passed."""
        if worker is None:
            return bool(client.exists(key))
        followed, until = client.mget(follows_key(worker), warm_until_key(worker))
        if client.exists(followed.decode() if isinstance(followed, bytes) else followed or key):
            return True
        if until is None:
            return False
        if wall() < float(until):
            return True
        raise StopIteration

    def run() -> None:
        last_seen = clock()          # the controller beats before it launches any VM
        while True:
            time.sleep(poll)
            try:
                if alive():
                    last_seen = clock()
                    continue
            except StopIteration:
                log.warning("kept warm until its deadline and not taken up; this worker stops")
                act()
                return
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
