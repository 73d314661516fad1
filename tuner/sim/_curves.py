"""Learning curves to replay in simulation: metric and seconds of real (or surrogate) runs by step.

A directory laid out like ``../shared/data`` holds one folder per data set. A set is recognised by
its files and their columns, never by its folder name, and its tasks are read from the files:

- resumable, per epoch (``opda_imagenet``, ``yahpo_lcbench_surrogate``): ``configs.csv`` and
  ``curves.csv.gz`` with ``config_id``, ``epoch``, a cumulative time column (``elapsed_s`` or
  ``time_s``), a task column (``task`` or ``openml_task_id``) and ``val_*`` metrics. Running a
  trial from step a to step b costs ``elapsed[b] - elapsed[a]``.
- full fits (``lcdb1``: ``openmlid, learner, anchor, traintime_s, score_valid``; ``ecnas_nb101``:
  ``*_runs.csv`` with ``arch_hash, budget_epochs, repeat, val_acc, total_time_s``): every
  fidelity is a separate fit from scratch, so reaching step k costs the fit time at step k.
- resumable, per optimizer step, without time (``opda_deberta_mnli``): ``configs.csv`` with
  ``config_id``, a batch size (``train_batch_size`` or ``batch_size``) and optionally the planned
  ``total_model_steps``; ``curves.csv.gz`` with ``config_id``, ``step``, a task column and
  ``val_*`` or ``acc_*`` metrics, and no time column. A sweep step is one evaluation interval
  (the most common gap between evaluations, 1,000 optimizer steps there); the last, partial one
  ends at the planned total. Evaluations off that grid (the source's end-of-epoch ones) are not
  steps. Seconds are modelled (:mod:`tuner.sim._modelled_time`), so the set's
  :attr:`CurveSet.time_source` is ``MODELLED``.

Step 0 is "not trained yet"; step k is the k-th epoch or evaluation interval (resumable) or the
k-th fidelity level in increasing order (full fits).
No tabular-benchmark library reads these CSVs (Syne Tune's blackboxes and YAHPO want their own
formats and downloads), hence this small reader.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tuner.sim._modelled_time import modelled_seconds

SAMPLE_DIR = Path(__file__).resolve().parent / "data" / "curves_sample"

_TIME_COLUMNS = ("elapsed_s", "time_s")
_TASK_COLUMNS = ("task", "openml_task_id")
_CONFIG_SUMMARY = {"task", "config_id", "diverged", "epochs_recorded"}
_CONFIG_SUMMARY_PREFIXES = ("final_", "total_")
_LCDB_COLUMNS = {"openmlid", "learner", "anchor", "traintime_s", "score_valid"}
_NB101_COLUMNS = {"arch_hash", "budget_epochs", "repeat", "val_acc", "total_time_s"}
_LOWER_IS_BETTER = ("loss", "entropy", "error", "mse", "rmse")
_BATCH_COLUMNS = ("train_batch_size", "batch_size")
_PLANNED_STEPS = "total_model_steps"
_STEP_METRIC_PREFIXES = ("val_", "acc_")


def default_data_dir() -> Path:
    """``../shared/data`` next to the repository when it exists, else the shipped sample."""
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    return shared if shared.is_dir() else SAMPLE_DIR


# -- the curves of one task -------------------------------------------------------------------
class TimeSource(enum.Enum):
    """Where a curve set's seconds come from."""

    RECORDED = "recorded"  # read from the set's files (measured, or a surrogate's prediction)
    MODELLED = "modelled"  # the files hold none: steps x batch size at one published rate


@dataclass(frozen=True)
class _Curve:
    params: dict[str, float | int | str]
    time_s: np.ndarray  # index = step; [0] = 0. Cumulative (resumable) or fit time (full fit)
    values: np.ndarray  # index = step; NaN where no value ([0], gaps)
    diverged: bool

    @property
    def last_step(self) -> int:
        return len(self.values) - 1


