"""elastune's runs in the search benchmark: a sweep a user could write, run by
``tuner.sim.simulate`` (the product's path) with its cost budget as the dollars.

The sweep: ASHA (eta 3, rungs 1 .. R) over the task's n trials on a fixed local cluster of W
workers at the benchmark's price per hour, ``max_failures: 0`` (a diverged curve fails the same
way again), and what the variant sets (``VARIANTS``): ``elastune`` enters new trials at every
rung in Hyperband's proportions (``scheduler.brackets`` = the number of rungs, asynchronous
Hyperband, whose default sampler is ``bohb``) and leaves ``num_trials`` to the planner; the
others are plain ASHA (one bracket) or those brackets, with ``tune()``'s default sampler,
``random``, ``tpe`` or ``bohb``, or under PASHA (``scheduler.pasha``), over n trials or a
chosen count. A trial's params are a point of the task's hyperparameter space
(``simulate(trial_params="hyperparameters")``: the columns of the recorded configurations, as
the peers see them), and it replays the recorded configuration nearest to them; a task whose
configurations have no varying column is replayed by index.
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks._search_tasks import ETA, SearchTask
from tuner.schedulers import rung_steps
from tuner.sim import SimResult, simulate

# The reference sweep's cost budget: far above its bill, so only its trials end it.
NO_CAP_USD = 1e6


# ``scheduler.brackets`` of the sweeps that enter trials at every rung (resolved per task).
ALL_RUNGS = "all"

# The elastune sweeps the benchmark reports side by side: name -> what the sweep sets beyond
# the common part ({}: plain ASHA over the job's n trials, as tune() runs it when it names no
# sampler). ``None`` for ``num_trials``: left out, so the planner chooses the count for the
# budget and a worker the scheduler has no job for gets a new trial while the budget allows
# (as the peers keep sampling until their dollars run out).
DEFAULT = "elastune"
RANDOM = "elastune ASHA random"
VARIANTS: dict[str, dict[str, Any]] = {
    # Asynchronous Hyperband (so BOHB's sampler, tune()'s default there), the count the
    # planner's: what the docs recommend for the most accuracy per dollar.
    DEFAULT: {"scheduler": {"brackets": ALL_RUNGS}, "num_trials": None},
    "elastune ASHA": {},
    RANDOM: {"sampler": "random"},
    "elastune-tpe": {"sampler": "tpe"},
    "elastune-bohb": {"sampler": "bohb"},
    "elastune-pasha": {"scheduler": {"pasha": True}},
    "elastune-chosen": {"num_trials": None},
    "elastune brackets tpe": {"scheduler": {"brackets": ALL_RUNGS}, "sampler": "tpe"},
    "elastune brackets random": {"scheduler": {"brackets": ALL_RUNGS}, "sampler": "random"},
    "elastune brackets bohb": {"scheduler": {"brackets": ALL_RUNGS}},
}


def sweep(task: SearchTask, workers: int, price_per_hour: float, variant: str
          ) -> dict[str, Any]:
    """The sweep as a user writes it (``simulate`` adds the trainable, space, metric, mode)."""
    extra = dict(VARIANTS[variant])
    scheduler = {"type": "asha", "min_resource": 1, "max_resource": task.max_resource,
                 "reduction_factor": ETA, **extra.pop("scheduler", {})}
    if scheduler.get("brackets") == ALL_RUNGS:
        scheduler["brackets"] = len(rung_steps(1, task.max_resource, ETA))
    return {
        "scheduler": scheduler,
        "num_trials": task.num_trials,
        "provider": {"type": "local", "workers": workers, "price_per_hour": price_per_hour},
        "max_failures": 0,
        **extra,
    }


def run(task: SearchTask, workers: int, price_per_hour: float, variant: str, seed: int,
        cost_budget: float) -> SimResult:
    """One sweep of ``task`` with ``cost_budget`` dollars, as ``simulate`` runs it."""
    return simulate(sweep(task, workers, price_per_hour, variant), task.curves, seed=seed,
                    time_scale=task.time_scale, time_budget=None, cost_budget=cost_budget,
                    trial_params="hyperparameters" if task.hyperparameters else "index")


def reference_spend(task: SearchTask, workers: int, price_per_hour: float) -> float:
    """What a full ASHA sweep of the task costs: the bill of the sweep with a random sampler
    and no cap (seed 0), which sets the task's budgets."""
    return run(task, workers, price_per_hour, RANDOM, 0, NO_CAP_USD).spend_usd


def best_reported(r: SimResult, mode: str) -> float | None:
    """The best value any trial reported (at any step): what every method is scored on."""
    vals = [x["value"] for x in r.store.reports()
            if x.get("value") is not None and math.isfinite(x["value"])]
    if not vals:
        return None
    return max(vals) if mode == "max" else min(vals)
