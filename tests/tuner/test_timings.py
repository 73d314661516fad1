"""The controller's timings part on hand-checked segments."""

from __future__ import annotations

from tuner._timings import Timings, recent_median


def test_timings_count_each_segment_once_and_split_a_first_segments_first_step():
    t = Timings(1.0, weight=lambda a, b: float(b - a), speedup=lambda g: float(g))
    assert t.seconds_per_step() == 1.0 and t.observations == 0 and not t.fresh_only
    # A fresh segment of 3 steps, its first step reported after 25 s of 45: set-up shows.
    t.observe("a", 0, 3, gpus=2, started=0.0, finished=45.0, first_step_at=25.0, rung_index=1)
    assert t.step_times == [15.0] and t.unit_step_times == [30.0]
    assert t.segment_times == [(1.0, 25.0, True), (2.0, 20.0, False)]
    assert t.resumed_segments == 1 and not t.fresh_only
    t.observe("b", 0, 1, gpus=1, started=0.0, finished=12.0, first_step_at=12.0, rung_index=0)
    t.observe("a", 3, 9, gpus=1, started=50.0, finished=110.0, first_step_at=None)
    assert t.observations == 3 and t.seconds_per_step() == 12.0   # median of 15, 12, 10
    assert t.done_at(1) == 1 and t.done_at(0) == 1 and t.done_at(2) == 0
    assert t.paces.pace("a", s_per_step=10.0) is not None
    t.new_bracket()
    assert t.done_at(1) == 0 and t.observations == 3


def test_recent_median_looks_at_the_latest_window_only():
    assert recent_median([], prior=7.0) == 7.0
    assert recent_median([100.0] * 10 + [1.0] * 50, prior=7.0) == 1.0
