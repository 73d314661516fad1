"""Learning curves for replay: discovery from files, the replay rule against the raw CSVs,
divergence, deterministic subsets; on the shipped sample and, when present, the shared data."""

from __future__ import annotations

import functools
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tuner.sim import SAMPLE_DIR, _curves, default_data_dir, discover, load_curves

ROOT = Path(__file__).resolve().parents[3]
SHARED = (ROOT / os.environ.get("ELASTUNE_DATA", "../shared/data")).resolve()
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"no shared data at {SHARED}")
DATA_DIRS = [pytest.param(SAMPLE_DIR, id="sample"),
             pytest.param(SHARED, id="shared", marks=needs_shared)]


# -- the raw files, read here without the code under test -------------------------------------
@functools.cache
def _resumable_folders(data_dir: Path) -> dict[str, tuple[pd.DataFrame, pd.DataFrame, str, str]]:
    """Folder -> (configs, curves, task column, time column) for the per-epoch layouts."""
    out = {}
    for folder in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        if not ((folder / "configs.csv").exists() and (folder / "curves.csv.gz").exists()):
            continue
        curves = pd.read_csv(folder / "curves.csv.gz")
        time_col = next((c for c in ("elapsed_s", "time_s") if c in curves), None)
        if time_col is None or "epoch" not in curves:
            continue  # by optimizer step, without time (opda_deberta_mnli): test_step_curves.py
        task_col = "task" if "task" in curves else "openml_task_id"
        out[folder.name] = (pd.read_csv(folder / "configs.csv"), curves, task_col, time_col)
    return out


@functools.cache
def _raw_by_task(data_dir: Path, folder: str) -> dict[str, pd.DataFrame]:
    _, curves, task_col, _ = _resumable_folders(data_dir)[folder]
    return {str(t): rows for t, rows in curves.groupby(task_col)}


def _raw_curve(data_dir: Path, name: str, config_id: str) -> pd.DataFrame:
    folder, task = name.split("/", 1)
    rows = _raw_by_task(data_dir, folder)[task]
    return rows[rows["config_id"].astype(str) == config_id].sort_values("epoch")


def _resumable_names(data_dir: Path, per_folder: int = 3) -> list[str]:
    """The first few tasks of every per-epoch set (the shared YAHPO file holds 25)."""
    names = [n for n in discover(data_dir) if n.split("/")[0] in _resumable_folders(data_dir)]
    return [n for n in names
            if [m for m in names if m.split("/")[0] == n.split("/")[0]].index(n) < per_folder]


# -- discovery --------------------------------------------------------------------------------
@pytest.mark.parametrize("data_dir", DATA_DIRS)
def test_discover_reads_sets_and_tasks_from_the_files(data_dir):
    expected = set()
    for folder, (configs, curves, task_col, _) in _resumable_folders(data_dir).items():
        tasks = configs[task_col] if task_col in configs else curves[task_col]
        expected |= {f"{folder}/{t}" for t in tasks.astype(str).unique()}
    found = discover(data_dir)
    assert len(found) == len(set(found))
    assert expected and expected <= set(found)
    for folder in {n.split("/")[0] for n in found}:
        assert (data_dir / folder).is_dir()
    # a set by optimizer step without wall-clock time is found too, each of its tasks
    for folder in data_dir.iterdir():
        if (folder / "curves.csv.gz").exists() and folder.name not in _resumable_folders(data_dir):
            curves = pd.read_csv(folder / "curves.csv.gz", usecols=["task", "step"])
            assert {f"{folder.name}/{t}" for t in curves["task"].unique()} <= set(found)


def test_sample_ships_with_sources_and_licences():
    assert default_data_dir().is_dir()
    folders = {n.split("/")[0] for n in discover(SAMPLE_DIR)}
    assert len(folders) >= 2
    for folder in folders:
        assert (SAMPLE_DIR / folder / "LICENSE").exists()
        readme = (SAMPLE_DIR / folder / "README.md").read_text()
        assert "Licence" in readme and "Citation" in readme and "make_sample.py" in readme
    size = sum(p.stat().st_size for p in SAMPLE_DIR.rglob("*") if p.is_file())
    assert size < 600 * 1024


