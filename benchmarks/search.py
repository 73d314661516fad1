"""elastune's search against real peer libraries, on the same curves at the same dollars.

Every task of every curve set under ``--data`` (discovered from the files) is replayed by
each method on W workers (``--workers``, default 4) at the price book's cheapest AWS 1-GPU
on-demand price, with the same per-step seconds (``CurveSet.cost_s`` per step, slowed down
where a full trial is shorter than 1200 s). The job is ASHA, eta 3, rungs 1 .. R (the largest
3^k <= the task's steps, at most 27), n trials (the largest 3^k <= its configs, at most 81).
Three budgets per task: 1/4, 1/2 and all of what that ASHA sweep costs in full (elastune's,
random sampler, seed 0, no cap).

- ``elastune``: the sweep through ``tuner.sim.simulate`` as ``tune()`` runs it when it names
  no sampler, with ``cost_budget`` = the budget; ``elastune ASHA random``, ``elastune-tpe``,
  ``elastune-bohb``: the same with ``sampler: random``, ``tpe``, ``bohb``. Trials sample the
  task's hyperparameters and replay the nearest recorded config, as the peers do
  (``benchmarks/_search_elastune.py``).
- ``optuna TPE+Hyperband``: a real Optuna study (``TPESampler``, ``HyperbandPruner``) with
  W trials at once, replayed on a virtual clock (``benchmarks/_search_optuna.py``).
- ``syne-tune ...``: Syne Tune's schedulers (ASHA, BOHB, ASHA-BORE, ASHA-CQR, MOBSTER,
  Hyper-Tune, DyHPO) on its simulator backend over a tabular blackbox of the same curves,
  ``n_workers`` = W, stopped at the seconds the dollars buy
  (``benchmarks/_search_synetune.py``). Peers sample the task's hyperparameters and run the
  nearest tabulated config.

Normalized regret of a run: ``(best - found) / (best - reference)`` (sign-flipped where lower
is better), clipped to [0, 1], where ``found`` is the best value the method saw reported (any
trial, any step) within its dollars, ``best`` the best value in the task's table (any config,
any step up to R) and ``reference`` the median over configs of each config's best value; 1
when nothing was reported. Figures: per method and budget the IQM over tasks (of the mean
over seeds) with a 95 % bootstrap interval.

    python benchmarks/search.py [--data DIR] [--quick] [--seeds N] [--per-set N]
                                [--workers W] [--peers NAME,...] [--jobs N]
                                [--plot FILE.png] [--json]

``--quick``: the first task of each set (natural order), 1 seed unless ``--seeds``;
otherwise up to ``--per-set`` (default 40) tasks per set, every k-th in natural order.
``--data`` defaults to ``../shared/data`` when present, else the sample the package ships.
Syne Tune and matplotlib come with the ``search-bench`` extra (``pip install -e
'.[search-bench]'``); without Syne Tune its schedulers are counted in ``peer_errors``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks import _search_synetune  # noqa: E402
from benchmarks._runner import emit, stdout_to_stderr  # noqa: E402
from benchmarks._search_runs import ELASTUNE_VARIANTS, PEERS, run_task  # noqa: E402
from benchmarks._search_summary import KEYS, by_set, summarise  # noqa: E402
from benchmarks._search_tasks import select_tasks  # noqa: E402
from benchmarks.planner import one_gpu_type  # noqa: E402
from tuner.sim import default_data_dir  # noqa: E402

DEFAULT_WORKERS = 4


def _fmt(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def regret_table(table: dict[str, dict[str, dict[str, Any]]]) -> Table:
    t = Table(title="Normalized regret by budget (IQM over tasks [95 % bootstrap CI]; "
                    "budget = fraction of a full ASHA sweep's cost)")
    t.add_column("method", justify="left")
    for key in KEYS:
        t.add_column(f"{key}x", justify="right")
    t.add_column("tasks", justify="right")
    for method, by in table.items():
        cells = [f"{_fmt(by[k]['iqm'])} [{_fmt(by[k]['ci_low'])}, {_fmt(by[k]['ci_high'])}]"
                 for k in KEYS]
        t.add_row(method, *cells, str(by[KEYS[-1]]["tasks"]))
    return t


def set_table(sets: dict[str, dict[str, dict[str, dict[str, Any]]]]) -> Table:
    t = Table(title="Normalized regret IQM per curve set at 0.25x / 0.5x / 1x")
    t.add_column("method", justify="left")
    for name in sets:
        t.add_column(name, justify="right")
    methods = next(iter(sets.values())).keys() if sets else []
    for m in methods:
        t.add_row(m, *(" / ".join(_fmt(sets[s][m][k]["iqm"], 2) for k in KEYS) for s in sets))
    t.add_row("tasks", *(str(next(iter(sets[s].values()))[KEYS[-1]]["tasks"]) for s in sets))
    return t


def summary_table(summary: dict[str, Any]) -> Table:
    t = Table(title="Summary")
    t.add_column("figure", justify="left")
    t.add_column("value", justify="right")
    for key in KEYS:
        t.add_row(f"elastune regret IQM @{key}x",
                  _fmt(summary["elastune_regret_iqm_by_budget"][key]))
        t.add_row(f"best peer @{key}x",
                  f"{summary['best_peer_name_by_budget'][key]}: "
                  f"{_fmt(summary['best_peer_regret_iqm_by_budget'][key])}")
    t.add_row("win_frac_vs_best_peer", _fmt(summary["win_frac_vs_best_peer"]))
    t.add_row("win_frac_vs_asha_random", _fmt(summary["win_frac_vs_asha_random"]))
    t.add_row("tasks x seeds", f"{summary['tasks']} x {summary['seeds']}")
    for peer, e in summary["peer_errors"].items():
        t.add_row(f"peer error: {peer}",
                  f"{e['runs']} run(s) on {len(e['tasks'])} task(s): {e['reason'][:90]}")
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None,
                    help="curve directory (default: ../shared/data if present, else the sample)")
    ap.add_argument("--quick", action="store_true",
                    help="the first task of each set, 1 seed unless --seeds")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 2; quick 1)")
    ap.add_argument("--per-set", type=int, default=None,
                    help="at most this many tasks per set, every k-th (default 40)")
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                    help=f"workers of every method (default {DEFAULT_WORKERS})")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"comma-separated peers (default all: {', '.join(PEERS)})")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="processes, one task each (default min(2, CPUs))")
    ap.add_argument("--plot", type=Path, default=None, help="write the regret plot (PNG)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)
    for name in ("seeds", "per_set", "workers", "jobs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')} is {v}, but must be >= 1")
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        ap.error(f"--peers: unknown {', '.join(map(repr, unknown))}; allowed: "
                 f"{', '.join(PEERS)}")
    if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
        ap.error("--plot needs matplotlib: pip install -e '.[search-bench]'")
    data_dir = args.data if args.data is not None else default_data_dir()
    if not data_dir.is_dir():
        ap.error(f"--data {str(data_dir)!r} is not a directory")
    seeds = args.seeds or (1 if args.quick else 2)

    err = Console(stderr=True, width=160)
    out = Console(stderr=True, width=160) if args.json else Console(width=160)
    started = time.perf_counter()
    tasks = select_tasks(data_dir, quick=args.quick, per_set=args.per_set,
                         log=lambda m: err.print(f"[dim]{m}[/]"))
    if not tasks:
        err.print(f"no usable task in {data_dir}")
        return 1
    itype = one_gpu_type()
    price = itype.on_demand_per_hour / itype.gpus
    out.print(f"data: {data_dir}; {len(tasks)} task(s) x {seeds} seed(s); {args.workers} "
              f"workers at ${price:.3f}/h ({itype.name} on demand); syne-tune "
              f"{_search_synetune.version() or 'not installed'}")

    results: list[dict[str, Any]] = []
    with stdout_to_stderr():
        if args.jobs == 1 or len(tasks) == 1:
            for i, t in enumerate(tasks, 1):
                results.append(run_task(t, seeds, args.workers, price, tuple(peers)))
                err.print(f"[{i}/{len(tasks)}] {t.name}: {results[-1]['elapsed_s']:.1f} s")
        else:
            with ProcessPoolExecutor(max_workers=min(args.jobs, len(tasks))) as pool:
                futures = {pool.submit(run_task, t, seeds, args.workers, price, tuple(peers)): t
                           for t in tasks}
                for i, fut in enumerate(as_completed(futures), 1):
                    results.append(fut.result())
                    err.print(f"[{i}/{len(tasks)}] {futures[fut].name}: "
                              f"{results[-1]['elapsed_s']:.1f} s")
    order = {t.name: i for i, t in enumerate(tasks)}
    results.sort(key=lambda r: order[r["task"]])
    runs = [r for res in results for r in res["runs"]]
    summary, table = summarise(runs, peers, len(tasks), seeds)
    sets = by_set(runs, [*ELASTUNE_VARIANTS, *peers])
    if args.plot is not None:
        from benchmarks._search_plot import plot

        plot(table, args.plot, f"{len(tasks)} task(s) x {seeds} seed(s), {args.workers} workers")
    wall = time.perf_counter() - started
    details = {
        "data_dir": str(data_dir), "workers": args.workers, "price_per_hour": price,
        "instance_type": itype.name, "peers": peers,
        "versions": _versions(), "methods": [*ELASTUNE_VARIANTS, *peers],
        "regret_by_method": table, "regret_by_set": sets,
        "tasks": [{k: v for k, v in r.items() if k != "runs"} for r in results],
        "runs": runs, "wall_s": wall,
    }

    def print_table(_: dict[str, Any]) -> None:
        out.print(regret_table(table))
        out.print(set_table(sets))
        out.print(summary_table(summary))
        out.print(f"{len(tasks)} task(s) in {wall:.1f} s ({args.jobs} process(es))")

    if args.json:
        print_table(summary)  # (to stderr)
    emit({"summary": summary, "details": details}, args.json, print_table)
    return 0


def _versions() -> dict[str, str | None]:
    import optuna

    return {"optuna": optuna.__version__, "syne-tune": _search_synetune.version(),
            "syne-tune import error": _search_synetune.import_error()}


if __name__ == "__main__":
    sys.exit(main())
