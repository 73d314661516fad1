"""Experiment stores for the dashboard tests, each built once per test session.

``digits``: a real sweep of ``examples/digits.yaml`` (real Celery workers, a few seconds).
``sim-plan``: the real controller in simulation, with a planner, re-plans, a deadline and spot
preemptions (for planned vs actual workers and preemption marks). ``sim-10k``: 10,000 trials
in simulation (the scale the dashboard must stay responsive at).

Also the expected numbers, computed from the store's rows in plain Python (not through the
dashboard's SQL), for the tests to compare the API and the charts against.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

from tuner._store import STORE_NAME, Store

ROOT = Path(__file__).resolve().parents[1]
_BUILT: dict[str, Path] = {}


class Synth:
    """Hand-checkable curves: config i has quality q_i; every step takes 10 s."""

    name = "synth"

    def __init__(self, n: int = 81) -> None:
        self.q = {f"c{i}": 0.5 + 0.5 * ((i * 37) % n) / n for i in range(n)}

    def config_ids(self) -> list[str]:
        return list(self.q)

    def value(self, c: str, s: int) -> float:
        return self.q[c] * (1 - math.exp(-s / 5))

    def cost_s(self, c: str, a: int, b: int) -> float:
        return 10.0 * (b - a)

    def last_step(self, c: str) -> int:
        return 27

    def diverged(self, c: str) -> bool:
        return False


def _copy_store(src_db: Path, dest_dir: Path) -> Path:
    """A consistent copy of a store (sqlite's backup, so a WAL is carried over too)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{src_db}?mode=ro", uri=True)
    dst = sqlite3.connect(dest_dir / STORE_NAME)
    src.backup(dst)
    src.close()
    dst.close()
    return dest_dir


def _digits(base: Path) -> Path:
    from tuner import tune

    exp = base / "digits-run"
    result = tune(str(ROOT / "examples" / "digits.yaml"), experiment_dir=exp)
    assert result.state == "finished", result.status
    return exp


def _sim_plan(base: Path) -> Path:
    from budgets import BootLatency, FollowPlan, InstanceType, JobShape, Profile, Replanner
    from tuner.sim import simulate_wired

    exp = base / "sim-plan-run"
    exp.mkdir()
    deadline = 800.0
    itype = InstanceType("aws", "sim-gpu", "T4", 1, 4, 16, "us-east-1", 0.35)
    planner = Replanner(JobShape(81, 1, 27, 3), Profile(10.0, boot=BootLatency(60, 180)), itype,
                        deadline_s=deadline, billing_minimum_s=60.0, max_workers=40)
    plan = planner.initial()
    r = simulate_wired(Synth(), metric="acc", mode="max",
                 scheduler={"type": "sha", "min_resource": 1, "max_resource": 27,
                            "reduction_factor": 3},
                 num_trials=81, workers=max(1, plan.workers_for_rung(0)), spot=True,
                 preemptions_per_hour=4.0, cost_budget_usd=2.0, time_budget_s=deadline, seed=4,
                 scaling=FollowPlan(plan), replanner=planner, store_path=exp / STORE_NAME,
                 experiment_id="sim-plan")
    r.store.close()
    return exp


def _sim_10k(base: Path) -> Path:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.scale import PowerLawCurves
    from tuner.sim import simulate_wired, uniform_boot

    # In memory, then one backup to disk: the store's per-event commits are the slow part.
    r = simulate_wired(PowerLawCurves(10_000, 27, step_s=60.0), metric="acc", mode="max",
                 scheduler={"type": "asha", "min_resource": 1, "max_resource": 27,
                            "reduction_factor": 3},
                 num_trials=10_000, workers=200, boot_s=uniform_boot(60, 180), seed=0,
                 experiment_id="sim-10k")
    exp = base / "sim-10k-run"
    exp.mkdir()
    r.store.query("VACUUM INTO ?", (str(exp / STORE_NAME),))
    r.store.close()
    return exp


_BUILDERS = {"digits": _digits, "sim-plan": _sim_plan, "sim-10k": _sim_10k}


def built(kind: str, tmp_path_factory: Any) -> Path:
    """The experiment directory of ``kind``, built on first use in this session."""
    if kind not in _BUILT:
        base = tmp_path_factory.mktemp(f"store-{kind}")
        _BUILT[kind] = _BUILDERS[kind](base)
    return _BUILT[kind]


def make_root(tmp_path_factory: Any, kinds: tuple[str, ...], prefix: str) -> Path:
    """A dashboard root holding a copy of each experiment ``kind`` (named after it)."""
    root = tmp_path_factory.mktemp(prefix)
    for kind in kinds:
        _copy_store(built(kind, tmp_path_factory) / STORE_NAME, root / kind)
    return root


def copy_experiment(src_dir: Path, dest_dir: Path) -> Path:
    return _copy_store(src_dir / STORE_NAME, dest_dir)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# -- expected numbers, from the rows ---------------------------------------------------------
def t0_of(store: Store) -> float:
    exp = store.experiment()
    firsts = [i["launched_at"] for i in store.instances()]
    segs = store.segments()
    if segs:
        firsts.append(segs[0]["submitted_at"])
    spend = store.query("SELECT ts FROM spend ORDER BY rowid LIMIT 1")
    if spend:
        firsts.append(spend[0][0])
    start = exp["started_at"]
    return min([start, *firsts]) if start is not None else min(firsts)


def expected_best(store: Store) -> list[tuple[float, float, str]]:
    """(t_s, best value, trial id) each time the best changes, recomputed from scratch."""
    exp = store.experiment()
    sign = 1.0 if exp["mode"] == "max" else -1.0
    t0 = t0_of(store)
    reports: dict[str, list[dict[str, Any]]] = {}
    for r in store.reports():
        reports.setdefault(r["trial_id"], []).append(r)
    trials = {t["trial_id"]: t for t in store.trials_frame().to_dict("records")}
    events = []
    for seg in store.segments():
        if seg["finished_at"] is None:
            continue
        if seg["state"] in ("done", "ended", "stopped"):
            events.append((seg["finished_at"], 0, seg))
        if trials[seg["trial_id"]]["state"] == "failed":
            events.append((seg["finished_at"], 1, seg))
    events.sort(key=lambda e: (e[0], e[1]))
    # a failed trial drops out when its last segment ends
    last_end = {}
    for ts, _, seg in events:
        last_end[seg["trial_id"]] = max(last_end.get(seg["trial_id"], ts), ts)
    values: dict[str, float] = {}
    steps: dict[str, int] = {}
    out: list[tuple[float, float, str]] = []
    for ts, kind, seg in events:
        tid = seg["trial_id"]
        if kind == 1:
            if ts == last_end[tid]:
                values.pop(tid, None)
        elif (seg["last_step"] or 0) > steps.get(tid, 0):
            steps[tid] = seg["last_step"]
            upto = [r for r in reports.get(tid, []) if r["step"] <= seg["last_step"]
                    and r["value"] is not None]
            if upto:
                top = max(r["step"] for r in upto)
                values[tid] = next(r["value"] for r in upto if r["step"] == top)
        if values:
            tid_best = max(values, key=lambda t: (sign * values[t], -trials[t]["number"]))
            best = (tid_best, values[tid_best])
            if not out or (out[-1][2], out[-1][1]) != best:
                out.append((ts - t0, best[1], best[0]))
    return out


def live_workers(store: Store, t_s: float) -> int:
    """Instances held at ``t_s`` seconds after the start (after the changes at that time)."""
    t = t_s + t0_of(store)
    eps = 5e-4   # the API sends times to the millisecond
    return sum(1 for i in store.instances() if i["launched_at"] <= t + eps
               and (i["terminated_at"] is None or i["terminated_at"] > t + eps))


def curves_of(store: Store) -> dict[str, tuple[list[int], list[float]]]:
    out: dict[str, dict[int, float]] = {}
    for r in store.reports():
        if r["value"] is not None:
            out.setdefault(r["trial_id"], {})[r["step"]] = r["value"]
    return {t: (sorted(d), [d[s] for s in sorted(d)]) for t, d in out.items()}


def params_of(store: Store) -> dict[str, dict[str, Any]]:
    return {r["trial_id"]: json.loads(r["params"])
            for r in store.query("SELECT trial_id, params FROM trials")}


def accrued_at(store: Store, t: float) -> float:
    """Dollars every instance has accrued by absolute time ``t``, second by second from its
    launch (no billing minimum)."""
    total = 0.0
    for i in store.instances():
        end = t if i["terminated_at"] is None else min(t, i["terminated_at"])
        total += i["price_per_hour"] / 3600.0 * max(0.0, end - i["launched_at"])
    return total