# -- the replay rule --------------------------------------------------------------------------
@pytest.mark.parametrize("data_dir", DATA_DIRS)
def test_cost_and_values_match_the_raw_files(data_dir):
    raw = _resumable_folders(data_dir)
    for name in _resumable_names(data_dir):
        folder, task = name.split("/", 1)
        _, curves, _, time_col = raw[folder]
        cs = load_curves(data_dir, name)
        assert cs.resumable and cs.mode == "max" and cs.metric in curves.columns
        task_rows = _raw_by_task(data_dir, folder)[task]
        assert set(task_rows["config_id"].astype(str)) <= set(cs.config_ids())
        ids = [c for c in cs.config_ids() if cs.last_step(c) >= 3][:4]
        assert ids
        for c in ids:
            rows = _raw_curve(data_dir, name, c)
            assert rows["epoch"].tolist() == list(range(1, cs.last_step(c) + 1))
            # cumulative time, with a running max where the surrogate's dips
            elapsed = np.concatenate([[0.0], np.maximum.accumulate(rows[time_col].to_numpy())])
            last = cs.last_step(c)
            for a, b in [(0, 1), (0, last), (1, last), (2, 3), (last - 1, last), (2, 2)]:
                assert cs.cost_s(c, a, b) == pytest.approx(elapsed[b] - elapsed[a], abs=1e-9)
            assert cs.value(c, 0) is None
            assert [cs.value(c, s) for s in range(1, last + 1)] == \
                pytest.approx(rows[cs.metric].tolist())
            assert cs.value(c, last + 1) is None


@pytest.mark.parametrize("data_dir", DATA_DIRS)
def test_cost_is_additive_and_never_negative(data_dir):
    rng = np.random.default_rng(0)
    for name in _resumable_names(data_dir)[:3]:
        cs = load_curves(data_dir, name, max_configs=20)
        for c in cs.config_ids():
            a, b, d = sorted(rng.integers(0, cs.max_step + 5, size=3).tolist())
            assert cs.cost_s(c, a, b) >= 0
            assert cs.cost_s(c, a, b) + cs.cost_s(c, b, d) == pytest.approx(cs.cost_s(c, a, d))
        assert cs.step_seconds_median() > 0


@pytest.mark.parametrize("data_dir", DATA_DIRS)
def test_diverged_runs_end_early(data_dir):
    seen = 0
    for folder, (configs, _, task_col, _) in _resumable_folders(data_dir).items():
        if "diverged" not in configs:
            continue
        for row in configs[configs["diverged"] == 1].itertuples():
            cs = load_curves(data_dir, f"{folder}/{getattr(row, task_col)}")
            c = str(row.config_id)
            assert cs.diverged(c)
            assert cs.last_step(c) == row.epochs_recorded < row.epochs_planned
            assert cs.value(c, cs.last_step(c) + 1) is None
            # past the crash there is nothing more to pay for
            assert cs.cost_s(c, 0, cs.max_step) == cs.cost_s(c, 0, cs.last_step(c))
            seen += 1
        for row in configs[configs["diverged"] == 0].head(5).itertuples():
            cs = load_curves(data_dir, f"{folder}/{getattr(row, task_col)}")
            assert not cs.diverged(str(row.config_id))
            assert cs.last_step(str(row.config_id)) == row.epochs_planned
    assert seen >= 6
    with pytest.raises(ValueError, match="stop"):
        cs.cost_s(cs.config_ids()[0], 3, 2)


# -- loading ----------------------------------------------------------------------------------
def test_a_renamed_set_folder_still_loads(tmp_path):
    for folder in sorted({n.split("/")[0] for n in discover(SAMPLE_DIR)}):
        target = tmp_path / f"renamed_{len(list(tmp_path.iterdir()))}"
        shutil.copytree(SAMPLE_DIR / folder, target)
        before = [n for n in discover(SAMPLE_DIR) if n.startswith(f"{folder}/")]
        after = [n for n in discover(tmp_path) if n.startswith(f"{target.name}/")]
        assert [n.split("/", 1)[1] for n in after] == [n.split("/", 1)[1] for n in before]
        old, new = load_curves(SAMPLE_DIR, before[0]), load_curves(tmp_path, after[0])
        assert new.name == after[0]
        assert new.config_ids() == old.config_ids()
        c = old.config_ids()[-1]
        assert new.cost_s(c, 0, new.max_step) == old.cost_s(c, 0, old.max_step)


