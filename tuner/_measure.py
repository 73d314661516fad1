"""What a finished (or stopped) sweep measured of its trainable, as ``profile:`` keys.

From the store alone (the same in a real run and a simulated one): a later step's seconds, what
each of a trial's first steps costs relative to it (by step index, from the reports' times), a
resumed segment's extra seconds, the boot latency of the instances it launched, and s(g) where
trials ran on several GPU counts. :func:`tuner._profiles.measured_profile` hands these to the
planner of a later sweep of the same trainable; ``elastune profile DIR`` prints them.

Hand-written: means and medians over the store's rows, a few lines each (no library reads it).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from budgets import fit_segment_times
from tuner._store import Store
from worker.records import SegmentState

MAX_COSTS = 16          # step indices whose own cost is measured (ProfileConfig's limit is 64)
MIN_SAMPLES = 3         # a step index (or a GPU count) measured by fewer segments is not used
FLAT = 0.05             # trailing step costs within this of a later step's are dropped
SIG = 4                 # significant digits kept


def _r(x: float) -> float:
    return float(f"{x:.{SIG}g}")


def measure(store: Store) -> dict[str, Any] | None:
    """The ``profile:`` keys the experiment measured, and ``notes`` (what each rests on, for
    people): None before any segment finished a step."""
    segs = store.query(
        "SELECT segment_id, trial_id, start_step, last_step, started_at, finished_at, gpus,"
        " instance_id, submitted_at FROM segments WHERE state = ? AND last_step > start_step"
        " AND started_at IS NOT NULL AND finished_at IS NOT NULL", (SegmentState.DONE,))
    fit = fit_segment_times((r["last_step"] - r["start_step"],
                             max(0.0, r["finished_at"] - r["started_at"]), r["start_step"] == 0)
                            for r in segs if (r["gpus"] or 1) <= 1)
    if fit is None:
        fit = fit_segment_times((r["last_step"] - r["start_step"],
                                 max(0.0, r["finished_at"] - r["started_at"]),
                                 r["start_step"] == 0) for r in segs)
    if fit is None:
        return None
    rate, first_extra = fit
    profile: dict[str, Any] = {}
    notes: dict[str, Any] = {"segments": len(segs)}
    # Step times on one GPU (on more where no trial ran on one: s(g) is then unknown).
    single = {r["segment_id"]: r for r in segs if (r["gpus"] or 1) <= 1} or \
        {r["segment_id"]: r for r in segs}
    # Each trial's steps over its pace: the trials that train a later step are the survivors
    # of the cuts before it, not drawn alike (a better network is often a larger, slower
    # one), and the planner multiplies the steps' costs by each trial's own pace.
    steps = _step_times(store, single, _first_paces(segs))
    later = _later_step_s(steps.within)
    if later is not None:
        rate = later
    profile["seconds_per_step"] = _r(rate)
    restore = _restore_s(steps, rate)
    costs = _step_costs(steps, rate, restore)
    if costs:
        profile["step_costs"] = costs
    elif first_extra > 0 and later is None:
        profile["step_costs"] = [_r((rate + first_extra) / rate)]
    if restore > 0:
        profile["restore_s"] = _r(restore)
    boots = _boots(store)
    if boots:
        (itype, (low, high, n)), *_ = sorted(boots.items(), key=lambda kv: -kv[1][2])
        profile["boot_s"] = [_r(low), _r(high)] if high > low else _r(low)
        notes["boot_s_by_type"] = {t: [_r(lo), _r(hi)] for t, (lo, hi, _) in boots.items()}
    speedup = _speedup(store, segs)
    if speedup is not None:
        profile["speedup"] = speedup
    paces = _pace_quantiles(segs)
    if paces:
        profile["pace_quantiles"] = paces
        notes["trials_paced"] = paces.pop("n")
    promoted = _pace_quantiles(segs, resumed=True)
    if promoted:
        profile["promoted_pace_quantiles"] = promoted
        notes["segments_paced_promoted"] = promoted.pop("n")
    return {"profile": profile, "notes": notes}


PACE_QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99)
MIN_PACED = 8           # trials a spread is measured from at the least


def _paces(segs: list[Any], *, resumed: bool = False) -> dict[str, float]:
    """Per segment id, its seconds over the mean of the segments that trained the same steps
    on as many GPUs, where at least ``MIN_SAMPLES`` did: of the trials' first segments, or
    (``resumed``) of the resumed ones."""
    groups: dict[tuple[int, int, int], list[Any]] = defaultdict(list)
    for r in segs:
        if (r["start_step"] > 0) == resumed:
            groups[(r["start_step"], r["last_step"], r["gpus"] or 1)].append(r)
    out = {}
    for rows in groups.values():
        times = [max(0.0, r["finished_at"] - r["started_at"]) for r in rows]
        mean = statistics.fmean(times)
        if len(times) >= MIN_SAMPLES and mean > 0:
            out.update({r["segment_id"]: t / mean for r, t in zip(rows, times, strict=True)})
    return out


def _first_paces(segs: list[Any]) -> dict[str, float]:
    """Per trial, its first segment's pace (:func:`_paces`), where it is above zero."""
    by_segment = _paces(segs)
    return {r["trial_id"]: by_segment[r["segment_id"]] for r in segs
            if by_segment.get(r["segment_id"], 0.0) > 0}


def _pace_quantiles(segs: list[Any], *, resumed: bool = False) -> dict[Any, float]:
    """Each trial's first segment's seconds over the mean of the first segments that trained
    the same steps (one GPU or the same count), at ``PACE_QUANTILES`` (and ``"n"``, how many
    trials): how unlike the mean trial a stage's slowest is. ``resumed``: the same of the
    resumed segments (promoted trials, each over the mean of those that trained the same
    steps: a stage after the first). Empty under ``MIN_PACED``."""
    ratios = list(_paces(segs, resumed=resumed).values())
    if len(ratios) < MIN_PACED:
        return {}
    ratios.sort()
    out: dict[Any, float] = {q: _r(ratios[min(len(ratios) - 1, int(q * len(ratios)))])
                             for q in PACE_QUANTILES}
    out["n"] = len(ratios)
    return out


