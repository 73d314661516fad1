"""Curve sets indexed by optimizer step and recording no time (``opda_deberta_mnli``): found by
their columns, one sweep step per evaluation interval, seconds modelled from steps x batch size;
on a folder written here and, when present, on the shared set."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tuner.sim import TimeSource, discover, load_curves, simulate
from tuner.sim._modelled_time import SECONDS_PER_EXAMPLE, modelled_seconds

ROOT = Path(__file__).resolve().parents[3]
SHARED = (ROOT / os.environ.get("ELASTUNE_DATA", "../shared/data")).resolve()
DEBERTA = SHARED / "opda_deberta_mnli"

# (config_id, batch size, planned steps, the steps its curve has)
CONFIGS = [
    (1, 32, 3500, [1000, 1750, 2000, 3000, 3500]),  # 1750: an end-of-epoch evaluation
    (2, 16, 2000, [1000, 2000]),                     # planned shorter
    (3, 64, 3500, [1000, 2000]),                     # stopped early: a crash
    (4, 20, 3500, []),                               # logged nothing
]


def _acc(config_id: int, step: int) -> float:
    return round(0.3 + config_id / 10 + step / 1e5, 6)


def _write_set(folder: Path, *, batch_col: str = "train_batch_size") -> None:
    folder.mkdir(parents=True)
    configs, curves = [], []
    for task in ("toy_a", "toy_b"):
        for cid, batch, planned, steps in CONFIGS:
            configs.append({"task": task, "config_id": cid, "num_train_epochs": 2,
                            batch_col: batch, "total_model_steps": planned,
                            "learning_rate": 1e-5 * cid,
                            "final_acc_matched": _acc(cid, steps[-1]) if steps else None})
            curves += [{"task": task, "config_id": cid, "step": s, "acc_matched": _acc(cid, s),
                        "acc_mismatched": _acc(cid, s) - 0.01} for s in steps]
    pd.DataFrame(configs).to_csv(folder / "configs.csv", index=False)
    pd.DataFrame(curves).to_csv(folder / "curves.csv.gz", index=False)


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    _write_set(tmp_path / "any_name")
    return tmp_path


def test_a_step_indexed_set_is_found_by_its_columns(toy, tmp_path):
    assert discover(toy) == ["any_name/toy_a", "any_name/toy_b"]
    other = tmp_path / "other"
    _write_set(other / "no_batch", batch_col="lr_steps")  # no batch size: cannot be costed
    _write_set(other / "plain_batch", batch_col="batch_size")
    assert discover(other) == ["plain_batch/toy_a", "plain_batch/toy_b"]


def test_steps_are_evaluation_intervals_with_a_final_partial_one(toy):
    cs = load_curves(toy, "any_name/toy_a")
    assert cs.resumable and cs.metric == "acc_matched" and cs.mode == "max"
    assert cs.time_source is TimeSource.MODELLED and "modelled seconds" in repr(cs)
    assert cs.config_ids() == ["1", "2", "3", "4"] and cs.max_step == 4
    # 1000, 2000, 3000 and the partial block to 3500; the off-grid 1750 is no step
    assert cs.last_step("1") == 4 and not cs.diverged("1")
    assert [cs.value("1", k) for k in range(6)] == \
        [None] + [_acc(1, s) for s in (1000, 2000, 3000, 3500)] + [None]
    assert cs.params("1") == {"num_train_epochs": 2, "train_batch_size": 32,
                              "total_model_steps": 3500, "learning_rate": 1e-5}


def test_seconds_are_optimizer_steps_times_batch_size(toy):
    cs = load_curves(toy, "any_name/toy_a")
    per_step = 32 * SECONDS_PER_EXAMPLE
    assert cs.cost_s("1", 0, 1) == pytest.approx(1000 * per_step)
    assert cs.cost_s("1", 3, 4) == pytest.approx(500 * per_step)  # the partial block
    assert cs.cost_s("1", 0, 4) == pytest.approx(3500 * per_step)
    assert cs.cost_s("1", 1, 3) + cs.cost_s("1", 3, 9) == pytest.approx(cs.cost_s("1", 1, 9))
    assert cs.cost_s("2", 0, 2) == pytest.approx(2000 * 16 * SECONDS_PER_EXAMPLE)
    assert cs.step_seconds_median() > 0
    assert modelled_seconds(3500, 32) == pytest.approx(cs.cost_s("1", 0, 4))
    with pytest.raises(ValueError, match="batch_size"):
        modelled_seconds(1000, 0)


def test_shorter_and_crashed_runs_end_early(toy):
    cs = load_curves(toy, "any_name/toy_b")
    # planned for 2 blocks and ran them: shorter, not diverged; nothing past its end
    assert cs.last_step("2") == 2 and not cs.diverged("2")
    assert cs.value("2", 2) == _acc(2, 2000) and cs.value("2", 3) is None
    assert cs.cost_s("2", 0, 4) == cs.cost_s("2", 0, 2)
    # planned for 4 blocks, evaluated twice: it crashed after block 2
    assert cs.last_step("3") == 2 and cs.diverged("3")
    assert cs.cost_s("3", 2, 4) == 0.0
    assert cs.last_step("4") == 0 and cs.diverged("4") and cs.cost_s("4", 0, 4) == 0.0


def test_without_a_planned_total_a_run_ends_at_its_last_evaluation(tmp_path):
    _write_set(tmp_path / "unplanned")
    configs = pd.read_csv(tmp_path / "unplanned" / "configs.csv")
    configs.drop(columns="total_model_steps").to_csv(tmp_path / "unplanned" / "configs.csv",
                                                     index=False)
    cs = load_curves(tmp_path, "unplanned/toy_a")
    assert [cs.last_step(c) for c in cs.config_ids()] == [4, 2, 2, 0]
    assert not any(cs.diverged(c) for c in cs.config_ids())
    assert cs.cost_s("1", 3, 4) == pytest.approx(500 * 32 * SECONDS_PER_EXAMPLE)
    assert "total_model_steps" not in cs.params("1")


# -- the shared set ---------------------------------------------------------------------------
needs_deberta = pytest.mark.skipif(not DEBERTA.is_dir(), reason=f"no curve set at {DEBERTA}")


@needs_deberta
def test_the_shared_set_replays_every_evaluation_interval():
    configs = pd.read_csv(DEBERTA / "configs.csv")
    curves = pd.read_csv(DEBERTA / "curves.csv.gz")
    names = [n for n in discover(SHARED) if n.startswith(f"{DEBERTA.name}/")]
    assert names == sorted(f"{DEBERTA.name}/{t}" for t in configs["task"].unique())
    for name in names:
        task = name.split("/", 1)[1]
        cs = load_curves(SHARED, name)
        here = configs[configs["task"] == task].set_index("config_id")
        assert len(cs) == len(here) and cs.metric == "acc_matched"
        assert cs.time_source is TimeSource.MODELLED
        blocks = -(-here["total_model_steps"] // 1000)
        assert cs.max_step == blocks.max()
        rows = curves[curves["task"] == task]
        for cid in here.index[:40]:
            c, r = str(cid), here.loc[cid]
            assert cs.last_step(c) == blocks[cid] and not cs.diverged(c)
            # the last step is the run's final evaluation, at total_model_steps
            assert cs.value(c, cs.last_step(c)) == pytest.approx(r["final_acc_matched"])
            assert cs.cost_s(c, 0, cs.last_step(c)) == pytest.approx(
                r["total_model_steps"] * r["train_batch_size"] * SECONDS_PER_EXAMPLE)
            on_grid = rows[(rows["config_id"] == cid) & (rows["step"] % 1000 == 0)]
            got = [cs.value(c, k) for k in on_grid["step"] // 1000]
            assert got == pytest.approx(on_grid["acc_matched"].tolist())


@needs_deberta
def test_successive_halving_replays_the_shared_set():
    curves = load_curves(SHARED, f"{DEBERTA.name}/deberta_base_mnli", max_configs=81, seed=0)
    run = simulate({"scheduler": {"type": "sha", "min_resource": 1, "max_resource": 9},
                    "num_trials": 27, "profile": {"boot_s": [60, 180]},
                    "provider": {"type": "local", "workers": 9, "scaling": "release-idle"}},
                   curves, seed=0, time_budget=None, cost_budget=200.0)
    assert run.outcome.reason == "done" and run.budget_respected
    segments = run.store.segments()
    rungs = Counter(s["stop_step"] for s in {(s["trial_id"], s["stop_step"]): s
                                             for s in segments}.values())
    assert rungs == {1: 27, 3: 9, 9: 3}
    ids = curves.config_ids()
    trials = run.trials.set_index("trial_id")
    # a run planned for fewer blocks than the rung ends there, as a shorter epoch budget does
    for s in segments:
        if s["state"] == "failed":
            assert curves.last_step(ids[int(trials.loc[s["trial_id"], "params.config"])]) < 9
    finalists = trials[trials["last_step"] == 9]["params.config"]
    assert run.best_value == max(curves.value(ids[i], 9) for i in finalists)
    # no step noise: a segment lasts the modelled seconds of its steps
    seg = next(s for s in segments if s["stop_step"] == 9 and s["state"] == "done")
    cid = ids[int(trials.loc[seg["trial_id"], "params.config"])]
    assert seg["finished_at"] - seg["started_at"] == pytest.approx(
        curves.cost_s(cid, seg["start_step"], 9), rel=0.02, abs=5.0)
    assert np.isfinite(run.wall_s)
