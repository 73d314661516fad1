"""benchmarks/search.py runs end to end on the shipped sample, keeps its --json contract, spends
no more than each budget, and names a peer that cannot run a task."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tuner.sim import SAMPLE_DIR

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import _search_stats, _search_tasks  # noqa: E402
from benchmarks._search_runs import ELASTUNE_VARIANTS  # noqa: E402

SUMMARY_KEYS = {
    "elastune_regret_iqm_by_budget", "best_peer_regret_iqm_by_budget",
    "best_peer_name_by_budget", "win_frac_vs_best_peer", "win_frac_vs_asha_random", "tasks",
    "seeds", "peer_errors",
}
BUDGETS = {"0.25", "0.5", "1"}
OPTUNA = "optuna TPE+Hyperband"
SYNE_ASHA = "syne-tune ASHA"
HAS_SYNE_TUNE = importlib.util.find_spec("syne_tune") is not None


def _bench(*args: str, timeout: float = 240) -> dict:
    proc = subprocess.run([sys.executable, "benchmarks/search.py", *args, "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)  # stdout holds the one JSON object and nothing else


def test_iqm_cuts_the_outer_quarters_and_the_interval_holds_it():
    assert _search_stats.iqm([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1.0]) == pytest.approx(0.35)
    assert _search_stats.iqm([5.0]) == 5.0
    assert _search_stats.iqm([]) is None
    # fractional quarters: of 5 values, 1.25 are cut at each end
    assert _search_stats.iqm([0, 1, 2, 3, 100]) == pytest.approx((0.75 * 1 + 2 + 0.75 * 3) / 2.5)
    xs = [0.1, 0.2, 0.3, 0.9, 0.05, 0.4]
    lo, hi = _search_stats.bootstrap_ci(xs, seed=3)
    assert lo <= _search_stats.iqm(xs) <= hi
    assert (lo, hi) == _search_stats.bootstrap_ci(xs, seed=3)   # seeded


def test_regret_is_normalized_by_the_table_and_clipped():
    task = _search_tasks.make_task(SAMPLE_DIR, "yahpo_lcbench_surrogate/167149")
    assert task is not None and task.mode == "max"
    assert task.regret(task.best) == 0.0
    assert task.regret(task.reference) == pytest.approx(1.0)
    mid = (task.best + task.reference) / 2
    assert task.regret(mid) == pytest.approx(0.5)
    assert task.regret(task.reference - 10) == 1.0 and task.regret(None) == 1.0
    # the Optuna replay is the same run for the same seed (its pruner's brackets included)
    from benchmarks import _search_optuna

    horizon = 10 * float(task.step_s[:, 1:].sum(axis=1).mean())
    assert _search_optuna.run(task, 4, horizon, 1) == _search_optuna.run(task, 4, horizon, 1)
    # every method pays the same seconds per step: the curves' own, times the time scale
    c = task.config_ids[0]
    assert task.step_s[0, 1:4].sum() == pytest.approx(
        task.curves.cost_s(c, 0, 3) * task.time_scale)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_search_benchmark_quick_on_the_sample():
    doc = _bench("--data", str(SAMPLE_DIR), "--quick", "--jobs", "1",
                 "--peers", f"{OPTUNA},{SYNE_ASHA}")
    summary, details = doc["summary"], doc["details"]
    assert set(summary) == SUMMARY_KEYS
    assert summary["tasks"] == len(details["tasks"]) == 2   # the first task of each set
    assert summary["seeds"] == 1
    for key in ("elastune_regret_iqm_by_budget", "best_peer_regret_iqm_by_budget",
                "best_peer_name_by_budget"):
        assert set(summary[key]) == BUDGETS, key
    for key in BUDGETS:
        for v in (summary["elastune_regret_iqm_by_budget"][key],
                  summary["best_peer_regret_iqm_by_budget"][key]):
            assert isinstance(v, float) and math.isfinite(v) and 0.0 <= v <= 1.0
        assert summary["best_peer_name_by_budget"][key] in (OPTUNA, SYNE_ASHA)
    for key in ("win_frac_vs_best_peer", "win_frac_vs_asha_random"):
        assert 0.0 <= summary[key] <= 1.0, key

    assert set(details["regret_by_set"]) == {"opda_imagenet", "yahpo_lcbench_surrogate"}
    for by_method in details["regret_by_set"].values():
        assert by_method["elastune"]["1"]["tasks"] == 1
    runs = details["runs"]
    budgets = {t["task"]: t["budgets_usd"] for t in details["tasks"]}
    for t in details["tasks"]:
        assert t["budgets_usd"]["0.25"] < t["budgets_usd"]["0.5"] < t["budgets_usd"]["1"]
        assert t["budgets_usd"]["1"] == pytest.approx(t["full_sweep_usd"])
    # Optuna ran on every task at every budget, and found something with the whole budget
    optuna_runs = [r for r in runs if r["method"] == OPTUNA]
    assert len(optuna_runs) == 2 * 3 and all(r["error"] is None for r in optuna_runs)
    assert all(r["found"] is not None for r in optuna_runs if r["budget"] == "1")
    # nobody spent more than the budget
    for r in runs:
        if r["spend_usd"] is not None:
            assert r["spend_usd"] <= budgets[r["task"]][r["budget"]] + 1e-9, r
        if r["regret"] is not None:
            assert 0.0 <= r["regret"] <= 1.0
    elastune_runs = [r for r in runs if r["method"].startswith("elastune")]
    assert len(elastune_runs) == len(ELASTUNE_VARIANTS) * 2 * 3
    assert all(r["spend_usd"] > 0 for r in elastune_runs)
    # each elastune sweep sampled the task's hyperparameters, as the peers do
    assert {"elastune", "elastune-bohb", "elastune-pasha", "elastune-chosen"} <= set(
        details["methods"])
    # Syne Tune ran where it is installed; elsewhere it is named with the reason
    if HAS_SYNE_TUNE:
        assert SYNE_ASHA not in summary["peer_errors"]
    else:
        err = summary["peer_errors"][SYNE_ASHA]
        assert err["runs"] == 2 and "syne_tune" in err["reason"]


def _no_hyperparameters(tmp_path: Path) -> Path:
    """A copy of the sample's YAHPO set whose configs all have the same batch size and nothing
    else: every config has curves, none has a hyperparameter a peer could sample."""
    src = SAMPLE_DIR / "yahpo_lcbench_surrogate"
    dst = tmp_path / "data" / "bare"
    dst.mkdir(parents=True)
    configs = pd.read_csv(src / "configs.csv")[["config_id"]].assign(batch_size=64)
    configs.to_csv(dst / "configs.csv", index=False)
    (dst / "curves.csv.gz").write_bytes((src / "curves.csv.gz").read_bytes())
    return tmp_path / "data"


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_a_peer_that_cannot_take_a_task_is_counted_and_named(tmp_path: Path):
    doc = _bench("--data", str(_no_hyperparameters(tmp_path)), "--quick", "--jobs", "1",
                 "--peers", OPTUNA)
    summary = doc["summary"]
    err = summary["peer_errors"][OPTUNA]
    assert err["runs"] == 1 and err["tasks"] == ["bare/167149"]
    assert "no hyperparameter that varies" in err["reason"]
    # elastune still ran it (its trials name a recorded config by index: there is no
    # hyperparameter to sample), and no peer is left to beat
    assert all(0.0 <= v <= 1.0 for v in summary["elastune_regret_iqm_by_budget"].values())
    assert summary["best_peer_name_by_budget"] == {"0.25": None, "0.5": None, "1": None}
    assert summary["win_frac_vs_best_peer"] is None


@pytest.mark.skipif(not HAS_SYNE_TUNE, reason="syne-tune is not installed (the search-bench "
                                               "extra)")
@pytest.mark.timeout(300)
@pytest.mark.slow
def test_syne_tune_replays_the_same_steps_and_stops_at_the_dollars():
    from benchmarks import _search_optuna, _search_synetune

    task = _search_tasks.make_task(SAMPLE_DIR, "yahpo_lcbench_surrogate/167149")
    assert task is not None
    horizon = 20 * float(task.step_s[:, 1:].mean()) * task.max_resource / 4
    for name in ("syne-tune ASHA", "syne-tune BOHB"):
        reports = _search_synetune.run(task, name, 4, horizon, 0)
        assert reports and all(t <= horizon for t, _ in reports)
        # every value reported is one of the table's (nearest tabulated config)
        table = set(task.values[:, 1:].ravel().round(6))
        assert all(round(v, 6) in table for _, v in reports)
    # the same horizon lets Optuna's replay run the same order of steps
    assert _search_optuna.run(task, 4, horizon, 0)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                    reason="matplotlib is not installed (the search-bench extra)")
def test_the_plot_is_a_png_of_every_method(tmp_path: Path):
    from benchmarks._search_plot import plot

    row = {"iqm": 0.3, "ci_low": 0.2, "ci_high": 0.5, "tasks": 3}
    table = {m: {k: dict(row) for k in BUDGETS} for m in ("elastune", OPTUNA)}
    table[OPTUNA]["0.25"] = {"iqm": None, "ci_low": None, "ci_high": None, "tasks": 0}
    plot(table, tmp_path / "regret.png", "two methods")
    assert (tmp_path / "regret.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None,
                    reason="matplotlib is installed")
def test_plot_without_matplotlib_says_what_to_install(tmp_path: Path):
    proc = subprocess.run([sys.executable, "benchmarks/search.py", "--data", str(SAMPLE_DIR),
                           "--quick", "--plot", str(tmp_path / "p.png")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "search-bench" in proc.stderr