class CurveSet:
    """The learning curves of one task of one data set, e.g. ``opda_imagenet/alexnet_imagenet``.

    Made by :func:`load_curves`. A simulated trial of config ``c`` that runs from step ``a`` to
    step ``b`` takes ``cost_s(c, a, b)`` seconds and then reports ``value(c, b)``. A run cannot
    go past its ``last_step`` (a diverged run crashed there; a finished run planned no more), so
    steps past it cost nothing more and have no value.

    Example::

        curves = load_curves(default_data_dir(), discover(default_data_dir())[0], max_configs=8)
        c = curves.config_ids()[0]
        seconds, metric = curves.cost_s(c, 0, 3), curves.value(c, 3)

    ``time_source`` says whether those seconds were read from the files or modelled
    (:class:`TimeSource`).
    """

    def __init__(self, name: str, metric: str, mode: str, resumable: bool,
                 curves: dict[str, _Curve],
                 time_source: TimeSource = TimeSource.RECORDED) -> None:
        if mode not in ("max", "min"):
            raise ValueError(f"mode is {mode!r}, but must be 'max' or 'min'")
        self.name = name
        self.metric = metric
        self.mode = mode
        self.resumable = resumable
        self.time_source = time_source
        self._curves = curves
        self.max_step = max((c.last_step for c in curves.values()), default=0)

    def __repr__(self) -> str:
        kind = "resumable" if self.resumable else "full fits"
        return (f"CurveSet({self.name!r}, {len(self._curves)} configs, metric={self.metric!r} "
                f"({self.mode}), {kind}, max_step={self.max_step}, "
                f"{self.time_source.value} seconds)")

    def __len__(self) -> int:
        return len(self._curves)

    def _curve(self, config_id: str) -> _Curve:
        try:
            return self._curves[config_id]
        except KeyError:
            raise KeyError(f"no config {config_id!r} in {self.name}") from None

    def config_ids(self) -> list[str]:
        return list(self._curves)

    def params(self, config_id: str) -> dict[str, float | int | str]:
        """The config's hyperparameters, as JSON scalars."""
        return dict(self._curve(config_id).params)

    def last_step(self, config_id: str) -> int:
        """The last step with a value: diverged runs end early; 0 if the run logged nothing."""
        return self._curve(config_id).last_step

    def diverged(self, config_id: str) -> bool:
        return self._curve(config_id).diverged

    def value(self, config_id: str, step: int) -> float | None:
        """The metric after ``step``; None at step 0, past ``last_step`` and where the source has
        no measurement (a few full-fit curves have holes)."""
        curve = self._curve(config_id)
        step = _check_step("step", step)
        if step > curve.last_step:
            return None
        v = curve.values[step]
        return None if math.isnan(v) else float(v)

    def cost_s(self, config_id: str, start: int, stop: int) -> float:
        """Seconds to train from ``start`` to ``stop``, both clamped to ``last_step``.

        Resumable: ``elapsed[stop] - elapsed[start]`` (additive over segments). Full fits: the
        fit time at ``stop`` whatever ``start`` was, since each fidelity is trained from scratch;
        0 when nothing new is trained.
        """
        curve = self._curve(config_id)
        start, stop = _check_step("start", start), _check_step("stop", stop)
        if stop < start:
            raise ValueError(f"stop is {stop}, but must be >= start ({start})")
        a, b = min(start, curve.last_step), min(stop, curve.last_step)
        if self.resumable:
            return float(curve.time_s[b] - curve.time_s[a])
        return float(curve.time_s[b]) if b > start else 0.0

    def step_seconds_median(self) -> float:
        """Median over configs of seconds per step (cost to ``last_step`` / ``last_step``)."""
        rates = [self.cost_s(c, 0, curve.last_step) / curve.last_step
                 for c, curve in self._curves.items() if curve.last_step > 0]
        return float(np.median(rates)) if rates else math.nan

    def _subset(self, config_ids: Iterable[str]) -> CurveSet:
        return CurveSet(self.name, self.metric, self.mode, self.resumable,
                        {c: self._curves[c] for c in config_ids}, self.time_source)


def _check_step(what: str, step: int) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise ValueError(f"{what} is {step!r}, but must be an integer >= 0")
    return int(step)


