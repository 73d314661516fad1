"""elastune's own overhead, measured on the real code through ``tuner.tune``.

Four figures, each baseline run in the same invocation:
1. dispatch latency, segment submitted -> trainable started (as the controller measures it);
2. reports per second streamed from the workers into the experiment store;
3. wall time of a digits sweep against an in-process Optuna study running the same trainable;
4. the same against Ray Tune, when ``ray[tune]`` is installed.

    python benchmarks/overhead.py [--trials 64] [--reports 20000] [--segments 300]
                                  [--workers 2] [--skip-ray] [--json] [--out DIR]

A table goes to stdout; with ``--json`` stdout holds one JSON object ``{"summary", "details"}``
and nothing else. Progress, and whatever the libraries print, goes to stderr.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks._trainables` importable
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import optuna  # noqa: E402
import yaml  # noqa: E402
from optuna.distributions import (  # noqa: E402
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import examples.digits  # noqa: E402  (imported here so no timed run pays for sklearn's import)
from benchmarks._runner import emit, run_quietly  # noqa: E402
from tuner import load_sweep, tune, uniform  # noqa: E402
from tuner._store import Store  # noqa: E402

DIGITS_SWEEP = ROOT / "examples" / "digits.yaml"
DIGITS_MAX_STEP = 27
TIME_BUDGET = "30m"  # generous: no benchmark run should be cut by its budget

_err = Console(stderr=True, width=200)


def _say(message: str) -> None:
    _err.print(f"[dim]overhead:[/dim] {message}", highlight=False)


def _base_sweep(workers: int) -> dict[str, Any]:
    return {
        "provider": {"type": "local", "workers": workers, "slots": 1, "price_per_hour": 1.0},
        "budget": {"time": TIME_BUDGET},
    }


def _percentiles_ms(values_s: list[float]) -> dict[str, Any]:
    ms = np.asarray(values_s, dtype=float) * 1000.0
    if ms.size == 0:
        return {"count": 0}
    return {
        "count": int(ms.size),
        "p50_ms": float(np.percentile(ms, 50)), "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()),
        "min_ms": float(ms.min()), "mean_ms": float(ms.mean()),
    }


def _check_finished(result: Any, what: str) -> None:
    if result.state != "finished":
        raise RuntimeError(
            f"{what}: tune() ended in state {result.state!r} "
            f"({result.status.get('trials')}); see {result.experiment_dir}")


# -- 1. dispatch latency ------------------------------------------------------------------------
def bench_dispatch(segments: int, workers: int, out: Path) -> dict[str, Any]:
    # ASHA 1/3/9 runs a trial to rung 1, a third of them on to 3 and a ninth to 9: about
    # 13/9 segments per trial.
    trials = max(1, math.ceil(segments * 9 / 13))
    _say(f"dispatch: {trials} noop trials, ASHA 1..9 eta 3, {workers} workers")
    exp_dir = out / "dispatch"
    t0 = time.perf_counter()
    result = tune(
        {"trainable": "benchmarks._trainables:noop", "metric": "score", "mode": "max",
         "space": {"x": uniform(0.0, 1.0)}, "sampler": "random", "num_trials": trials,
         "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                       "reduction_factor": 3},
         **_base_sweep(workers)},
        seed=0, experiment_dir=exp_dir)
    wall = time.perf_counter() - t0
    _check_finished(result, "dispatch")
    store = Store(exp_dir, readonly=True)
    try:
        segs = store.segments()
    finally:
        store.close()
    latencies = list(result.dispatch_latencies_s)
    return {
        "trials": trials, "segments": len(segs), "workers": workers,
        "latency": _percentiles_ms(latencies), "tune_wall_s": wall,
        "controller_wall_s": result.wall_s,
        "segments_per_s": len(segs) / result.wall_s if result.wall_s else None,
        "experiment_dir": str(exp_dir),
    }


# -- 2. reports per second into the store -------------------------------------------------------
def bench_reports(reports: int, workers: int, out: Path) -> dict[str, Any]:
    steps = max(1, reports // workers)
    _say(f"reports: {workers} chatty trials x {steps} steps, one report per step")
    exp_dir = out / "reports"
    t_call = time.time()
    result = tune(
        {"trainable": "benchmarks._trainables:chatty", "metric": "score", "mode": "max",
         "space": {"x": uniform(0.0, 1.0)}, "sampler": "random", "num_trials": workers,
         # min == max: one segment per trial, no pause.
         "scheduler": {"type": "asha", "min_resource": steps, "max_resource": steps,
                       "reduction_factor": 3},
         **_base_sweep(workers)},
        seed=0, experiment_dir=exp_dir)
    t_return = time.time()
    _check_finished(result, "reports")
    store = Store(exp_dir, readonly=True)
    try:
        rows = store.reports()
        segs = store.segments()
        # The controller commits a segment's reports before it marks the trial finished, so the
        # trials' last update is when the last report row was committed, at the latest.
        committed_by = max(float(t) for t in store.trials_frame()["updated_at"])
    finally:
        store.close()
    stored = len(rows)
    # The trainable reports once per step, so a segment emitted (last step - start step) reports.
    emitted = sum((s["last_step"] or 0) - (s["start_step"] or 0) for s in segs)
    expected = workers * steps
    if not rows:
        raise RuntimeError(f"reports: the store holds no reports; see {exp_dir}")
    ts = [r["ts"] for r in rows]
    first, last = min(ts), max(ts)
    emission_s = last - first
    end_to_end_s = t_return - first
    commit_s = committed_by - first
    return {
        "workers": workers, "trials": workers, "steps_per_trial": steps,
        "expected": expected, "emitted": emitted, "stored": stored, "lost": emitted - stored,
        "segments": len(segs), "segment_states": sorted({s["state"] for s in segs}),
        "emission_window_s": emission_s, "end_to_end_window_s": end_to_end_s,
        "commit_window_s": commit_s,
        "reports_per_s_emission": stored / emission_s if emission_s > 0 else None,
        "reports_per_s_committed": stored / commit_s if commit_s > 0 else None,
        "reports_per_s_end_to_end": stored / end_to_end_s if end_to_end_s > 0 else None,
        "tune_wall_s": t_return - t_call, "controller_wall_s": result.wall_s,
        "experiment_dir": str(exp_dir),
    }


# -- 3. digits sweep: elastune vs Optuna in-process ---------------------------------------------
def _digits_sweep(trials: int, workers: int) -> dict[str, Any]:
    data = yaml.safe_load(DIGITS_SWEEP.read_text())
    data.update(_base_sweep(workers))
    data.update(
        num_trials=trials, seed=0, base_dir=str(DIGITS_SWEEP.parent),
        scheduler={"type": "asha", "min_resource": 1, "max_resource": DIGITS_MAX_STEP,
                   "reduction_factor": 3})
    return data


def bench_elastune_digits(trials: int, workers: int, out: Path) -> dict[str, Any]:
    _say(f"digits: elastune, {trials} trials, ASHA 1..{DIGITS_MAX_STEP} eta 3, {workers} workers")
    exp_dir = out / "digits"
    sweep = _digits_sweep(trials, workers)
    t_call = time.time()
    t0 = time.perf_counter()
    result = tune(sweep, experiment_dir=exp_dir)
    wall = time.perf_counter() - t0
    _check_finished(result, "digits")
    store = Store(exp_dir, readonly=True)
    try:
        segs = store.segments()
    finally:
        store.close()
    submitted = [s["submitted_at"] for s in segs if s["submitted_at"] is not None]
    started = [s["started_at"] for s in segs if s["started_at"] is not None]
    return {
        "wall_s": wall, "controller_wall_s": result.wall_s,
        "first_dispatch_s": min(submitted) - t_call if submitted else None,
        "first_segment_start_s": min(started) - t_call if started else None,
        "best_value": result.best_value, "best_params": result.best_params,
        "trials": result.status.get("trials"), "segments": len(segs),
        "steps_run": int(sum((s["last_step"] or 0) - (s["start_step"] or 0) for s in segs)),
        "sampler": sweep.get("sampler", "tpe"), "experiment_dir": str(exp_dir),
    }


def _suggest(trial: optuna.Trial, space: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, dim in space.items():
        if isinstance(dim, FloatDistribution):
            params[name] = trial.suggest_float(name, dim.low, dim.high, log=dim.log,
                                               step=dim.step)
        elif isinstance(dim, IntDistribution):
            params[name] = trial.suggest_int(name, dim.low, dim.high, log=dim.log, step=dim.step)
        elif isinstance(dim, CategoricalDistribution):
            params[name] = trial.suggest_categorical(name, list(dim.choices))
        elif isinstance(dim, BaseDistribution):
            raise TypeError(f"space.{name}: no Optuna suggest_* for {type(dim).__name__}")
        else:
            params[name] = dim  # a fixed value
    return params


class OptunaContext:
    """The trainable context on top of an Optuna trial: ``report`` is ``trial.report`` and
    ``steps()`` ends once ``trial.should_prune()`` says so after a report."""

    def __init__(self, trial: optuna.Trial, metric: str, stop_step: int) -> None:
        self.trial = trial
        self.metric = metric
        self.trial_id = f"optuna-{trial.number}"
        self.gpus: list[int] = []
        self.start_step = 0
        self.stop_step = stop_step
        self.current_step = 0
        self.last_value: float | None = None
        self.pruned = False
        self.state: Any = None
        self._reported: set[int] = set()

    def restore(self) -> Any:
        return None

    def steps(self) -> Iterator[int]:
        for step in range(self.start_step + 1, self.stop_step + 1):
            self.current_step = step
            yield step
            if step in self._reported and self.trial.should_prune():
                self.pruned = True
                return

    def report(self, step: int, **metrics: float) -> None:
        value = float(metrics[self.metric])
        self.trial.report(value, step)
        self._reported.add(step)
        self.last_value = value

    def checkpoint(self, state: Any) -> None:
        self.state = state  # kept in memory: an Optuna trial never resumes

    def should_stop(self) -> bool:
        return self.pruned


def bench_optuna_digits(trials: int, workers: int) -> dict[str, Any]:
    _say(f"digits: Optuna in-process, {trials} trials, SuccessiveHalvingPruner(1, 3), TPE seed 0")
    sweep = load_sweep(_digits_sweep(trials, workers))
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial: optuna.Trial) -> float:
        ctx = OptunaContext(trial, sweep.metric, DIGITS_MAX_STEP)
        examples.digits.train(_suggest(trial, sweep.space), ctx)
        if ctx.pruned:
            raise optuna.TrialPruned()
        assert ctx.last_value is not None
        return ctx.last_value

    t0 = time.perf_counter()
    study = optuna.create_study(
        direction="maximize" if sweep.mode == "max" else "minimize",
        sampler=optuna.samplers.TPESampler(seed=0),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3))
    study.optimize(objective, n_trials=trials)
    wall = time.perf_counter() - t0
    states = [t.state.name.lower() for t in study.trials]
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    return {
        "wall_s": wall, "best_value": study.best_value if complete else None,
        "best_params": study.best_params if complete else None,
        "trials": {s: states.count(s) for s in sorted(set(states))},
        "steps_run": int(sum(len(t.intermediate_values) for t in study.trials)),
        "optuna_version": optuna.__version__,
    }


# -- 4. Ray Tune --------------------------------------------------------------------------------
def _ray_tune_available() -> str | None:
    """Ray's version when ``ray.tune`` imports, else None."""
    try:
        import ray
        import ray.tune  # noqa: F401
    except ImportError:
        return None
    return str(ray.__version__)


