"""benchmarks/hindsight.py runs on a planner benchmark's output and reports clusters that hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from budgets import StageWorkers
from tuner.sim import SAMPLE_DIR

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import hindsight, planner  # noqa: E402
from tuner import ConfigError  # noqa: E402
from tuner.sim import SimInstanceType, discover, simulate, simulate_wired, uniform_boot  # noqa: E402


def test_wave_counts_give_each_number_of_waves_once():
    assert hindsight.wave_counts(9) == [1, 2, 3, 5, 9]
    assert hindsight.wave_counts(3) == [1, 2, 3]
    assert hindsight.wave_counts(1) == [1]


def test_the_search_finds_the_cheapest_cluster_of_a_known_cost_surface():
    # Two stages of 9 and 3 trials; a cluster meets the deadline when it has at least 3
    # workers in stage 0 and 2 in stage 1; it costs its workers, keeping idle ones 0.5 more.
    def run(cand: tuple[int, ...]) -> tuple[bool, float]:
        keep, w0, w1 = cand
        return w0 >= 3 and w1 >= 2, w0 + w1 + 0.5 * keep

    assert hindsight.search(run, [9, 3]) == ((0, 3, 2), 5.0)
    assert hindsight.search(lambda cand: (False, 1.0), [9, 3]) is None


@pytest.mark.timeout(300)   # (about 60 s on 2 cores; slower machines get room)
@pytest.mark.slow
def test_hindsight_benchmark_on_the_sample(tmp_path: Path):
    bench = subprocess.run(
        [sys.executable, "benchmarks/planner.py", "--data", str(SAMPLE_DIR), "--quick",
         "--seeds", "1", "--max-tasks", "1", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stderr[-4000:]
    planner_json = tmp_path / "planner.json"
    planner_json.write_text(bench.stdout)
    proc = subprocess.run(
        [sys.executable, "benchmarks/hindsight.py", str(planner_json), "--deadlines", "1.25",
         "--jobs", "1", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-4000:]
    other = subprocess.run(
        [sys.executable, "benchmarks/hindsight.py", str(planner_json), "--seeds", "7"],
        cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert other.returncode == 2 and "--seeds '7'" in other.stderr and "[0]" in other.stderr
    doc = json.loads(proc.stdout)
    assert set(doc["summary"]) == {"1.25"}
    row = doc["summary"]["1.25"]
    assert row["cases"] == row["found"] == 1
    assert row["target_vs_static_min"] == 0.5
    assert row["hindsight_vs_lower_bound_median"] > 0
    (case,) = doc["details"]["cases"]
    found = case["hindsight"]
    assert row["hindsight_vs_static_min_median"] == found["vs_static_min"]
    assert row["hindsight_vs_lower_bound_median"] == found["vs_lower_bound"]
    assert found["spend_usd"] == pytest.approx(found["vs_static_min"] * case["static_min_usd"])
    # The cluster reported finishes by the deadline at that bill when run again.
    task = planner.make_task(SAMPLE_DIR, case["task"])
    curves = planner.load_curves(str(SAMPLE_DIR), case["task"])
    r = simulate(hindsight.oracle_sweep(task, found["workers"][0], False, "median"), curves,
                 **planner.sim_world(task, case["seed"]), time_budget=case["deadline_s"],
                 cost_budget=None,
                 oracle_scaling=StageWorkers(found["workers"], boot_s=planner.BOOT.mean,
                                             keep=found["keep"]))
    assert r.outcome.reason == "done" and r.wall_s <= case["deadline_s"]
    assert r.spend_usd == pytest.approx(found["spend_usd"])
    assert len(found["workers"]) == len(planner.JobShape(
        task.num_trials, 1, task.max_resource, planner.ETA).stage_sizes())


@pytest.mark.slow
def test_hindsight_benchmark_refuses_what_is_not_a_planner_benchmarks_output(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"summary": {}}')
    proc = subprocess.run([sys.executable, "benchmarks/hindsight.py", str(bad)],
                          cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "planner_json" in proc.stderr and "not a planner benchmark" in proc.stderr


def _sample_task():
    name = next(n for n in discover(SAMPLE_DIR) if planner.make_task(SAMPLE_DIR, n))
    return planner.make_task(SAMPLE_DIR, name), planner.load_curves(str(SAMPLE_DIR), name)


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.slow
def test_an_oracle_cluster_run_as_a_sweep_is_the_hand_wired_run(keep):
    # The oracle's per-stage cluster on the sweep the product builds (a fixed cluster of the
    # first count, resized per stage) is the same run as the controller wired by hand with it.
    task, curves = _sample_task()
    sizes = planner.JobShape(task.num_trials, 1, task.max_resource, planner.ETA).stage_sizes()
    counts = [max(1, m // 2) for m in sizes]
    deadline = 40 * task.full_trial_s * task.time_scale
    itype = planner.one_gpu_type()
    wired = simulate_wired(
        curves, metric=curves.metric, mode=curves.mode, scheduler=planner.sha_scheduler(task),
        num_trials=task.num_trials, workers=counts[0], time_budget_s=deadline,
        instance_type=SimInstanceType(itype.name, slots=1,
                                      on_demand_per_hour=itype.on_demand_per_hour,
                                      spot_per_hour=itype.spot_per_hour),
        boot_s=uniform_boot(planner.BOOT.low, planner.BOOT.high), step_noise=planner.STEP_NOISE,
        seed=1, time_scale=task.time_scale, billing_minimum_s=planner.BILLING_MINIMUM_S,
        scaling=StageWorkers(counts, boot_s=planner.BOOT.mean, keep=keep))
    swept = simulate(hindsight.oracle_sweep(task, counts[0], False, "median"), curves,
                     **planner.sim_world(task, 1), time_budget=deadline, cost_budget=None,
                     oracle_scaling=StageWorkers(counts, boot_s=planner.BOOT.mean, keep=keep))
    assert swept.outcome.reason == wired.outcome.reason == "done"
    assert swept.wall_s == wired.wall_s and swept.spend_usd == wired.spend_usd
    assert swept.best_value == wired.best_value
    assert len(swept.store.instances()) == len(wired.store.instances())
    assert swept.trials[["trial_id", "state", "last_step"]].equals(
        wired.trials[["trial_id", "state", "last_step"]])
    # ... and the oracle did resize it: the fixed cluster it starts from costs more.
    fixed = simulate(hindsight.oracle_sweep(task, counts[0], False, "median"), curves,
                     **planner.sim_world(task, 1), time_budget=deadline, cost_budget=None)
    assert fixed.spend_usd > swept.spend_usd


def test_an_oracle_cluster_replaces_only_a_fixed_one():
    task, curves = _sample_task()
    sweep = planner.sweep_of(task, planner.one_gpu_type(), "median",
                             planner.sha_scheduler(task), task.num_trials)   # follows a plan
    with pytest.raises(ConfigError) as err:
        simulate(sweep, curves, seed=0, time_budget=1e6, cost_budget=None,
                 oracle_scaling=StageWorkers([2], boot_s=60.0))
    assert err.value.field == "provider.scaling" and "static" in err.value.message