# -- finding sets in a directory --------------------------------------------------------------
@dataclass(frozen=True)
class _Source:
    kind: str  # "resumable" | "steps" | "lcdb" | "nb101"
    files: tuple[str, ...]  # file names inside the set folder
    task: str = ""  # nb101: the one task a runs file holds


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """Names, sizes and mtimes of the CSVs in ``folder``: a cache key that notices edits."""
    out = []
    for p in sorted(folder.iterdir()):
        if p.is_file() and (p.name.endswith(".csv") or p.name.endswith(".csv.gz")):
            st = p.stat()
            out.append((p.name, st.st_size, st.st_mtime_ns))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _sources(folder: str, signature: tuple) -> tuple[_Source, ...]:
    headers = {}
    for name, _, _ in signature:
        try:
            headers[name] = set(pd.read_csv(Path(folder, name), nrows=0).columns)
        except (ValueError, OSError, UnicodeDecodeError):
            continue  # not a table we can read: not part of any set we know
    found = []
    configs, curves = headers.get("configs.csv"), headers.get("curves.csv.gz")
    if (configs is not None and curves is not None and "config_id" in configs
            and {"config_id", "epoch"} <= curves
            and any(c in curves for c in _TIME_COLUMNS)
            and any(c in curves for c in _TASK_COLUMNS)
            and any(c.startswith("val_") for c in curves)):
        found.append(_Source("resumable", ("configs.csv", "curves.csv.gz")))
    elif (configs is not None and curves is not None and "config_id" in configs
            and any(c in configs for c in _BATCH_COLUMNS)
            and {"config_id", "step"} <= curves
            and not any(c in curves for c in _TIME_COLUMNS)
            and any(c in curves for c in _TASK_COLUMNS)
            and any(c.startswith(_STEP_METRIC_PREFIXES) for c in curves)):
        found.append(_Source("steps", ("configs.csv", "curves.csv.gz")))
    for name, cols in headers.items():
        if _LCDB_COLUMNS <= cols:
            found.append(_Source("lcdb", (name,)))
        elif _NB101_COLUMNS <= cols:
            task = name.removesuffix(".gz").removesuffix(".csv").removesuffix("_runs")
            found.append(_Source("nb101", (name,), task))
    return tuple(found)


def _set_sources(folder: Path) -> tuple[_Source, ...]:
    return _sources(str(folder.resolve()), _signature(folder))


def _data_folders(data_dir: str | Path) -> list[Path]:
    root = Path(data_dir)
    if not root.is_dir():
        raise ValueError(f"data directory {str(root)!r} does not exist")
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def discover(data_dir: str | Path) -> list[str]:
    """Names (``"<set folder>/<task>"``) of every curve set the directory holds, from its files."""
    return [n for folder in _data_folders(data_dir) for n in _folder_names(folder)]


def _folder_names(folder: Path) -> list[str]:
    sources = _set_sources(folder)
    if not sources:
        return []
    tables = _tables(str(folder.resolve()), _signature(folder), sources)
    return [f"{folder.name}/{task}" for task in tables.tasks()]


