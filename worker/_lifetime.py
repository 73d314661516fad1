"""Processes that must not outlive the one that started them (local workers, embedded Redis).

Linux's ``PR_SET_PDEATHSIG`` makes the kernel send SIGTERM when the parent dies, even if it
was SIGKILLed, so a crashed controller leaves no paid-for "VM" or broker behind. Elsewhere it
is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(expected_parent: int | None = None) -> bool:
    """Ask for SIGTERM when our parent exits; returns whether that is in place."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            return False
    except OSError:
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        # The parent died before the request was in place.
        os.kill(os.getpid(), signal.SIGTERM)
    return True
