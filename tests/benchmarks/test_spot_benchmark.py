"""benchmarks/spot.py: its summary contract, and bad arguments refused with the flag named."""

from __future__ import annotations

import pytest

from benchmarks import spot

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
