"""benchmarks/hypersched.py on the shipped sample: runs, and its JSON has the contract's keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.sim import SAMPLE_DIR

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_hypersched_benchmark_runs_on_the_sample_and_reports_its_figures():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "hypersched.py"), "--data", str(SAMPLE_DIR),
         "--seeds", "1", "--layout", "2x4", "--deadlines", "900,3600", "--json"],
        capture_output=True, text=True, timeout=120, check=True)
    doc = json.loads(out.stdout)
    summary, details = doc["summary"], doc["details"]
    assert set(summary) >= {"best_accuracy_mean_by_deadline", "trials_mean_by_deadline",
                            "accuracy_gain_by_deadline", "win_frac_vs_asha", "runs"}
    assert set(summary["best_accuracy_mean_by_deadline"]) == {"900", "3600"}
    for row in summary["best_accuracy_mean_by_deadline"].values():
        assert set(row) == {"asha", "hypersched"}
    assert details["tasks"] and all("imagenet" in t["name"] for t in details["tasks"])
    assert details["layout"] == [2, 4]
    runs = details["runs"]
    assert len(runs) == summary["runs"] == 2 * 2 * len(details["tasks"])
    assert all(r["max_gpus"] <= 4 for r in runs)
    assert all(r["wide_segments"] == 0 for r in runs if r["policy"] == "asha")