# -- reading a set, once per process ----------------------------------------------------------
class _Tables:
    """The parsed files of one set folder, with each task's rows found once."""

    def __init__(self, folder: Path, sources: tuple[_Source, ...]) -> None:
        self._where: dict[str, tuple[_Source, pd.DataFrame, pd.DataFrame | None]] = {}
        for source in sources:
            if source.kind in ("resumable", "steps"):
                self._read_resumable(folder, source)
            elif source.kind == "lcdb":
                frame = pd.read_csv(folder / source.files[0])
                for task, rows in frame.groupby("openmlid", sort=True):
                    self._add(str(task), source, rows, None)
            else:
                frame = pd.read_csv(folder / source.files[0], dtype={"adjacency": str})
                self._add(source.task, source, frame, None)

    def _add(self, task: str, source: _Source, rows: pd.DataFrame,
             configs: pd.DataFrame | None) -> None:
        if task in self._where:
            raise ValueError(f"task {task!r} appears in two files of one set folder")
        self._where[task] = (source, rows, configs)

    def _read_resumable(self, folder: Path, source: _Source) -> None:
        configs = pd.read_csv(folder / "configs.csv")
        curves = pd.read_csv(folder / "curves.csv.gz")
        task_col = next(c for c in _TASK_COLUMNS if c in curves.columns)
        index = "epoch" if source.kind == "resumable" else "step"
        curves = curves.sort_values([task_col, "config_id", index], kind="stable")
        by_task = dict(iter(curves.groupby(task_col, sort=True)))
        if task_col in configs.columns:
            # tasks come from configs.csv, so runs that logged no epoch still count
            for task, rows in configs.groupby(task_col, sort=True):
                self._add(str(task), source, by_task.get(task, curves.iloc[:0]), rows)
        else:
            # one config table shared by all tasks; a task holds the configs it has curves for
            for task, rows in by_task.items():
                present = configs[configs["config_id"].isin(rows["config_id"].unique())]
                self._add(str(task), source, rows, present)

    def tasks(self) -> list[str]:
        return list(self._where)

    def build(self, name: str, task: str) -> CurveSet:
        source, rows, configs = self._where[task]
        if source.kind == "resumable":
            return _build_resumable(name, rows, configs)
        if source.kind == "steps":
            return _build_steps(name, rows, configs)
        if source.kind == "lcdb":
            return _build_full_fit(name, rows, "learner", "anchor", "traintime_s",
                                   "score_valid", lambda cid, _: {"learner": str(cid)})
        runs = rows.groupby(["arch_hash", "budget_epochs"], sort=False).agg(
            adjacency=("adjacency", "first"), ops=("ops", "first"),
            val_acc=("val_acc", "mean"), total_time_s=("total_time_s", "mean")).reset_index()
        return _build_full_fit(
            name, runs, "arch_hash", "budget_epochs", "total_time_s", "val_acc",
            lambda _, g: {"adjacency": str(g["adjacency"].iloc[0]), "ops": str(g["ops"].iloc[0])})


@functools.lru_cache(maxsize=16)
def _tables(folder: str, signature: tuple, sources: tuple[_Source, ...]) -> _Tables:
    return _Tables(Path(folder), sources)


@functools.lru_cache(maxsize=512)
def _full_set(folder: str, signature: tuple, set_name: str, task: str) -> CurveSet:
    tables = _tables(folder, signature, _sources(folder, signature))
    return tables.build(f"{set_name}/{task}", task)


def _json_scalar(v: object) -> float | int | str | None:
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else float(v)
    return None if v is None or v is pd.NA else str(v)


def _mode_of(metric: str) -> str:
    return "min" if any(w in metric for w in _LOWER_IS_BETTER) else "max"


def _build_resumable(name: str, curves: pd.DataFrame, configs: pd.DataFrame) -> CurveSet:
    metric = next(c for c in curves.columns if c.startswith("val_"))
    time_col = next(c for c in _TIME_COLUMNS if c in curves.columns)
    param_cols = [c for c in configs.columns if c not in _CONFIG_SUMMARY
                  and not c.startswith(_CONFIG_SUMMARY_PREFIXES)]
    flagged = (dict(zip(configs["config_id"], configs["diverged"].astype(bool), strict=True))
               if "diverged" in configs.columns else {})

    ids = curves["config_id"].to_numpy()
    epochs = curves["epoch"].to_numpy()
    times = curves[time_col].to_numpy(dtype=float)
    vals = curves[metric].to_numpy(dtype=float)
    keys, first = np.unique(ids, return_index=True)
    bounds = dict(zip(keys.tolist(), zip(first, np.append(first[1:], len(ids)), strict=True),
                      strict=True))

    listed = list(configs["config_id"])
    order = listed + sorted(set(keys.tolist()) - set(listed))
    params = {cid: rec for cid, rec in zip(
        configs["config_id"], configs[param_cols].to_dict("records"), strict=True)}
    out: dict[str, _Curve] = {}
    for cid in order:
        lo, hi = bounds.get(cid, (0, 0))
        n = int(epochs[lo:hi].max()) if hi > lo else 0
        t = np.full(n + 1, np.nan)
        v = np.full(n + 1, np.nan)
        t[0] = 0.0
        t[epochs[lo:hi]], v[epochs[lo:hi]] = times[lo:hi], vals[lo:hi]
        ok = np.isfinite(t[1:]) & np.isfinite(v[1:])
        last = n if ok.all() else int(np.argmin(ok))  # the run ends at its first hole or NaN
        # cumulative time must not fall (the YAHPO surrogate's sometimes does): running max
        t = np.maximum.accumulate(t[: last + 1])
        p = {k: s for k, s in ((k, _json_scalar(x)) for k, x in params.get(cid, {}).items())
             if s is not None}
        out[str(cid)] = _Curve(p, t, v[: last + 1], bool(flagged.get(cid, False)) or last < n)
    return CurveSet(name, metric, _mode_of(metric), True, out)


