"""What a sweep measured of its trainable, read back from a store whose every time is known."""

from __future__ import annotations

import pytest

from tuner._measure import measure
from tuner._store import Store
from worker.records import Instance

BASE = 2.0                       # a later step's seconds on one GPU
COSTS = (4.0, 2.0, 1.5)          # what steps 1-3 cost relative to it
RESTORE = 3.0                    # a resumed segment's extra seconds before its first step


def _step_s(step: int, gpus: int = 1) -> float:
    cost = COSTS[step - 1] if step <= len(COSTS) else 1.0
    return BASE * cost / (1.8 if gpus == 2 else 1.0)


def _store(tmp_path, *, two_gpus: bool = True) -> Store:
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "score", "max", None, None)
    for k in range(5):   # each takes its first segment 40, 50, ... 80 s after launch
        store.upsert_instance(Instance(instance_id=f"i{k}", provider="aws",
                                       instance_type="g5.xlarge", price_per_hour=1.0,
                                       launched_at=0.0, queue="q"))
    rows = []
    # Each trial: a fresh segment over steps 1-3, then a resumed one over 4-12.
    for t in range(6):
        gpus = 2 if two_gpus and t >= 3 else 1
        iid = f"i{t % 5}"
        clock = 40.0 + 10.0 * (t % 5)
        for start, stop in ((0, 3), (3, 12)):
            seg = f"e/t{t}/s{start}"
            store.add_segment(seg, f"t{t}", iid, start, stop, gpus, clock)
            began = clock
            clock += RESTORE if start else 0.0
            for step in range(start + 1, stop + 1):
                clock += _step_s(step, gpus)
                rows.append((f"t{t}", seg, step, 0.0, "{}", clock))
            store.update_segment(seg, state="done", started_at=began, finished_at=clock,
                                 last_step=stop)
    store.add_reports(rows)
    return store


def test_step_costs_restore_boot_and_speedup_are_read_from_the_reports(tmp_path):
    found = measure(_store(tmp_path))
    assert found is not None
    p = found["profile"]
    assert p["seconds_per_step"] == pytest.approx(BASE)
    assert p["step_costs"] == pytest.approx(list(COSTS))
    assert p["restore_s"] == pytest.approx(RESTORE)
    assert p["boot_s"] == [40.0, 80.0]
    assert found["notes"]["boot_s_by_type"] == {"g5.xlarge": [40.0, 80.0]}
    assert found["notes"]["segments"] == 12
    assert p["speedup"] == {1: 1.0, 2: pytest.approx(1.8, rel=0.02)}


def test_one_gpu_count_gives_no_speedup_and_an_empty_store_nothing(tmp_path):
    found = measure(_store(tmp_path / "a", two_gpus=False))
    assert found is not None and "speedup" not in found["profile"]
    empty = Store(tmp_path / "b")
    empty.create_experiment("e", "e", {}, "score", "max", None, None)
    assert measure(empty) is None


def test_the_trials_spread_is_measured_from_their_first_segments(tmp_path):
    # Six trials are too few for a spread; twenty, each first segment over steps 1-4 taking
    # 10 s x its pace (paces 0.5 to 2.4 in steps of 0.1, mean 1.45), are enough.
    assert "pace_quantiles" not in measure(_store(tmp_path / "few", two_gpus=False))["profile"]
    store = Store(tmp_path / "many")
    store.create_experiment("e", "e", {}, "score", "max", None, None)
    paces = [0.5 + 0.1 * k for k in range(20)]
    for t, pace in enumerate(paces):
        seg = f"e/t{t}/s0"
        store.add_segment(seg, f"t{t}", "i0", 0, 4, 1, 0.0)
        store.update_segment(seg, state="done", started_at=0.0, finished_at=40.0 * pace,
                             last_step=4)
    found = measure(store)
    mean = sum(paces) / len(paces)
    assert found["notes"]["trials_paced"] == 20
    q = found["profile"]["pace_quantiles"]
    assert list(q) == [0.5, 0.75, 0.9, 0.95, 0.99]
    assert q[0.5] == pytest.approx(paces[10] / mean, rel=1e-3)
    assert q[0.99] == pytest.approx(paces[19] / mean, rel=1e-3)


def _survivors_store(tmp_path) -> Store:
    """Nine trials train step 1 (three at twice the mean trial's pace, six at half); only the
    three slow ones, the survivors, train steps 2-12, each step ``BASE`` x its pace, give or
    take a tenth from one trial to the next (noise of the resumed segments)."""
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "score", "max", None, None)
    paces = [2.0] * 3 + [0.5] * 6
    noise = [0.9, 1.0, 1.1]
    rows = []
    for t, pace in enumerate(paces):
        plan = ((0, 1), (1, 12)) if t < 3 else ((0, 1),)
        clock = 0.0
        for start, stop in plan:
            seg = f"e/t{t}/s{start}"
            store.add_segment(seg, f"t{t}", "i0", start, stop, 1, clock)
            began = clock
            for step in range(start + 1, stop + 1):
                clock += BASE * pace * (noise[t] if start else 1.0)
                rows.append((f"t{t}", seg, step, 0.0, "{}", clock))
            store.update_segment(seg, state="done", started_at=began, finished_at=clock,
                                 last_step=stop)
    store.add_reports(rows)
    return store


def test_later_steps_are_the_mean_trials_and_the_promoted_spread_is_measured(tmp_path):
    found = measure(_survivors_store(tmp_path))
    p = found["profile"]
    # The survivors' steps take 2 x BASE, but they train at twice the mean trial's pace
    # (their first segments over all nine's): a later step of the mean trial is BASE.
    assert p["seconds_per_step"] == pytest.approx(BASE, rel=1e-3)
    # Three resumed segments over their mean: too few for a spread (MIN_PACED).
    assert "promoted_pace_quantiles" not in p
    # Promoted trials' spread: each resumed segment over those that trained the same steps.
    store = Store(tmp_path / "many")
    store.create_experiment("e", "e", {}, "score", "max", None, None)
    seconds = [10.0 * (1 + k) for k in range(8)]      # mean 45: 0.22 to 1.78 of it
    for t, s in enumerate(seconds):
        for start, stop, took in ((0, 1, 5.0), (1, 3, s)):
            seg = f"e/t{t}/s{start}"
            store.add_segment(seg, f"t{t}", "i0", start, stop, 1, 0.0)
            store.update_segment(seg, state="done", started_at=0.0, finished_at=took,
                                 last_step=stop)
    found = measure(store)
    q = found["profile"]["promoted_pace_quantiles"]
    assert found["notes"]["segments_paced_promoted"] == 8
    assert q[0.5] == pytest.approx(50.0 / 45.0, rel=1e-3)
    assert q[0.99] == pytest.approx(80.0 / 45.0, rel=1e-3)
    assert "pace_quantiles" in found["profile"]       # eight first segments, alike