class RayContext:
    """The trainable context inside a Ray Tune function trainable: ``report`` is
    ``ray.tune.report``; Ray's scheduler stops the trial itself."""

    def __init__(self, metric: str, stop_step: int) -> None:
        self.metric = metric
        self.trial_id = "ray"
        self.gpus: list[int] = []
        self.start_step = 0
        self.stop_step = stop_step
        self.current_step = 0
        self.state: Any = None

    def restore(self) -> Any:
        return None

    def steps(self) -> Iterator[int]:
        for step in range(self.start_step + 1, self.stop_step + 1):
            self.current_step = step
            yield step

    def report(self, step: int, **metrics: float) -> None:
        from ray import tune as ray_tune

        ray_tune.report({**{k: float(v) for k, v in metrics.items()}, "step": step})

    def checkpoint(self, state: Any) -> None:
        self.state = state

    def should_stop(self) -> bool:
        return False


def _ray_trainable(config: dict[str, Any]) -> None:
    ctx = RayContext("accuracy", DIGITS_MAX_STEP)
    examples.digits.train(dict(config), ctx)


def _ray_space(space: dict[str, Any]) -> dict[str, Any]:
    from ray import tune as ray_tune

    out: dict[str, Any] = {}
    for name, dim in space.items():
        if isinstance(dim, FloatDistribution):
            if dim.step is not None:
                out[name] = ray_tune.quniform(dim.low, dim.high, dim.step)
            elif dim.log:
                out[name] = ray_tune.loguniform(dim.low, dim.high)
            else:
                out[name] = ray_tune.uniform(dim.low, dim.high)
        elif isinstance(dim, IntDistribution):  # Ray's upper bound is exclusive
            if dim.log:
                out[name] = ray_tune.lograndint(dim.low, dim.high + 1)
            else:
                out[name] = ray_tune.qrandint(dim.low, dim.high, dim.step)
        elif isinstance(dim, CategoricalDistribution):
            out[name] = ray_tune.choice(list(dim.choices))
        elif isinstance(dim, BaseDistribution):
            raise TypeError(f"space.{name}: no Ray Tune equivalent for {type(dim).__name__}")
        else:
            out[name] = dim
    return out


