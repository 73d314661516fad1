"""The broker keys by which a worker kept warm after its sweep finds its next controller.

A finished sweep with ``provider.keep_warm`` leaves an idle VM running until a deadline it
has paid for (``warm_until_key``: the deadline, epoch seconds); a later sweep that takes the
VM up points it at its own heartbeat (``follows_key``: the key to follow instead of the one
the VM was started with). The worker's watchdog reads both.
"""

from __future__ import annotations


def warm_until_key(worker: str) -> str:
    """Holds the epoch second until which ``worker`` waits, paid for, to be taken up."""
    return f"elastune:worker:{worker}:warm-until"


def follows_key(worker: str) -> str:
    """Holds the controller heartbeat key ``worker`` follows since a later sweep took it up."""
    return f"elastune:worker:{worker}:follows"
