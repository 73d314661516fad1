"""One task of the search benchmark, every method at every budget: elastune's sweeps through
``simulate``, and each peer library on the same curves, step seconds, workers and dollars.

A task's budgets are fractions of what a full ASHA sweep of it costs (elastune's, random
sampler, no cap, seed 0) on W workers at the benchmark's price; a peer's dollars buy W workers
for ``dollars * 3600 / (W * price)`` simulated seconds. elastune runs once per budget (its
ledger stops it); a peer runs once to the largest budget and is scored at each on what it had
reported by then (peers do not see the budget, so a shorter run is the same run cut short).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks import _search_elastune as elastune
from benchmarks import _search_optuna
from benchmarks import _search_synetune as synetune
from benchmarks._search_tasks import BUDGET_FRACTIONS, SearchTask, budget_key

ELASTUNE = elastune.DEFAULT              # the sweep as tune() runs it
ELASTUNE_RANDOM = elastune.RANDOM
ELASTUNE_VARIANTS = tuple(elastune.VARIANTS)
OPTUNA = "optuna TPE+Hyperband"
PEERS = (OPTUNA, *synetune.SCHEDULERS)


def best_by(reports: list[tuple[float, float]], horizon_s: float, mode: str) -> float | None:
    vals = [v for t, v in reports if t <= horizon_s]
    if not vals:
        return None
    return max(vals) if mode == "max" else min(vals)


def run_peer(task: SearchTask, name: str, workers: int, horizon_s: float, seed: int
             ) -> list[tuple[float, float]]:
    if name == OPTUNA:
        return _search_optuna.run(task, workers, horizon_s, seed)
    return synetune.run(task, name, workers, horizon_s, seed)


def run_task(task: SearchTask, seeds: int, workers: int, price_per_hour: float,
             peers: tuple[str, ...]) -> dict[str, Any]:
    """Every method on ``task`` for seeds 0..seeds-1. Returns the task's budgets and, per seed,
    method and budget, the best value found, its regret and the dollars spent; a peer that
    raised is recorded with its error (never dropped)."""
    t0 = time.perf_counter()
    full = elastune.reference_spend(task, workers, price_per_hour)
    budgets = {budget_key(f): f * full for f in BUDGET_FRACTIONS}
    dollars_per_s = workers * price_per_hour / 3600.0
    runs: list[dict[str, Any]] = []
    for seed in range(seeds):
        for method in ELASTUNE_VARIANTS:
            for key, usd in budgets.items():
                started = time.perf_counter()
                r = elastune.run(task, workers, price_per_hour, method, seed, usd)
                found = elastune.best_reported(r, task.mode)
                runs.append({"task": task.name, "method": method, "seed": seed,
                             "budget": key, "budget_usd": usd,
                             "found": found, "regret": task.regret(found),
                             "spend_usd": r.spend_usd, "trials": len(r.trials),
                             "reason": str(r.outcome.reason), "error": None,
                             "run_s": time.perf_counter() - started})
        for name in peers:
            horizon = max(budgets.values()) / dollars_per_s
            started = time.perf_counter()
            try:
                reports = run_peer(task, name, workers, horizon, seed)
                error = None
            except Exception as exc:  # a peer that cannot run this task: named, counted
                reports, error = [], f"{type(exc).__name__}: {exc}"
            for key, usd in budgets.items():
                h = usd / dollars_per_s
                found = best_by(reports, h, task.mode)
                last = max((t for t, _ in reports if t <= h), default=0.0)
                runs.append({"task": task.name, "method": name, "seed": seed,
                             "budget": key, "budget_usd": usd,
                             "found": found,
                             "regret": None if error else task.regret(found),
                             "spend_usd": None if error else last * dollars_per_s,
                             "reports": sum(t <= h for t, _ in reports),
                             "error": error, "run_s": time.perf_counter() - started})
    return {"task": task.name, "full_sweep_usd": full, "budgets_usd": budgets,
            "time_scale": task.time_scale, "num_trials": task.num_trials,
            "max_resource": task.max_resource, "configs": len(task.config_ids),
            "hyperparameters": [h.name for h in task.hyperparameters],
            "best": task.best, "reference": task.reference, "mode": task.mode,
            "runs": runs, "elapsed_s": time.perf_counter() - t0}
