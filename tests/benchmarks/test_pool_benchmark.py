"""benchmarks/pool.py runs end to end on a small sweep and keeps its --json contract: the same
sweep on a pool of workers started beforehand and on the embedded default, every segment done,
the pool's segments on its own workers, and the ratios as printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = {"workers", "trials", "pool_segments", "embedded_segments",
                "pool_dispatch_p50_ms", "pool_dispatch_p99_ms", "embedded_dispatch_p50_ms",
                "embedded_dispatch_p99_ms", "pool_segments_per_s", "embedded_segments_per_s",
                "ratio_dispatch_p50", "ratio_dispatch_p99", "ratio_segments_per_s"}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_pool_benchmark_quick():
    proc = subprocess.run(
        [sys.executable, "benchmarks/pool.py", "--workers", "2", "--trials", "9", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(proc.stdout)  # stdout holds the one JSON object and nothing else
    assert set(doc) == {"summary", "details"}
    s, d = doc["summary"], doc["details"]
    assert set(s) == SUMMARY_KEYS
    assert s["workers"] == 2 and s["trials"] == 9
    for side in ("pool", "embedded"):
        run = d[side]
        assert run["trials"]["total"] == 9 and run["trials"]["failed"] == 0
        assert set(run["segment_states"]) == {"done"}
        assert s[f"{side}_segments"] == run["segments"] == run["dispatch_latency"]["count"] > 0
        assert 0 < s[f"{side}_dispatch_p50_ms"] <= s[f"{side}_dispatch_p99_ms"] < 5000
        assert s[f"{side}_segments_per_s"] > 0
        assert sum(w["segments_run"] for w in run["workers"]) == run["segments"]
    # The pool sweep ran on the workers started for it, and started none of its own.
    assert {w["name"] for w in d["pool"]["workers"]} <= {"pool-w1", "pool-w2"}
    assert s["ratio_dispatch_p50"] == pytest.approx(
        s["pool_dispatch_p50_ms"] / s["embedded_dispatch_p50_ms"])
    assert s["ratio_dispatch_p99"] == pytest.approx(
        s["pool_dispatch_p99_ms"] / s["embedded_dispatch_p99_ms"])
    assert s["ratio_segments_per_s"] == pytest.approx(
        s["pool_segments_per_s"] / s["embedded_segments_per_s"])
    # The broker's password is not in the output.
    assert "redis://" not in proc.stdout
