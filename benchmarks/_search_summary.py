"""The search benchmark's figures from its runs: normalized regret per method and budget (IQM
over tasks of the mean over seeds, with a 95 % bootstrap interval), the best peer, win
fractions and the peers' errors.

A peer that raised on a task is left out of that task's figures and counted in
``peer_errors`` (with its reason); the best peer at a budget is the one with the lowest IQM
among those that ran on at least one task; ``win_frac_vs_best_peer`` compares elastune with
the best peer at budget 1 on each (task, seed) both ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from benchmarks._search_runs import ELASTUNE, ELASTUNE_RANDOM, ELASTUNE_VARIANTS
from benchmarks._search_stats import bootstrap_ci, iqm
from benchmarks._search_tasks import BUDGET_FRACTIONS, budget_key

KEYS = tuple(budget_key(f) for f in BUDGET_FRACTIONS)
FINAL = budget_key(1.0)


def _per_task(runs: Iterable[dict[str, Any]], method: str, budget: str
              ) -> dict[str, float]:
    """Per task, the mean regret over the seeds the method ran."""
    by: dict[str, list[float]] = {}
    for r in runs:
        if r["method"] == method and r["budget"] == budget and r["regret"] is not None:
            by.setdefault(r["task"], []).append(r["regret"])
    return {t: float(np.mean(v)) for t, v in by.items()}


def method_table(runs: list[dict[str, Any]], methods: list[str], seed: int = 0
                 ) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method and budget: IQM over tasks, its 95 % interval, and how many tasks."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for m in methods:
        out[m] = {}
        for key in KEYS:
            vals = list(_per_task(runs, m, key).values())
            lo, hi = bootstrap_ci(vals, seed=seed)
            out[m][key] = {"iqm": iqm(vals), "ci_low": lo, "ci_high": hi, "tasks": len(vals)}
    return out


def _wins(runs: list[dict[str, Any]], other: str) -> float | None:
    """Share of (task, seed) where elastune's regret at budget 1 is at most ``other``'s."""
    mine = {(r["task"], r["seed"]): r["regret"] for r in runs
            if r["method"] == ELASTUNE and r["budget"] == FINAL}
    theirs = {(r["task"], r["seed"]): r["regret"] for r in runs
              if r["method"] == other and r["budget"] == FINAL and r["regret"] is not None}
    both = [k for k in mine if k in theirs]
    if not both:
        return None
    return sum(mine[k] <= theirs[k] + 1e-12 for k in both) / len(both)


def peer_errors(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per peer that raised: how many (task, seed) runs, on which tasks, and the first reason."""
    out: dict[str, dict[str, Any]] = {}
    seen: set[tuple[str, str, int]] = set()
    for r in runs:
        if r.get("error") is None or (r["method"], r["task"], r["seed"]) in seen:
            continue
        seen.add((r["method"], r["task"], r["seed"]))
        e = out.setdefault(r["method"], {"runs": 0, "tasks": [], "reason": r["error"]})
        e["runs"] += 1
        if r["task"] not in e["tasks"]:
            e["tasks"].append(r["task"])
    return out


def summarise(runs: list[dict[str, Any]], peers: list[str], tasks: int, seeds: int
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The summary keys, and the per-method table they come from."""
    table = method_table(runs, [*ELASTUNE_VARIANTS, *peers])
    best_name: dict[str, str | None] = {}
    best_iqm: dict[str, float | None] = {}
    for key in KEYS:
        ran = [(table[p][key]["iqm"], p) for p in peers if table[p][key]["iqm"] is not None]
        name = min(ran)[1] if ran else None
        best_name[key] = name
        best_iqm[key] = table[name][key]["iqm"] if name else None
    return {
        "elastune_regret_iqm_by_budget": {k: table[ELASTUNE][k]["iqm"] for k in KEYS},
        "best_peer_regret_iqm_by_budget": best_iqm,
        "best_peer_name_by_budget": best_name,
        "win_frac_vs_best_peer": _wins(runs, best_name[FINAL]) if best_name[FINAL] else None,
        "win_frac_vs_asha_random": _wins(runs, ELASTUNE_RANDOM),
        "tasks": tasks,
        "seeds": seeds,
        "peer_errors": peer_errors(runs),
    }, table


def by_set(runs: list[dict[str, Any]], methods: list[str]) -> dict[str, dict[str, Any]]:
    """``method_table`` per curve set (the part of a task's name before the slash)."""
    sets = sorted({r["task"].split("/", 1)[0] for r in runs})
    return {s: method_table([r for r in runs if r["task"].startswith(s + "/")], methods)
            for s in sets}
