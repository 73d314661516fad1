"""The randomized fault benchmark, quick: 30 schedules on the shipped sample curves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.sim import SAMPLE_DIR

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_faults_quick_keeps_budgets_deadlines_and_results():
    proc = subprocess.run(
        [sys.executable, "benchmarks/faults.py", "--schedules", "30", "--jobs", "2",
         "--data", str(SAMPLE_DIR), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=390)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(proc.stdout)
    summary, details = doc["summary"], doc["details"]
    assert {"schedules", "budget_overruns", "deadline_met_frac", "lost_results"} <= set(summary)
    assert summary["schedules"] == len(details["runs"]) == 30
    assert summary["crashes"] == 0
    assert summary["budget_overruns"] == 0 and summary["bill_overruns"] == 0
    assert summary["lost_results"] == 0 and summary["duplicate_reports"] == 0
    assert summary["ledger_mismatches"] == 0 and summary["leaked_instances"] == 0
    assert summary["deadline_met_frac"] >= 0.96
    # Reports are counted from both sides, and the faults really struck.
    assert summary["delivered_reports"] == summary["persisted_reports"] > 0
    struck = summary["schedules_with"]
    for fault in ("capacity_errors", "preemptions", "worker_losses", "app_errors",
                  "never_registered"):
        assert struck[fault] > 0, fault


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_faults_quick_with_chosen_shapes_keeps_budgets_and_results():
    # The same schedules, each run as a sweep whose shape the planner chose: its re-planner
    # has the cost budget, cuts and widens promotions, and starts more brackets.
    proc = subprocess.run(
        [sys.executable, "benchmarks/faults.py", "--schedules", "24", "--jobs", "2",
         "--data", str(SAMPLE_DIR), "--chosen", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=290)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(proc.stdout)
    summary, details = doc["summary"], doc["details"]
    assert details["chosen"] and summary["schedules"] == 24 and summary["crashes"] == 0
    assert {r["policy"] for r in details["runs"]} == {"plan"}
    assert {r["scheduler"] for r in details["runs"]} == {"sha"}
    assert summary["budget_overruns"] == 0 and summary["bill_overruns"] == 0
    assert summary["lost_results"] == 0 and summary["duplicate_reports"] == 0
    assert summary["ledger_mismatches"] == 0 and summary["leaked_instances"] == 0
    assert summary["delivered_reports"] == summary["persisted_reports"] > 0
    assert summary["deadline_met_frac"] >= 0.95
    assert summary["more_brackets"] == sum(r["brackets"] - 1 for r in details["runs"]) > 0