def bench_raytune_digits(trials: int, workers: int, out: Path) -> dict[str, Any]:
    import ray
    from ray import tune as ray_tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search import BasicVariantGenerator

    _say(f"digits: Ray Tune {ray.__version__}, {trials} samples, ASHAScheduler(max_t=27, "
         f"grace_period=1, reduction_factor=3), {workers} concurrent")
    sweep = load_sweep(_digits_sweep(trials, workers))
    storage = out / "raytune"
    storage.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    # As many CPUs as elastune starts worker processes; each trial takes one.
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    t_init = time.perf_counter()
    try:
        tuner = ray_tune.Tuner(
            ray_tune.with_resources(_ray_trainable, {"cpu": 1}),
            param_space=_ray_space(sweep.space),
            tune_config=ray_tune.TuneConfig(
                metric=sweep.metric, mode=sweep.mode, num_samples=trials,
                # Ray ignores TuneConfig.max_concurrent_trials when given a search generator,
                # so the limit goes to the generator itself.
                search_alg=BasicVariantGenerator(random_state=0, max_concurrent=workers),
                scheduler=ASHAScheduler(max_t=DIGITS_MAX_STEP, grace_period=1,
                                        reduction_factor=3)),
            run_config=ray_tune.RunConfig(name="digits", storage_path=str(storage), verbose=0))
        grid = tuner.fit()
        t_fit = time.perf_counter()
    finally:
        ray.shutdown()
    wall = time.perf_counter() - t0
    best = grid.get_best_result(metric=sweep.metric, mode=sweep.mode, scope="last")
    iterations = [r.metrics.get("training_iteration", 0) for r in grid if r.metrics]
    return {
        "wall_s": wall, "init_s": t_init - t0, "fit_s": t_fit - t_init,
        "shutdown_s": wall - (t_fit - t0), "num_cpus": workers, "max_concurrent": workers,
        "best_value": (best.metrics or {}).get(sweep.metric),
        "best_params": best.config, "trials": len(grid), "errors": grid.num_errors,
        "steps_run": int(sum(iterations)),
        "ray_version": ray.__version__, "search": "random (BasicVariantGenerator, random_state=0)",
        "storage_path": str(storage),
    }


