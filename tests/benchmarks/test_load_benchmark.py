"""benchmarks/load.py runs end to end on a small load and keeps its --json contract: every report
the trainables emitted is in the store, once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = {"target_rate", "achieved_rate", "seconds", "emitted", "stored", "lost",
                "duplicates", "controller_lag_p99_s", "status_s", "status_subprocess_s"}


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_load_quick():
    # A 1,000-trial store for the status timing keeps this short; the benchmark's default is
    # 10,000.
    proc = subprocess.run(
        [sys.executable, "benchmarks/load.py", "--rate", "300", "--seconds", "5", "--workers",
         "2", "--status-trials", "1000", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=140)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(proc.stdout)  # stdout holds the one JSON object and nothing else
    assert set(doc) == {"summary", "details"}
    summary, details = doc["summary"], doc["details"]
    assert set(summary) == SUMMARY_KEYS
    assert summary["target_rate"] == 300.0 and summary["seconds"] == 5.0
    # 2 workers x 750 steps, one report per step, counted by the trainables themselves.
    assert summary["emitted"] == 1500
    assert summary["stored"] == summary["emitted"] > 0
    assert summary["lost"] == 0
    assert summary["duplicates"] == 0
    load = details["load"]
    assert load["mismatched_trials"] == []
    assert load["segment_states"] == {"done": 2}
    assert load["superseded_runs"] == 0
    assert load["metrics_per_report"] == 3
    assert load["controller_lag_s"]["count"] == 1500
    assert 0 <= summary["controller_lag_p99_s"] < 5.0
    # Paced, not flooded: the rate is the target's, give or take a slow start.
    assert 0.5 * 300 < summary["achieved_rate"] <= 1.05 * 300
    assert details["status"]["trials"] == 1000
    assert details["status"]["same_document"] is True
    assert 0 < summary["status_s"] < summary["status_subprocess_s"]
