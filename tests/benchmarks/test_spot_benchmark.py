"""benchmarks/spot.py: its summary contract, and bad arguments refused with the flag named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import spot
from tuner.sim import SAMPLE_DIR, SAMPLE_TRACES

ROOT = Path(__file__).resolve().parents[2]

SUMMARY_KEYS = {
    "cost_ratio_vs_on_demand_median_by_deadline",
    "uniform_progress_cost_ratio_vs_on_demand_median_by_deadline",
    "uniform_progress_1_zone_cost_ratio_vs_on_demand_median_by_deadline",
    "deadline_met_frac", "uniform_progress_deadline_met_frac", "budget_overruns", "cases",
    "default_policy", "policies",
}


def case(factor: float, costs: dict[str, float], missed=(), over=()) -> dict:
    return {"factor": factor, "runs": {
        name: {"cost_vs_on_demand": c, "met": name not in missed,
               "budget_respected": name not in over, "preemptions": 1}
        for name, c in costs.items()}}


def test_the_summary_holds_the_default_policy_and_uniform_progress_by_deadline():
    names = list(spot.POLICIES)
    cases = [case(1.5, dict.fromkeys(names, 0.7) | {"on-demand": 1.0, "uniform-progress": 0.9}),
             case(1.5, dict.fromkeys(names, 0.5) | {"on-demand": 1.0, "uniform-progress": 0.7},
                  missed={"tuning-aware"}),
             case(3.0, dict.fromkeys(names, 0.4) | {"on-demand": 1.0}, over={"tuning-aware"})]
    s = spot.summarise(cases, names)
    assert set(s) == SUMMARY_KEYS and s["default_policy"] == "tuning-aware"
    assert s["cost_ratio_vs_on_demand_median_by_deadline"] == {"1.5": 0.6, "3": 0.4}
    assert s["uniform_progress_cost_ratio_vs_on_demand_median_by_deadline"] == {"1.5": 0.8,
                                                                             "3": 0.4}
    assert s["deadline_met_frac"] == pytest.approx(2 / 3)
    assert s["uniform_progress_deadline_met_frac"] == 1.0
    assert s["budget_overruns"] == 1 and s["cases"] == 3


@pytest.mark.parametrize("argv, flag", [
    (["--traces", "/nonexistent"], "--traces"),
    (["--trace-hours", "0"], "--trace-hours"),
    (["--policies", "sometimes"], "--policies"),
    (["--region", "mars-1"], "--region"),
])
def test_bad_arguments_are_refused_with_the_flag_named(argv, flag, capsys):
    with pytest.raises(SystemExit) as exc:
        spot.main(argv)
    assert exc.value.code == 2 and flag in capsys.readouterr().err


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_spot_benchmark_replays_the_shipped_traces_and_keeps_its_json_contract():
    proc = subprocess.run(
        [sys.executable, "benchmarks/spot.py", "--data", str(SAMPLE_DIR), "--traces",
         str(SAMPLE_TRACES), "--quick", "--max-tasks", "1", "--policies", "spot-1-zone",
         "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(proc.stdout)  # stdout holds the one JSON object and nothing else
    summary, details = doc["summary"], doc["details"]
    assert set(summary) == SUMMARY_KEYS
    assert details["policies"] == ["on-demand", "spot-1-zone", "uniform-progress",
                                   "tuning-aware"]
    assert details["zones"] == sorted(details["zones"]) and len(details["zones"]) == 3
    assert summary["cases"] == len(details["cases"]) == 2
    for case in details["cases"]:
        runs = case["runs"]
        assert case["compression"] >= 1.0 and case["home_zone"] in details["zones"]
        assert runs["on-demand"]["spot_instances"] == 0
        assert runs["on-demand"]["cost_vs_on_demand"] == pytest.approx(1.0)
        assert runs["spot-1-zone"]["spot_instances"] == runs["spot-1-zone"]["instances"]
        assert runs["spot-1-zone"]["zones_used"] <= 1
        assert runs["tuning-aware"]["spot_instances"] > 0
        # Every run is the real controller's: it spent money and ended for a reason.
        assert all(r["spend_usd"] > 0 and r["outcome"] for r in runs.values())
    assert summary["budget_overruns"] == 0
    by = summary["cost_ratio_vs_on_demand_median_by_deadline"]
    assert set(by) == {"1.5", "3"} and all(0 < v < 1.5 for v in by.values())
