"""The benchmarks run end to end on small sizes and keep their --json contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_overhead_quick():
    proc = subprocess.run(
        [sys.executable, "benchmarks/overhead.py", "--json", "--trials", "9", "--reports", "2000",
         "--segments", "30", "--skip-ray"],
        cwd=ROOT, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(proc.stdout)  # stdout holds the one JSON object and nothing else
    assert set(doc) == {"summary", "details"}
    summary, details = doc["summary"], doc["details"]
    assert set(summary) == {"dispatch_ms_p50", "dispatch_ms_p99", "reports_per_s",
                            "wall_ratio_vs_optuna", "wall_ratio_vs_raytune"}
    p50, p99 = summary["dispatch_ms_p50"], summary["dispatch_ms_p99"]
    assert isinstance(p50, float) and isinstance(p99, float)
    assert 0 < p50 <= p99
    # Every dispatched segment is counted: none excluded.
    assert details["dispatch"]["latency"]["count"] == details["dispatch"]["segments"] >= 21
    assert isinstance(summary["reports_per_s"], float) and summary["reports_per_s"] > 0
    assert details["reports"]["lost"] == 0
    assert details["reports"]["stored"] == details["reports"]["expected"] == 2000
    assert isinstance(summary["wall_ratio_vs_optuna"], float)
    assert summary["wall_ratio_vs_optuna"] > 0
    assert summary["wall_ratio_vs_raytune"] is None  # --skip-ray


@pytest.mark.slow
def test_scale_quick():
    run = subprocess.run([sys.executable, "benchmarks/scale.py", "--json", "--trials", "300",
                          "--workers", "30", "--segments", "300", "--small-workers", "8"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    summary = doc["summary"]
    assert set(summary) == {"trials", "workers", "wall_s", "sim_time_ratio_vs_ideal",
                            "controller_ms_per_segment", "peak_rss_mb"}
    assert summary["trials"] == 300 and summary["workers"] == 30
    assert 1.0 <= summary["sim_time_ratio_vs_ideal"] < 1.5
    assert doc["details"]["large"]["state"] == "finished"
    assert doc["details"]["large"]["trials_run"] == 300
