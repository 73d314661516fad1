"""Measured spot capacity to replay: per zone, how many spot VMs a launch could get, over time.

A folder laid out like ``../shared/data/spot_traces`` holds ``availability.csv.gz`` (one row
per zone and probe round: ``region_or_zone``, ``t_s``, ``n_launched``) and ``traces.csv`` (one
row per zone: ``zone``, ``region``, ``step_s``, ``gpu_spot_price_usd_per_gpu_hour``). Zones are
discovered from the files. Rounds missing inside the span carry the last value forward.

:class:`TraceReplay` maps the simulated clock onto the trace: trace time is ``offset_s +
compression * t`` (wrapping round at the end), so a sweep of an hour can meet a day of
capacity changes; the benchmark states the compression it used. Hand-written: a step function
over a few thousand rounds per zone needs numpy's ``searchsorted``, no more.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

AVAILABILITY = "availability.csv.gz"
SUMMARY = "traces.csv"
SAMPLE_TRACES = Path(__file__).resolve().parent / "data" / "spot_traces_sample"


@dataclass(frozen=True)
class ZoneTrace:
    """One zone's capacity: ``counts[i]`` VMs launchable from ``i * step_s`` trace seconds on
    (``n_launched``), and its relative spot price (None where the trace has none)."""

    zone: str
    region: str
    step_s: float
    counts: tuple[int, ...]
    price: float | None = None

    @property
    def duration_s(self) -> float:
        return self.step_s * len(self.counts)

    def available_fraction(self) -> float:
        return sum(c > 0 for c in self.counts) / len(self.counts)


def default_traces_dir() -> Path:
    """``../shared/data/spot_traces`` next to the repository when it exists, else the sample."""
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "spot_traces"
    return shared if (shared / AVAILABILITY).is_file() else SAMPLE_TRACES


def load_spot_traces(folder: str | Path) -> dict[str, ZoneTrace]:
    """Every zone of a trace folder, by zone name (sorted)."""
    folder = Path(folder)
    avail, summary = folder / AVAILABILITY, folder / SUMMARY
    if not avail.is_file():
        raise FileNotFoundError(f"{folder} holds no {AVAILABILITY} (a spot-trace folder has "
                                f"{AVAILABILITY} and {SUMMARY})")
    meta: dict[str, dict[str, str]] = {}
    if summary.is_file():
        with summary.open(newline="") as f:
            meta = {row["zone"]: row for row in csv.DictReader(f)}
    frame = pd.read_csv(avail, usecols=["region_or_zone", "t_s", "n_launched"])
    out = {}
    for zone, rows in frame.groupby("region_or_zone", sort=True):
        zone = str(zone)
        info = meta.get(zone, {})
        t = rows["t_s"].to_numpy(dtype=float)
        order = np.argsort(t)
        t, n = t[order], rows["n_launched"].to_numpy(dtype=int)[order]
        step = float(info.get("step_s") or (np.median(np.diff(t)) if len(t) > 1 else 600.0))
        idx = np.round((t - t[0]) / step).astype(int)
        counts = np.full(idx[-1] + 1, -1, dtype=int)
        counts[idx] = n
        for i in range(1, len(counts)):        # a missing round: the last value carried on
            if counts[i] < 0:
                counts[i] = counts[i - 1]
        price = info.get("gpu_spot_price_usd_per_gpu_hour") or None
        region = info.get("region") or zone.rsplit("-", 1)[0]
        out[zone] = ZoneTrace(zone, region, step, tuple(int(c) for c in counts),
                              float(price) if price else None)
    if not out:
        raise ValueError(f"{avail} holds no rows")
    return out


class TraceReplay:
    """The spot capacity of each zone at simulated time ``t``: the trace's count at
    ``offset_s + compression * t`` trace seconds (wrapping round past the end)."""

    def __init__(self, traces: Mapping[str, ZoneTrace], *, offset_s: float = 0.0,
                 compression: float = 1.0) -> None:
        if not traces:
            raise ValueError("traces is empty: a replay needs at least one zone")
        if not (math.isfinite(compression) and compression > 0):
            raise ValueError(f"compression is {compression!r}, but must be a finite number > 0")
        if not (math.isfinite(offset_s) and offset_s >= 0):
            raise ValueError(f"offset_s is {offset_s!r}, but must be a finite number >= 0")
        self.traces = dict(traces)
        self.offset_s = float(offset_s)
        self.compression = float(compression)

    @property
    def zones(self) -> list[str]:
        return list(self.traces)

    def _index(self, zone: str, t: float) -> int:
        tr = self.traces[zone]
        return int(((self.offset_s + self.compression * t) // tr.step_s) % len(tr.counts))

    def capacity(self, zone: str, t: float) -> int:
        """Spot VMs a launch in ``zone`` could hold at simulated time ``t``."""
        tr = self.traces[zone]
        return tr.counts[self._index(zone, t)]

    def first_below(self, zone: str, t: float, held: int) -> float:
        """The first simulated time after ``t`` at which ``zone`` holds fewer than ``held``
        VMs (``inf``: never, in one pass over the trace)."""
        tr = self.traces[zone]
        n = len(tr.counts)
        i = self._index(zone, t)
        step = tr.step_s / self.compression
        trace_t = self.offset_s + self.compression * t
        # The simulated time at which round i ends (the next round starts).
        next_start = ((trace_t // tr.step_s) + 1) * tr.step_s
        at = t + (next_start - trace_t) / self.compression
        for k in range(1, n + 1):
            if tr.counts[(i + k) % n] < held:
                return at + (k - 1) * step
        return math.inf


def replay_for(traces: Mapping[str, ZoneTrace], zones: Sequence[str] | None, *, seed: int,
               compression: float) -> TraceReplay:
    """A replay of ``zones`` (all: None) from an offset drawn from ``seed``, the same for
    every zone (the rounds line up in time)."""
    picked = {z: traces[z] for z in (zones or traces)}
    length = min(t.duration_s for t in picked.values())
    offset = float(np.random.default_rng(seed).uniform(0.0, length))
    return TraceReplay(picked, offset_s=offset, compression=compression)


def zone_price_factors(traces: Mapping[str, ZoneTrace], region: str | None) -> dict[str, float]:
    """Each zone's spot price over the reference's: the mean of ``region``'s zones where the
    trace has any (the catalog's region), else the median zone. A zone without a price: 1."""
    priced = {z: t.price for z, t in traces.items() if t.price}
    if not priced:
        return {z: 1.0 for z in traces}
    home = [p for z, p in priced.items() if traces[z].region == region]
    ref = sum(home) / len(home) if home else float(np.median(list(priced.values())))
    return {z: (priced[z] / ref if z in priced else 1.0) for z in traces}
