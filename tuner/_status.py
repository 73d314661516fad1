"""The status document of an experiment, read from its store (the ``--json`` contract)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tuner._hooks import LOGGER_ERRORS
from tuner._store import Store
from worker.records import ExperimentState, TrialState

# The sweep may end this long after its time budget: stopped segments get ``stop_grace_s``
# (10 s) to checkpoint, then workers are terminated.
DEADLINE_GRACE_S = 20.0


def status_document(store: Store, experiment_dir: str | Path) -> dict[str, Any]:
    exp = store.experiment()
    counts = store.trial_counts()
    # ASHA keeps many trials unfinished at once; only those on a worker now are running.
    on_workers = store.trials_on_workers()
    best = None
    if exp["best_trial_id"] is not None:
        trial = store.trial(exp["best_trial_id"])
        best = {"params": trial["params"] if trial else {}, "value": exp["best_value"],
                "trial_id": exp["best_trial_id"]}
    wall = exp["wall_s"]
    if wall is None and exp["started_at"] is not None:
        import time

        wall = time.time() - exp["started_at"]
    time_budget, cost_budget = exp["time_budget_s"], exp["cost_budget_usd"]
    spend = exp["spend_usd"] or 0.0
    return {
        "experiment": exp["id"],
        "dir": str(Path(experiment_dir).resolve()),
        "state": exp["state"],
        "best": best,
        "trials": {
            "total": counts["total"], "completed": counts.get(TrialState.COMPLETED, 0),
            "pruned": counts.get(TrialState.PRUNED, 0), "failed": counts.get(TrialState.FAILED, 0),
            "running": on_workers,
            "paused": (counts.get(TrialState.RUNNING, 0) + counts.get(TrialState.PAUSED, 0)
                       - on_workers),
            "stopped": counts.get(TrialState.STOPPED, 0),
        },
        "spend_usd": round(spend, 6),
        "cost_budget_usd": cost_budget,
        "wall_s": round(wall, 3) if wall is not None else None,
        "time_budget_s": time_budget,
        "predicted_wall_s": predicted_wall_s(store),
        "deadline_met": None if wall is None else (
            time_budget is None or wall <= time_budget + DEADLINE_GRACE_S),
        "budget_respected": cost_budget is None or spend <= cost_budget + 1e-9,
        # Why it failed; while it runs, what it waits for (a pool worker large enough).
        "message": exp["message"] if exp["state"] in (ExperimentState.FAILED,
                                                      ExperimentState.RUNNING) else None,
        "workers": store.workers(),
        # Experiment trackers (the sweep's loggers) that failed and stopped logging, with
        # their errors; the sweep went on without them.
        "logger_errors": json.loads(store.meta(LOGGER_ERRORS) or "{}"),
    }


def predicted_wall_s(store: Store) -> float | None:
    """The first plan's predicted wall time: what the sweep set out to take, to set against
    what it took."""
    plan = store.first_plan()
    value = None if plan is None else plan.get("predicted_wall_s")
    if value is None or not math.isfinite(float(value)):
        return None
    return round(float(value), 3)