@dataclass
class _Steps:
    """Seconds by step index: ``within`` a segment (report to report; a fresh segment's first
    step from its start, setup included) and ``resumed`` (a resumed segment's first step, from
    its start: restore included)."""

    within: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    resumed: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))


def _step_times(store: Store, segs: dict[str, Any],
                paces: dict[str, float] | None = None) -> _Steps:
    """The seconds of ``segs``' steps by index, each over its trial's pace in ``paces``
    (1 for a trial it does not hold)."""
    paces = paces or {}
    out = _Steps()
    last: dict[str, tuple[int, float]] = {}
    for r in store.query("SELECT segment_id, step, ts FROM reports ORDER BY segment_id, step"):
        seg = segs.get(r["segment_id"])
        if seg is None:
            continue
        prev = last.get(r["segment_id"])
        pace = paces.get(seg["trial_id"], 1.0)
        if prev is None:
            if r["step"] == seg["start_step"] + 1:
                bucket = out.within if seg["start_step"] == 0 else out.resumed
                bucket[r["step"]].append(max(0.0, r["ts"] - seg["started_at"]) / pace)
        elif r["step"] == prev[0] + 1:
            out.within[r["step"]].append(max(0.0, r["ts"] - prev[1]) / pace)
        last[r["segment_id"]] = (r["step"], r["ts"])
    return out


def _restore_s(steps: _Steps, rate: float) -> float:
    """A resumed segment's extra seconds before its first step ends (restore and setup):
    read where that step's own cost is known (measured within segments), else where it is
    past the second step (taken as a later step's); 0 when neither was seen."""
    known = [d - statistics.median(steps.within[k]) for k, ds in steps.resumed.items()
             if len(steps.within.get(k, ())) >= MIN_SAMPLES for d in ds]
    if len(known) < MIN_SAMPLES:
        known = [d - rate for k, ds in steps.resumed.items() if k > 2 for d in ds]
    return max(0.0, statistics.median(known)) if len(known) >= MIN_SAMPLES else 0.0


def _later_step_s(durations: dict[int, list[float]]) -> float | None:
    """A later step's seconds: the mean over the steps past ``MAX_COSTS`` or, in short
    trials, past the first half of the indices measured (means: a stage's work is the sum of
    its trials' steps, which grows with the mean, not the median)."""
    idx = sorted(k for k, v in durations.items() if len(v) >= MIN_SAMPLES)
    if len(idx) < 2:
        return None
    cut = MAX_COSTS if idx[-1] > MAX_COSTS else idx[len(idx) // 2]
    tail = [d for k in idx if k > cut for d in durations[k]]
    tail = tail or durations[idx[-1]]
    value = statistics.fmean(tail)
    return value if value > 0 else None


def _step_costs(steps: _Steps, rate: float, restore: float) -> list[float]:
    """Each of a trial's first steps' mean cost relative to a later step, by index (measured
    within segments, or at a resumed segment's first step less ``restore``), up to the first
    index measured by too few segments; flat trailing entries dropped."""
    costs: list[float] = []
    for k in range(1, MAX_COSTS + 1):
        within, resumed = steps.within.get(k, []), steps.resumed.get(k, [])
        if len(within) >= MIN_SAMPLES:
            seconds = statistics.fmean(within)
        elif len(resumed) >= MIN_SAMPLES:
            seconds = statistics.fmean(resumed) - restore
        else:
            break
        if rate <= 0:
            break
        costs.append(max(seconds / rate, 1e-3))
    while costs and abs(costs[-1] - 1.0) <= FLAT:
        costs.pop()
    return [_r(c) for c in costs]


def _boots(store: Store) -> dict[str, tuple[float, float, int]]:
    """Per instance type, (p10, p90, count) of launch to first segment sent, over instances
    that took work within their first minutes (an instance kept idle tells nothing)."""
    rows = store.query(
        "SELECT i.instance_type AS t, MIN(s.submitted_at) - i.launched_at AS boot "
        "FROM instances i JOIN segments s ON s.instance_id = i.instance_id "
        "WHERE s.submitted_at IS NOT NULL GROUP BY i.instance_id")
    by_type: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["boot"] is not None and math.isfinite(r["boot"]) and r["boot"] >= 0:
            by_type[r["t"]].append(float(r["boot"]))
    out = {}
    for t, xs in by_type.items():
        xs.sort()
        lo = xs[int(0.1 * (len(xs) - 1))]
        hi = xs[int(math.ceil(0.9 * (len(xs) - 1)))]
        out[t] = (lo, hi, len(xs))
    return out


def _speedup(store: Store, segs: list[Any]) -> dict[int, float] | None:
    """s(g) = a later step's seconds on one GPU over on g, where trials ran on both."""
    by_gpus: dict[int, dict[str, Any]] = defaultdict(dict)
    for r in segs:
        by_gpus[max(1, r["gpus"] or 1)][r["segment_id"]] = r
    if len(by_gpus) < 2 or 1 not in by_gpus:
        return None
    later = {g: _later_step_s(_step_times(store, rows).within) for g, rows in by_gpus.items()}
    one = later.pop(1)
    if one is None:
        return None
    table: dict[int, float] = {1: 1.0}
    for g in sorted(later):
        value = later[g]
        if value is not None:
            table[g] = _r(min(float(g), max(table[max(table)], one / value)))
    return table if len(table) > 1 else None