def test_max_configs_draws_the_same_subset_for_a_seed():
    name = discover(SAMPLE_DIR)[0]
    full = load_curves(SAMPLE_DIR, name)
    one = load_curves(SAMPLE_DIR, name, max_configs=10, seed=3)
    two = load_curves(SAMPLE_DIR, name, max_configs=10, seed=3)
    other = load_curves(SAMPLE_DIR, name, max_configs=10, seed=4)
    assert one.config_ids() == two.config_ids() and len(one.config_ids()) == 10
    assert one.config_ids() != other.config_ids()
    assert set(one.config_ids()) <= set(full.config_ids())
    c = one.config_ids()[0]
    assert one.params(c) == full.params(c) and one.cost_s(c, 0, 2) == full.cost_s(c, 0, 2)
    assert load_curves(SAMPLE_DIR, name, max_configs=10_000).config_ids() == full.config_ids()
    with pytest.raises(ValueError, match="max_configs"):
        load_curves(SAMPLE_DIR, name, max_configs=0)


def test_unknown_name_lists_what_is_available():
    with pytest.raises(ValueError) as err:
        load_curves(SAMPLE_DIR, "no_such_set/no_such_task")
    for name in discover(SAMPLE_DIR):
        assert name.split("/", 1)[1] in str(err.value)
    with pytest.raises(ValueError, match="available"):
        load_curves(SAMPLE_DIR, discover(SAMPLE_DIR)[0].split("/")[0])


def test_params_are_json_scalars():
    import json

    for name in discover(SAMPLE_DIR):
        cs = load_curves(SAMPLE_DIR, name, max_configs=5)
        for c in cs.config_ids():
            p = cs.params(c)
            assert p and all(isinstance(v, (int, float, str)) for v in p.values())
            json.dumps(p)


# -- the shared data only ---------------------------------------------------------------------
@needs_shared
def test_full_opda_load_is_fast():
    folders = _resumable_folders(SHARED)
    name = next(n for n in _resumable_names(SHARED) if "diverged" in folders[n.split("/")[0]][0])
    for cache in (_curves._sources, _curves._tables, _curves._full_set):
        cache.cache_clear()  # a cold load: parse the files again
    t0 = time.perf_counter()
    cs = load_curves(SHARED, name)
    assert time.perf_counter() - t0 < 2.0
    assert len(cs) == (folders[name.split("/")[0]][0]["task"] == name.split("/", 1)[1]).sum()


@needs_shared
def test_full_fit_sets_cost_the_fit_at_the_stop_step():
    full_fit = {}
    for folder in sorted(p for p in SHARED.iterdir() if p.is_dir()):
        for f in sorted(folder.glob("*.csv*")):
            cols = set(pd.read_csv(f, nrows=0).columns)
            if {"openmlid", "learner", "anchor", "traintime_s", "score_valid"} <= cols:
                full_fit[folder.name] = (f, "openmlid", "learner", "anchor", "traintime_s",
                                         "score_valid")
            elif {"arch_hash", "budget_epochs", "repeat", "val_acc", "total_time_s"} <= cols:
                full_fit[folder.name] = (f, None, "arch_hash", "budget_epochs", "total_time_s",
                                         "val_acc")
    if not full_fit:
        pytest.skip("no full-fit set in the shared data")
    names = discover(SHARED)
    for folder, (f, task_col, cfg, fid, tcol, metric) in full_fit.items():
        raw = pd.read_csv(f)
        name = next(n for n in names if n.startswith(f"{folder}/"))
        task = name.split("/", 1)[1]
        if task_col:
            raw = raw[raw[task_col].astype(str) == task]
        # repeats of one (config, fidelity) are averaged
        raw = raw.groupby([cfg, fid], as_index=False)[[tcol, metric]].mean()
        levels = sorted(raw[fid].unique())
        cs = load_curves(SHARED, name)
        assert not cs.resumable and cs.max_step == len(levels)
        for c in cs.config_ids()[:5]:
            rows = raw[raw[cfg].astype(str) == c].sort_values(fid)
            for _, r in rows.iterrows():
                k = levels.index(r[fid]) + 1
                assert cs.cost_s(c, 0, k) == pytest.approx(r[tcol])
                assert cs.cost_s(c, k - 1, k) == pytest.approx(r[tcol])  # a new fit from scratch
                assert cs.value(c, k) == pytest.approx(r[metric])
            assert cs.diverged(c) == (cs.last_step(c) < len(levels))
