"""When a sweep fails without the controller crashing: its trials fail for their errors and
none produces a value, or its trainable reports under another name than the sweep's metric.

The rule (Ray Tune's ``fail_fast``, made tolerant of a few bad regions of the space): a sweep
stops as failed once its first :func:`fail_fast_at` trials have all failed for good (each
tried ``1 + max_failures`` times) while no trial has reported a finite value of the metric,
rather than spending its budget on more of the same; and a sweep that ends with failed trials
and no value at all ends as failed, not finished.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from worker.records import TrialState

FAIL_FAST_MIN = 3           # first trials that must fail before a sweep is given up early
FAIL_FAST_FRACTION = 0.1    # ... or this fraction of the sweep's trials, if more
_TRACEBACK_LINES = 8        # of the first failure's error, in the sweep's message


def fail_fast_at(total_trials: int) -> int:
    """How many of the first trials must all fail before the sweep is given up (at most all
    of them): max(3, 10 % of the trials)."""
    return max(1, min(total_trials, max(FAIL_FAST_MIN,
                                        math.ceil(FAIL_FAST_FRACTION * total_trials))))


def nothing_but_failures(trials: Iterable[tuple[int, TrialState, bool]],
                         first: int | None = None) -> list[int] | None:
    """The numbers of the failed trials when the sweep has failed, else None.

    ``trials``: (number, state, whether it reported a finite value). Failed: some trial failed,
    no trial that did not fail reported a value or ended (completed, pruned), and, with
    ``first``, trials 1 to ``first`` all failed.
    """
    failed: list[int] = []
    for number, state, valued in trials:
        if state == TrialState.FAILED:
            failed.append(number)
        elif valued or state in (TrialState.COMPLETED, TrialState.PRUNED):
            return None
    if not failed:
        return None
    if first is not None and not set(range(1, first + 1)) <= set(failed):
        return None
    return sorted(failed)


def failures_message(metric: str, failed: int, total: int, tries: int, first: int | None,
                     first_trial: str, error: str | None) -> str:
    """Why the sweep failed (``first``: given up early, when its first ``first`` trials
    failed), ending with the first failure's last traceback lines."""
    lines = (error or "no error was reported").strip().splitlines()[-_TRACEBACK_LINES:]
    what = (f"the first {first} trials failed" if first is not None
            else f"{failed} of {total} trials failed")
    stop = "; the sweep stopped rather than spend its budget on more" if first else ""
    return (f"no trial produced a value: {what} (each tried {tries} time"
            f"{'s' if tries != 1 else ''}, max_failures + 1) and no trial reported a value of "
            f"{metric!r}{stop}. The first failure, trial {first_trial}:\n" + "\n".join(lines))


def wrong_metric_message(metric: str, trial_id: str, reported: list[str]) -> str:
    """Why the sweep stopped at a report without its metric: both names, and the two fixes."""
    names = ", ".join(repr(n) for n in reported)
    return (f"trial {trial_id} reported {names} but not the sweep's metric {metric!r}: report "
            f"it (ctx.report(step, {metric}=...)) or set metric to the name the trainable "
            "reports; the sweep stopped at this first report")
