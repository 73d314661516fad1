"""Optuna as a peer in the search benchmark: a real ``optuna`` study (``TPESampler`` with
``HyperbandPruner``) replayed on a virtual clock over W workers.

``study.optimize(n_jobs=W)`` runs W trials at once in wall-clock time; on recorded curves the
same is an event-driven replay: each of W workers holds one trial, and the next event (the
worker whose step ends first) is handed to the study in time order through its ask-and-tell
interface (``study.ask``, ``trial.report``, ``trial.should_prune``, ``study.tell``). A step
takes the task's step seconds; nothing is decided here but which event comes next. The trial
samples the task's hyperparameters and runs the tabulated config nearest to them
(``nearest_config``); a run past its recorded end (a diverged curve) fails.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import optuna

from benchmarks._search_tasks import ETA, SearchTask, nearest_config

# A peer whose every trial fails at once would ask forever at one instant.
MAX_TRIALS_FACTOR = 100


def _suggest(trial: optuna.Trial, task: SearchTask) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for h in task.hyperparameters:
        if h.kind == "categorical":
            out[h.name] = trial.suggest_categorical(h.name, list(h.choices))
        elif h.kind == "int":
            out[h.name] = trial.suggest_int(h.name, int(h.low), int(h.high), log=h.log)
        else:
            out[h.name] = trial.suggest_float(h.name, h.low, h.high, log=h.log)
    return out


def run(task: SearchTask, workers: int, horizon_s: float, seed: int
        ) -> list[tuple[float, float]]:
    """Replay the study until ``horizon_s`` simulated seconds; returns every (time, value)
    reported, in time order. Raises when the task has no hyperparameter to sample."""
    if not task.hyperparameters:
        raise ValueError(f"{task.name}: the configurations have no hyperparameter that varies")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # Named: HyperbandPruner picks a trial's bracket from a hash of the study's name and the
    # trial's number, so a random name would make the replay differ between runs.
    study = optuna.create_study(
        study_name=f"search-{task.name}-{seed}",
        direction="maximize" if task.mode == "max" else "minimize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=task.max_resource,
                                              reduction_factor=ETA))
    cache: dict[str, Any] = {}
    reports: list[tuple[float, float]] = []
    # (time the worker's current step ends, worker, trial number): the next event first
    events: list[tuple[float, int, int]] = []
    running: dict[int, tuple[optuna.Trial, int, int]] = {}
    asked = 0

    def start(worker: int, now: float) -> None:
        nonlocal asked
        asked += 1
        if asked > MAX_TRIALS_FACTOR * max(1, len(task.config_ids)):
            raise RuntimeError(f"{task.name}: {asked} trials asked at {now:.0f} s; "
                               "every trial fails")
        trial = study.ask()
        i = nearest_config(task, _suggest(trial, task), cache)
        running[worker] = (trial, i, 1)
        heapq.heappush(events, (now + float(task.step_s[i, 1]), worker, asked))

    for w in range(workers):
        start(w, 0.0)
    while events:
        now, worker, _ = heapq.heappop(events)
        if now > horizon_s:
            break
        trial, i, step = running[worker]
        value = float(task.values[i, step])
        last = task.curves.last_step(task.config_ids[i])
        if step > last:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            start(worker, now)
            continue
        if math.isfinite(value):
            reports.append((now, value))
            trial.report(value, step)
        if step >= task.max_resource or step >= last:
            if math.isfinite(value):
                study.tell(trial, value)
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            start(worker, now)
        elif math.isfinite(value) and trial.should_prune():
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            start(worker, now)
        else:
            running[worker] = (trial, i, step + 1)
            heapq.heappush(events, (now + float(task.step_s[i, step + 1]), worker, asked))
    return reports
