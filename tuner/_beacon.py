"""The controller's heartbeat in the broker, so VMs can tell when it is gone.

A cloud VM must not outlive the controller that rented it: if the controller is SIGKILLed
(or its machine dies), nobody terminates the VMs. The controller therefore keeps a key with a
short TTL in Redis; a worker started with ``--controller-key`` exits when the key has been
absent for its orphan timeout, and the VM's startup script powers the VM off after that (EC2
terminates it: the instances are launched with ``InstanceInitiatedShutdownBehavior``
``terminate``). A thread, not the control loop, writes the key: the loop runs on a simulated
clock too, and a heartbeat is a fact about this process, not about the sweep.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from worker import BrokerAddress

log = logging.getLogger(__name__)


def controller_key(experiment_id: str) -> str:
    """The Redis key that says the controller of ``experiment_id`` is alive."""
    return f"elastune:{experiment_id}:controller"


class ControllerBeacon:
    """Sets ``key`` (TTL ``ttl_s``) every ``ttl_s / 4`` seconds until :meth:`stop`."""

    def __init__(self, address: BrokerAddress, key: str, ttl_s: float = 60.0) -> None:
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        self.key = key
        self.ttl_s = ttl_s
        self._client = address.client()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="controller-beacon", daemon=True)

    def start(self) -> ControllerBeacon:
        self._beat()
        self._thread.start()
        return self

    def _beat(self) -> None:
        self._client.set(self.key, "1", px=max(1, int(self.ttl_s * 1000)))

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            try:
                self._beat()
            except Exception as exc:  # a broker outage: keep trying; workers allow for it
                log.warning("controller heartbeat failed: %s", exc)

    def stop(self) -> None:
        """Stop beating and remove the key: the sweep is over, stray workers may go now."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._client.delete(self.key)
        with contextlib.suppress(Exception):
            self._client.close()
