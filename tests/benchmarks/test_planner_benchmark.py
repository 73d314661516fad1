"""benchmarks/planner.py runs end to end on the shipped sample and keeps its --json contract."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner.sim import SAMPLE_DIR

ROOT = Path(__file__).resolve().parents[2]

SUMMARY_KEYS = {
    "cost_ratio_vs_static_min_median_by_deadline", "cost_ratio_vs_static_min_max",
    "cost_ratio_vs_lower_bound_median", "deadline_met_frac", "budget_overruns",
    "accuracy_win_frac_vs_asha_fixed", "plan_solve_s_p95", "replan_s_p95", "cases",
    "infeasible_cases", "cost_ratio_vs_hindsight_median_by_deadline", "profile",
}


@pytest.mark.timeout(90)
@pytest.mark.slow
def test_planner_benchmark_quick_json():
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "benchmarks/planner.py", "--data", str(SAMPLE_DIR), "--quick",
         "--seeds", "1", "--max-tasks", "1", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=80)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert elapsed < 60, f"took {elapsed:.1f} s"
    doc = json.loads(proc.stdout)  # stdout holds the one JSON object and nothing else
    assert set(doc) == {"summary", "details"}
    summary, details = doc["summary"], doc["details"]
    assert set(summary) == SUMMARY_KEYS
    assert summary["profile"] == "cold"
    assert summary["cost_ratio_vs_hindsight_median_by_deadline"] is None   # (no --hindsight)

    by_deadline = summary["cost_ratio_vs_static_min_median_by_deadline"]
    assert set(by_deadline) == {"1.25", "1.5", "3", "6"}
    for key in ("1.25", "1.5", "3", "6"):
        assert by_deadline[key] is None or (isinstance(by_deadline[key], float)
                                            and by_deadline[key] > 0)
    for key in ("cost_ratio_vs_static_min_max", "cost_ratio_vs_lower_bound_median",
                "plan_solve_s_p95", "replan_s_p95"):
        assert isinstance(summary[key], float) and summary[key] >= 0, key
    for key in ("deadline_met_frac", "accuracy_win_frac_vs_asha_fixed"):
        assert isinstance(summary[key], float) and 0.0 <= summary[key] <= 1.0, key
    for key in ("budget_overruns", "cases", "infeasible_cases"):
        assert isinstance(summary[key], int) and not isinstance(summary[key], bool), key

    # One task, one seed: one case per deadline factor, each with its policies measured.
    assert summary["cases"] == 4 == len(details["cases"])
    assert 0 <= summary["infeasible_cases"] <= summary["cases"]
    assert len(details["tasks"]) == 1
    for case in details["cases"]:
        assert case["deadline_s"] > case["base_wall_s"] > 0
        assert case["static_max"]["met"]  # the deadline is a multiple of its own wall time
        assert case["static_min"]["workers"] >= 1
        assert case["planner"]["spend_usd"] > 0 and case["planner"]["lower_bound_usd"] > 0
        assert len(case["accuracy"]) == 3
    # Where each bill went: its parts add up to the GPU-seconds billed, which at the per-GPU
    # price are what the ledger charged; the planner's busy share is the lower bound's.
    itype = details["instance_type"]
    price = itype["on_demand_per_hour"] / itype["gpus"]
    for case in details["cases"]:
        for policy in ("planner", "static_min", "static_max", "naive"):
            run, bill = case[policy], case[policy]["bill"]
            assert bill["boot_s"] >= 0 and bill["busy_s"] > 0 and bill["idle_s"] >= 0, policy
            assert bill["boot_s"] + bill["busy_s"] + bill["idle_s"] == pytest.approx(
                bill["billed_s"]), policy
            assert bill["billed_s"] * price / 3600 == pytest.approx(run["spend_usd"],
                                                                    rel=0.01), policy
        assert case["planner"]["bill"]["busy_s"] == pytest.approx(case["planner"]["gpu_s"])
    shares = details["bill_shares_by_deadline"]
    assert set(shares) == set(by_deadline)
    for key, row in shares.items():
        for policy in ("planner", "static_min"):
            parts = row[policy]
            assert set(parts) == {"boot", "busy", "idle"}
            if parts["busy"] is not None:
                assert sum(parts.values()) == pytest.approx(1.0), (key, policy)
    # The plan solve times are a 1,000-trial job's (the size the target names): per task, the
    # cost-min plans at the four deadlines and the accuracy plans at the three budgets (with
    # --quick, not its sweeps); the re-plans are the sweeps', each a whole call.
    (job,) = details["thousand_trial_jobs"]
    assert job["task"] == details["tasks"][0]["name"] and job["trials"] == 1000
    assert len(job["plan_s"]) == 4 + 3 and job["sweeps"] == [] and job["replan_s"] == []
    assert summary["plan_solve_s_p95"] <= max(job["plan_s"])
    assert summary["replan_s_p95"] == pytest.approx(details["benchmark_jobs_replan_s_p95"])
    # Lower bound: the planner cannot have paid less than the GPU-seconds it used.
    assert summary["cost_ratio_vs_lower_bound_median"] >= 1.0 - 1e-9
    # ... and a plan costing the lower bound would score at most what the planner scored.
    floor = details["lower_bound_vs_static_min_median_by_deadline"]
    assert set(floor) == set(by_deadline)
    for key, value in floor.items():
        if value is not None and by_deadline[key] is not None:
            assert 0 < value <= by_deadline[key] + 1e-9, key


def test_the_shaped_profile_is_the_sets_own_step_costs():
    import importlib.util

    from tuner.sim import discover, load_curves
    spec = importlib.util.spec_from_file_location("planner_bench", ROOT / "benchmarks/planner.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench   # (its dataclasses look their module up)
    try:
        spec.loader.exec_module(bench)
    finally:
        del sys.modules[spec.name]
    checked = 0
    for name in discover(SAMPLE_DIR):
        task = bench.make_task(SAMPLE_DIR, name)
        if task is None:
            continue
        r, cut = task.max_resource, task.max_resource // bench.ETA
        assert len(task.step_costs) == r and all(c > 0 for c in task.step_costs)
        # Relative to a step of the last stage, whose steps average 1.
        last = task.step_costs[cut:]
        assert sum(last) / len(last) == pytest.approx(1.0)
        assert task.shaped_s_per_step > 0
        # Step 1 against the last stage's steps, summed over the configurations that run all.
        curves = load_curves(SAMPLE_DIR, name)
        trained = [c for c in curves.config_ids() if curves.last_step(c) > 0]
        if all(curves.last_step(c) >= r for c in trained):
            first = sum(curves.cost_s(c, 0, 1) for c in trained)
            later = sum(curves.cost_s(c, cut, r) for c in trained) / (r - cut)
            assert task.step_costs[0] == pytest.approx(first / later)
            checked += 1
    assert checked, "no sample task whose configurations all run to the last rung"


def _one_case_per_deadline(profile: str, timeout: float) -> dict:
    """The benchmark's --json on one sample task and seed with ``--profile``."""
    proc = subprocess.run(
        [sys.executable, "benchmarks/planner.py", "--data", str(SAMPLE_DIR), "--quick",
         "--seeds", "1", "--max-tasks", "1", "--profile", profile, "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


@pytest.mark.timeout(90)
@pytest.mark.slow
def test_planner_benchmark_runs_with_the_shaped_profile():
    doc = _one_case_per_deadline("shaped", timeout=80)
    assert doc["details"]["profile"] == "shaped" and doc["summary"]["cases"] == 4
    for case in doc["details"]["cases"]:
        assert case["planner"]["spend_usd"] > 0


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_planner_benchmark_carries_a_profile_an_earlier_sweep_measured():
    doc = _one_case_per_deadline("carried", timeout=110)
    assert doc["summary"]["profile"] == "carried" and doc["summary"]["cases"] == 4
    (key, carried), = doc["details"]["carried_profiles"].items()
    task = doc["details"]["tasks"][0]
    assert key == f"{task['name']}#0"
    # Measured on the simulated run: its step time is near the task's, not the default's.
    assert 0.3 < carried["seconds_per_step"] / task["s_per_step"] < 3
    low, high = carried["boot_s"]
    assert 60 <= low <= high <= 180                          # the simulated boots' range


def test_the_carried_profile_is_what_elastune_profile_reads_from_the_earlier_sweep():
    from benchmarks.planner import carried_profile, make_task, one_gpu_type
    from tuner.sim import discover, load_curves

    name = discover(SAMPLE_DIR)[0]
    task = make_task(SAMPLE_DIR, name)
    profile = carried_profile(load_curves(SAMPLE_DIR, name), task, 0, one_gpu_type())
    again = carried_profile(load_curves(SAMPLE_DIR, name), task, 0, one_gpu_type())
    other = carried_profile(load_curves(SAMPLE_DIR, name), task, 1, one_gpu_type())
    assert profile == again and profile != other   # seeded: another seed, other noise
    from tuner import load_sweep

    assert load_sweep({"trainable": "operator:add", "metric": "m", "space": {"x": 1.0},
                       "scheduler": {"max_resource": 9}, "budget": {"time": "1h"},
                       "profile": profile}).profile.seconds_per_step == \
        profile["seconds_per_step"]


def test_the_planner_benchmarks_run_sweeps_as_users_write_them():
    # Every sweep goes through tuner.sim.simulate, built as tune() builds it: no controller
    # part is wired by hand.
    wired = re.compile(r"Replanner\(|FollowPlan\(|Controller\(|ReleaseIdle\(|Static\("
                       r"|simulate_wired")
    for name in ("planner.py", "hindsight.py"):
        text = (ROOT / "benchmarks" / name).read_text()
        assert not wired.findall(text), name


@pytest.mark.parametrize("shape", ["gentle", "fixed"])
def test_the_accuracy_sweeps_count_and_shape_are_the_planners_by_hand(shape):
    # The accuracy sweep leaves num_trials out; the product's planning then chooses the count,
    # first rung and first cut that initial_accuracy_plan gives for the benchmark's job.
    from optuna.distributions import IntDistribution

    from budgets import initial_accuracy_plan
    from tuner import load_sweep
    from tuner._build import shaped
    from tuner.sim import discover, load_curves
    from tuner.sim._simulate import replayed

    sys.path.insert(0, str(ROOT))
    from benchmarks import planner

    name = next(n for n in discover(SAMPLE_DIR) if planner.make_task(SAMPLE_DIR, n))
    task = planner.make_task(SAMPLE_DIR, name)
    curves = load_curves(SAMPLE_DIR, name)
    itype = planner.one_gpu_type()
    sweep = planner.sweep_of(task, itype, "median",
                             planner.accuracy_scheduler(task, shape), None)
    full = task.full_trial_s * task.time_scale
    chosen = 0
    for deadline in (1.5 * full, 4 * full, 12 * full):
        for budget in (0.5, 2.0, 8.0):
            spec = load_sweep({**sweep, "metric": curves.metric, "mode": curves.mode,
                               "trainable": replayed,
                               "space": {"config": IntDistribution(0, len(curves) - 1)}},
                              time_budget=deadline, cost_budget=budget)
            spec, plan, was_chosen = shaped(spec)
            hand = initial_accuracy_plan(
                1, task.max_resource, planner.ETA, planner.task_profile(task, "median"), itype,
                deadline, budget, max_trials=task.configs,
                billing_minimum_s=planner.BILLING_MINIMUM_S,
                **({"first_reduction": 2} if shape == "gentle" else {}))
            assert plan.num_trials == hand.num_trials, (deadline, budget)
            assert plan.feasible == hand.feasible
            assert plan.inputs.get("step_scale") == hand.inputs.get("step_scale")
            if was_chosen:
                chosen += 1
                assert spec.num_trials == hand.num_trials
                assert spec.scheduler.min_resource == hand.rungs[0].resource == 1
                assert spec.scheduler.first_reduction == hand.inputs.get("first_reduction") \
                    == (2 if shape == "gentle" else None)
                assert spec.scheduler.max_resource == hand.rungs[-1].resource
    assert chosen >= 3