def _build_steps(name: str, curves: pd.DataFrame, configs: pd.DataFrame) -> CurveSet:
    """Step-indexed curves without time: sweep step k ends at optimizer step
    ``min(k * interval, planned)`` and costs the modelled seconds of the steps since step k-1."""
    metric = _step_metric(list(curves.columns))
    batch_col = next(c for c in _BATCH_COLUMNS if c in configs.columns)
    # the planned length is a setting of the run, as epochs_planned is for per-epoch sets
    param_cols = [c for c in configs.columns if c == _PLANNED_STEPS or (
        c not in _CONFIG_SUMMARY and not c.startswith(_CONFIG_SUMMARY_PREFIXES))]
    flagged = (dict(zip(configs["config_id"], configs["diverged"].astype(bool), strict=True))
               if "diverged" in configs.columns else {})
    interval = _eval_interval(curves)

    ids = curves["config_id"].to_numpy()
    steps = curves["step"].to_numpy(dtype=np.int64)
    vals = curves[metric].to_numpy(dtype=float)
    keys, first = np.unique(ids, return_index=True)
    bounds = dict(zip(keys.tolist(), zip(first, np.append(first[1:], len(ids)), strict=True),
                      strict=True))
    rows = dict(zip(configs["config_id"], configs.to_dict("records"), strict=True))
    out: dict[str, _Curve] = {}
    for cid in list(rows) + sorted(set(keys.tolist()) - set(rows)):
        lo, hi = bounds.get(cid, (0, 0))
        row = rows.get(cid, {})
        planned = row.get(_PLANNED_STEPS)
        planned = int(planned) if _is_number(planned) else int(steps[lo:hi].max(initial=0))
        n = -(-planned // interval)  # blocks of `interval` steps, the last one partial
        ends = np.minimum(np.arange(1, n + 1, dtype=np.int64) * interval, planned)
        v = np.concatenate([[np.nan], _values_at(steps[lo:hi], vals[lo:hi], ends)])
        ok = np.isfinite(v[1:])
        last = n if ok.all() else int(np.argmin(ok))  # the run ends at its first missing block
        batch = row.get(batch_col)
        if last and not _is_number(batch):
            raise ValueError(f"config {cid!r} of {name} has no {batch_col}, so its seconds "
                             "cannot be modelled")
        t = modelled_seconds(np.concatenate([[0], ends[:last]]), float(batch) if last else 1.0)
        p = {k: x for k, x in ((k, _json_scalar(row[k])) for k in param_cols if k in row)
             if x is not None}
        out[str(cid)] = _Curve(p, t, v[: last + 1], bool(flagged.get(cid, False)) or last < n)
    return CurveSet(name, metric, _mode_of(metric), True, out, TimeSource.MODELLED)


def _step_metric(columns: list[str]) -> str:
    """The first ``val_*`` column, as per-epoch sets choose, else the first ``acc_*`` one
    (MultiNLI: matched accuracy, the split the task reports first)."""
    for prefix in _STEP_METRIC_PREFIXES:
        found = [c for c in columns if c.startswith(prefix)]
        if found:
            return found[0]
    raise ValueError(f"no val_* or acc_* column among {columns}")


def _eval_interval(curves: pd.DataFrame) -> int:
    """The most common gap between a run's consecutive evaluations (rows sorted by config and
    step); the smallest step where no run has two."""
    step = curves["step"].to_numpy(dtype=np.int64)
    cid = curves["config_id"].to_numpy()
    gaps = np.diff(step)[(cid[1:] == cid[:-1]) & (np.diff(step) > 0)]
    if len(gaps):
        values, counts = np.unique(gaps, return_counts=True)
        return int(values[np.argmax(counts)])
    positive = step[step > 0]
    return int(positive.min()) if len(positive) else 1


def _values_at(steps: np.ndarray, values: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``values`` at each of ``ends`` (``steps`` sorted); NaN where no evaluation was made."""
    pos = np.searchsorted(steps, ends)
    found = pos < len(steps)
    found[found] = steps[pos[found]] == ends[found]
    out = np.full(len(ends), np.nan)
    out[found] = values[pos[found]]
    return out


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) \
        and math.isfinite(float(x))


def _build_full_fit(name: str, rows: pd.DataFrame, config_col: str, fidelity_col: str,
                    time_col: str, metric: str,
                    params_of: Callable[[object, pd.DataFrame], dict]) -> CurveSet:
    levels = np.sort(rows[fidelity_col].unique())
    top = len(levels)
    out: dict[str, _Curve] = {}
    for cid, g in rows.groupby(config_col, sort=False):
        steps = np.searchsorted(levels, g[fidelity_col].to_numpy()) + 1
        t_raw, v_raw = g[time_col].to_numpy(dtype=float), g[metric].to_numpy(dtype=float)
        ok = np.isfinite(t_raw) & np.isfinite(v_raw)
        steps, t_raw, v_raw = steps[ok], t_raw[ok], v_raw[ok]
        last = int(steps.max()) if len(steps) else 0
        v = np.full(last + 1, np.nan)
        v[steps] = v_raw
        t = np.zeros(last + 1)
        if last:
            # holes (no fit at that fidelity in the source): interpolate the fit time
            order = np.argsort(steps)
            t[1:] = np.interp(np.arange(1, last + 1), steps[order], t_raw[order])
        out[str(cid)] = _Curve(params_of(cid, g), t, v, last < top)
    return CurveSet(name, metric, _mode_of(metric), False, out)


def load_curves(data_dir: str | Path, name: str, *, max_configs: int | None = None,
                seed: int = 0) -> CurveSet:
    """The curve set ``name`` (as :func:`discover` lists it) from ``data_dir``.

    ``max_configs`` keeps a uniform random subset of that many configs, drawn with ``seed``
    (the same seed gives the same subset), in the file's order. Parsed files are cached in the
    process, so loading another task of the same set is cheap.
    """
    if max_configs is not None and (isinstance(max_configs, bool)
                                    or not isinstance(max_configs, (int, np.integer))
                                    or max_configs < 1):
        raise ValueError(f"max_configs is {max_configs!r}, but must be None or an integer >= 1")
    set_name, _, task = str(name).partition("/")
    folder = Path(data_dir) / set_name
    if not (set_name and task and folder.is_dir() and not set_name.startswith(".")
            and f"{set_name}/{task}" in _folder_names(folder)):
        available = discover(data_dir)
        raise ValueError(f"no curve set {name!r} in {str(data_dir)!r}; "
                         f"available: {_summarise(available) or 'none'}")
    curves = _full_set(str(folder.resolve()), _signature(folder), set_name, task)
    ids = curves.config_ids()
    if max_configs is None or max_configs >= len(ids):
        return curves._subset(ids)
    keep = np.sort(np.random.default_rng(seed).choice(len(ids), size=max_configs, replace=False))
    return curves._subset(ids[i] for i in keep)


def _summarise(names: list[str]) -> str:
    by_set: dict[str, list[str]] = {}
    for n in names:
        s, t = n.split("/", 1)
        by_set.setdefault(s, []).append(t)
    return "; ".join(f"{s}/{{{', '.join(ts)}}}" for s, ts in by_set.items())
