"""Runs the CLI (``python -m tests._dies_at_segment_end N WHERE -- ARGS``) as a controller that
SIGKILLs itself at its N-th segment end: ``inside`` once the segment's state and journal entry
are written and its trial's state is about to be, ``after`` once the batch of events holding
that end has been handled. A kill from outside rarely lands there; the fault tests aim it."""

from __future__ import annotations

import os
import signal
import sys

from tuner import cli
from tuner._segments import Segments


def main() -> int:
    nth, where, _, *args = sys.argv[1:]
    seen = {"ends": 0, "in_end": False}

    def count_end() -> None:
        seen["ends"] += 1
        if seen["ends"] == int(nth):
            os.kill(os.getpid(), signal.SIGKILL)

    real_finished, real_sync, real_handle = (Segments._finished, Segments.sync_state,
                                             Segments.handle)

    def finished(self, event):
        seen["in_end"] = event.status == "done"
        try:
            real_finished(self, event)
        finally:
            seen["in_end"] = False

    def sync_state(self, trial, now):
        if where == "inside" and seen["in_end"]:
            count_end()
        real_sync(self, trial, now)

    def handle(self, events):
        real_handle(self, events)
        if where == "after" and any(getattr(e, "status", None) == "done" for e in events):
            count_end()

    Segments._finished = finished
    Segments.sync_state = sync_state
    Segments.handle = handle
    return cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
