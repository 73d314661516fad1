"""What a sweep has measured of its trainable: the controller's timings part.

Every finished segment is counted once here (live, or replayed from the store on resume):
seconds per step, the (steps, seconds, fresh) rows the re-planner fits, each trial's pace and
the segments done per rung. The re-planner, the deadline policy and the overdue check read it
through this public API, and so do tests.
"""

from __future__ import annotations

from collections.abc import Callable

from budgets import TrialPaces

# How many of the latest step times a median looks at (recent ones say more than old ones).
RECENT = 50


def recent_median(times: list[float], prior: float, window: int = RECENT) -> float:
    """The median of the last ``window`` of ``times`` (``prior`` when there are none)."""
    if not times:
        return prior
    recent = sorted(times[-window:])
    return recent[len(recent) // 2]


class Timings:
    """Step times and segment times of the segments a sweep finished.

    ``weight(start, stop)``: what steps ``start + 1 .. stop`` cost relative to a later step
    (the profile's step costs; their number without them). ``speedup(g)``: how much faster a
    trial runs on ``g`` GPUs, to keep one-GPU step times too (the deadline policy's); None:
    not kept.
    """

    def __init__(self, prior_s_per_step: float, weight: Callable[[int, int], float],
                 speedup: Callable[[int], float] | None = None) -> None:
        self.prior_s_per_step = prior_s_per_step
        self._weight = weight
        self._speedup = speedup
        self.step_times: list[float] = []        # seconds per step, one a segment
        self.unit_step_times: list[float] = []   # the same on one GPU (with ``speedup``)
        # Finished segments as (weighted steps, seconds, fresh: started the trial from step
        # 0), for budgets.fit_segment_times; a first segment of several steps counts twice.
        self.segment_times: list[tuple[float, float, bool]] = []
        self.paces = TrialPaces()                # per trial, for the re-planner
        self.resumed_segments = 0   # segments that resumed a trial (or a split first one's rest)
        self.done_at_rung: dict[int, int] = {}   # segments done per rung index, this bracket

    @property
    def observations(self) -> int:
        """How many segments have been counted."""
        return len(self.step_times)

    @property
    def fresh_only(self) -> bool:
        """Whether every segment seen started its trial (the fit cannot tell a first
        segment's extra from the steps)."""
        return bool(self.segment_times) and not self.resumed_segments

    def seconds_per_step(self) -> float:
        """The median of recent step times (the prior before any)."""
        return recent_median(self.step_times, self.prior_s_per_step)

    def unit_seconds_per_step(self) -> float:
        """The median of recent one-GPU step times (the prior before any)."""
        return recent_median(self.unit_step_times, self.prior_s_per_step)

    def observe(self, trial_id: str, start_step: int, last_step: int, gpus: int,
                started: float, finished: float, first_step_at: float | None,
                rung_index: int | None = None) -> None:
        """Count a segment that trained ``start_step`` to ``last_step`` (done) between
        ``started`` and ``finished``; ``first_step_at``: when a fresh segment reported its
        first step; ``rung_index``: the rung it reached, in the bracket under way (None:
        none, or an earlier bracket)."""
        duration = max(0.0, finished - started)
        steps = last_step - start_step
        self.step_times.append(duration / steps)
        if self._speedup is not None:
            self.unit_step_times.append(self.step_times[-1] * self._speedup(max(1, gpus)))
        weight = self._weight
        if start_step == 0 and steps > 1 and first_step_at is not None and \
                started <= first_step_at <= finished:
            # A first segment of several steps tells its first step (set-up, warm-up) from
            # the steps after it, by the time its first step was reported.
            self.segment_times += [(weight(0, 1), first_step_at - started, True),
                                   (weight(1, steps), finished - first_step_at, False)]
            self.resumed_segments += 1
        else:
            self.segment_times.append((weight(start_step, last_step), duration,
                                       start_step == 0))
        self.paces.observe(trial_id, steps=weight(start_step, last_step), seconds=duration,
                           fresh=start_step == 0)
        self.resumed_segments += start_step > 0
        if rung_index is not None:
            self.done_at_rung[rung_index] = self.done_at_rung.get(rung_index, 0) + 1

    def done_at(self, rung_index: int) -> int:
        """Segments done at rung ``rung_index`` in the bracket under way."""
        return self.done_at_rung.get(rung_index, 0)

    def new_bracket(self) -> None:
        """A new bracket begins: its rungs start empty (the step times carry over)."""
        self.done_at_rung = {}