# -- the run ------------------------------------------------------------------------------------
def run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    details: dict[str, Any] = {
        "options": {"trials": args.trials, "reports": args.reports, "segments": args.segments,
                    "workers": args.workers, "skip_ray": args.skip_ray},
        "environment": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": os.cpu_count(), "optuna": optuna.__version__},
    }
    details["dispatch"] = bench_dispatch(args.segments, args.workers, out)
    details["reports"] = bench_reports(args.reports, args.workers, out)
    elastune = bench_elastune_digits(args.trials, args.workers, out)
    optuna_run = bench_optuna_digits(args.trials, args.workers)
    details["digits"] = {"trials": args.trials, "workers": args.workers,
                         "elastune": elastune, "optuna": optuna_run}
    ratio_ray = None
    ray_version = None if args.skip_ray else _ray_tune_available()
    if args.skip_ray:
        details["digits"]["raytune"] = {"note": "skipped (--skip-ray)"}
    elif ray_version is None:
        details["digits"]["raytune"] = {"installed": False, "note": "Ray Tune not installed"}
    else:
        ray_run = bench_raytune_digits(args.trials, args.workers, out)
        details["digits"]["raytune"] = {"installed": True, **ray_run}
        ratio_ray = elastune["wall_s"] / ray_run["wall_s"]
    lat = details["dispatch"]["latency"]
    summary = {
        "dispatch_ms_p50": lat.get("p50_ms"),
        "dispatch_ms_p99": lat.get("p99_ms"),
        "reports_per_s": details["reports"]["reports_per_s_end_to_end"],
        "wall_ratio_vs_optuna": elastune["wall_s"] / optuna_run["wall_s"],
        "wall_ratio_vs_raytune": ratio_ray,
    }
    return {"summary": summary, "details": details}


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def print_table(doc: dict[str, Any]) -> None:
    s, d = doc["summary"], doc["details"]
    disp, rep, dig = d["dispatch"], d["reports"], d["digits"]
    el, op, ray = dig["elastune"], dig["optuna"], dig["raytune"]
    lat = disp["latency"]
    table = Table(title="elastune overhead", show_lines=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("measured on")
    table.add_row("dispatch latency p50", f"{_fmt(s['dispatch_ms_p50'])} ms",
                  f"{lat['count']} segments of {disp['trials']} noop trials, "
                  f"{disp['workers']} workers")
    table.add_row("dispatch latency p99", f"{_fmt(s['dispatch_ms_p99'])} ms",
                  f"p90 {_fmt(lat.get('p90_ms'))} ms, max {_fmt(lat.get('max_ms'))} ms, "
                  f"mean {_fmt(lat.get('mean_ms'))} ms")
    lost = rep["lost"]
    table.add_row("reports/s into the store", _fmt(s["reports_per_s"], ",.0f"),
                  f"{rep['stored']} rows / {_fmt(rep['end_to_end_window_s'], '.3f')} s "
                  f"(first report -> tune() returned); lost: {lost}")
    table.add_row("reports/s, emission window", _fmt(rep["reports_per_s_emission"], ",.0f"),
                  f"first -> last report ts, {_fmt(rep['emission_window_s'], '.3f')} s, "
                  f"{rep['workers']} workers x {rep['steps_per_trial']} steps")
    table.add_row("reports/s, until committed", _fmt(rep["reports_per_s_committed"], ",.0f"),
                  f"first report ts -> last row committed, {_fmt(rep['commit_window_s'], '.3f')} s")
    table.add_row("digits sweep wall, elastune", f"{_fmt(el['wall_s'])} s",
                  f"{dig['trials']} trials, {dig['workers']} workers, around tune(); "
                  f"controller {_fmt(el['controller_wall_s'])} s, first dispatch "
                  f"{_fmt(el['first_dispatch_s'])} s, first start "
                  f"{_fmt(el['first_segment_start_s'])} s")
    table.add_row("digits sweep wall, Optuna", f"{_fmt(op['wall_s'])} s",
                  f"in-process, 1 process, {op['steps_run']} steps "
                  f"(elastune ran {el['steps_run']})")
    table.add_row("wall ratio vs Optuna", _fmt(s["wall_ratio_vs_optuna"], ".2f"),
                  "elastune wall / Optuna wall")
    table.add_row("best accuracy, elastune / Optuna",
                  f"{_fmt(el['best_value'], '.4f')} / {_fmt(op['best_value'], '.4f')}", "")
    if ray.get("wall_s") is not None:
        table.add_row("digits sweep wall, Ray Tune", f"{_fmt(ray['wall_s'])} s",
                      f"Ray {ray['ray_version']}: init {_fmt(ray['init_s'])} s, fit "
                      f"{_fmt(ray['fit_s'])} s, shutdown {_fmt(ray['shutdown_s'])} s, "
                      f"{ray['steps_run']} steps")
        table.add_row("wall ratio vs Ray Tune", _fmt(s["wall_ratio_vs_raytune"], ".2f"),
                      "elastune wall / Ray Tune wall")
        table.add_row("best accuracy, Ray Tune", _fmt(ray["best_value"], ".4f"), "")
    else:
        table.add_row("wall ratio vs Ray Tune", "n/a", ray["note"])
    # Wide enough for the table when stdout is a file or a pipe (rich would assume 80 columns).
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python benchmarks/overhead.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=64, help="trials of the digits sweep")
    p.add_argument("--reports", type=int, default=20000, help="reports for the throughput run")
    p.add_argument("--segments", type=int, default=300,
                   help="about how many segments the dispatch-latency run dispatches")
    p.add_argument("--workers", type=int, default=2, help="local workers of every run")
    p.add_argument("--skip-ray", action="store_true", help="do not run Ray Tune")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--out", default=None,
                   help="keep experiment dirs under DIR (default: a temp dir, deleted after)")
    args = p.parse_args(argv)
    for name in ("trials", "reports", "segments", "workers"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.reports < args.workers:
        p.error(f"--reports must be >= --workers ({args.workers}), got {args.reports}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    doc = run_quietly("overhead", args.out, lambda out: run(args, out), _say)
    if args.out is None:
        for part in (doc["details"]["dispatch"], doc["details"]["reports"],
                     doc["details"]["digits"]["elastune"], doc["details"]["digits"]["raytune"]):
            part.pop("experiment_dir", None)
            part.pop("storage_path", None)
    emit(doc, args.json, print_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
