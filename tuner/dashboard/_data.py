"""What the dashboard shows, read from experiment stores: pure functions returning JSON-able dicts.

Each function takes an open (read-only) :class:`~tuner._store.Store` and returns one payload of
the JSON API (``docs/dashboard-api.md``). The work happens in SQL and the answers are bounded
whatever the sweep's size, so a 10,000-trial experiment still answers in tens of milliseconds:
series are thinned to :data:`MAX_POINTS` points, learning curves show the best trials plus an
even sample of the rest, parallel coordinates and the worker timeline are capped.

Times are seconds since the sweep started (``t_s``), money is US dollars. Numbers that are not
finite become ``null``, so every payload is strict JSON.

The series (best so far, planned and actual workers) are rebuilt here from the store's events,
not taken from a library: they follow the controller's own rules (a trial's value is its metric
at the end of its last finished segment; the best skips failed trials), which no plotting or
tracking library knows.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from budgets import DEFAULT_MINIMUM_S, billed
from tuner._status import predicted_wall_s, status_document
from tuner._store import STORE_NAME, Store
from worker.records import ExperimentState, SegmentState, TrialState

MAX_POINTS = 2000          # longest series sent to the browser
CURVE_TOP = 20             # learning curves: the best trials, always shown
CURVE_SAMPLE = 180         # ... plus an even sample of the others
CURVE_POINTS = 200         # ... each curve thinned to this many points
PARALLEL_MAX = 2000        # parallel coordinates: at most this many trials (best first)
TIMELINE_WORKERS = 60      # worker timeline: at most this many workers (an even sample)
TIMELINE_SEGMENTS = 6000   # ... and this many segments
TABLE_LIMIT = 500          # trials table: longest page
TRIAL_COLUMNS = ("number", "trial_id", "state", "bracket", "last_step", "value", "gpu_seconds",
                 "cost_usd", "failures")
TRIAL_STATES = tuple(TrialState)
# Segment states that end a segment with a value the controller keeps (see Controller._finished).
_VALUED = (SegmentState.DONE, SegmentState.ENDED, SegmentState.STOPPED)
_NAME_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_SKIP_DIRS = {"checkpoints", "logs", "code", "node_modules", "__pycache__"}


# -- helpers ---------------------------------------------------------------------------------
def _num(x: Any) -> float | None:
    """A finite float, or None (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _thin_indices(n: int, limit: int) -> list[int]:
    """At most ``limit`` indices spread evenly over ``range(n)``, first and last included."""
    if n <= limit:
        return list(range(n))
    if limit <= 1:
        return [n - 1]
    step = (n - 1) / (limit - 1)
    return sorted({round(i * step) for i in range(limit)})


def _thin(columns: dict[str, list[Any]], limit: int = MAX_POINTS) -> dict[str, list[Any]]:
    n = len(next(iter(columns.values()), []))
    keep = _thin_indices(n, limit)
    if len(keep) == n:
        return columns
    return {k: [v[i] for i in keep] for k, v in columns.items()}


def _columns(store: Store, table: str) -> set[str]:
    return {r["name"] for r in store.query(f"PRAGMA table_info({table})")}


def _t0(exp: dict[str, Any], store: Store | None = None) -> float:
    """The sweep's time zero: when it started, or its first event if earlier (a resumed sweep
    records its latest start); before it starts, when it was created."""
    start = exp["started_at"]
    if store is not None:
        row = store.query(
            "SELECT MIN(t) FROM (SELECT MIN(launched_at) AS t FROM instances UNION ALL"
            " SELECT ts FROM (SELECT ts FROM spend ORDER BY rowid LIMIT 1) UNION ALL"
            " SELECT submitted_at FROM (SELECT submitted_at FROM segments ORDER BY rowid LIMIT 1))"
        )[0]
        if row[0] is not None and (start is None or row[0] < start):
            start = row[0]
    return start if start is not None else exp["created_at"]


def _t_end(exp: dict[str, Any], store: Store) -> float:
    """The end of the sweep's time axis: when it finished, or the latest event while it runs."""
    if exp["finished_at"] is not None:
        return exp["finished_at"]
    row = store.query(
        "SELECT MAX(t) FROM (SELECT MAX(ts) AS t FROM spend UNION ALL SELECT MAX(ts) FROM reports"
        " UNION ALL SELECT MAX(finished_at) FROM segments UNION ALL"
        " SELECT MAX(launched_at) FROM instances)")[0]
    latest = row[0] if row[0] is not None else _t0(exp, store)
    if exp["state"] == ExperimentState.RUNNING and exp["started_at"] is not None \
            and exp["started_at"] > 1e9:
        # A real sweep under way (wall-clock times): its axis reaches now.
        latest = max(latest, time.time())
    return latest


def _sign(mode: str) -> float:
    return 1.0 if mode == "max" else -1.0


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


def _spend_interp(store: Store) -> tuple[list[float], list[float]]:
    rows = store.query("SELECT ts, spent_usd FROM spend ORDER BY ts, rowid")
    return [r[0] for r in rows], [r[1] for r in rows]


def _interp(t: Sequence[float], xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    if not xs:
        return [0.0 for _ in t]
    import numpy as np

    return [float(v) for v in np.interp(np.asarray(t, dtype=float), np.asarray(xs, dtype=float),
                                        np.asarray(ys, dtype=float))]


def _accrued(store: Store, ts: Sequence[float]) -> list[float]:
    """Dollars accrued by each absolute time in ``ts``: every instance's price per second from
    its launch to its termination (or to that time), without the billing minimum the ledger
    charges in full at launch (which would draw the spend as a step at the first launch)."""
    if not ts:
        return []
    import numpy as np

    rows = store.query("SELECT price_per_hour, launched_at, terminated_at FROM instances")
    if not rows:
        return [0.0 for _ in ts]
    t = np.asarray(ts, dtype=float)[:, None]
    rate = np.asarray([r[0] for r in rows], dtype=float) / 3600.0
    start = np.asarray([r[1] for r in rows], dtype=float)
    end = np.asarray([math.inf if r[2] is None else r[2] for r in rows], dtype=float)
    held = np.clip(np.minimum(t, end) - start, 0.0, None)
    return [float(v) for v in held @ rate]


def param_names(store: Store, exp: dict[str, Any] | None = None) -> list[str]:
    """The search space's parameter names: the config's ``space``, else the first trial's."""
    exp = exp or store.experiment()
    space = exp["config"].get("space") if isinstance(exp["config"], dict) else None
    if isinstance(space, dict) and space:
        return [str(k) for k in space]
    row = store.query("SELECT params FROM trials ORDER BY number LIMIT 1")
    return list(json.loads(row[0][0])) if row else []


def _log_params(exp: dict[str, Any]) -> set[str]:
    space = exp["config"].get("space") if isinstance(exp["config"], dict) else None
    out = set()
    if isinstance(space, dict):
        for name, spec in space.items():
            if isinstance(spec, dict) and ("loguniform" in spec or spec.get("log") is True):
                out.add(str(name))
    return out


# -- experiments under a root ----------------------------------------------------------------
def discover(root: str | Path, max_depth: int = 3) -> dict[str, Path]:
    """Experiment directories under ``root`` by name (their path relative to ``root``).

    ``root`` itself may be an experiment directory: it is then the only one, named after its
    folder. Hidden folders and an experiment's own ``checkpoints``/``logs`` are not searched.
    """
    root = Path(root)
    if (root / STORE_NAME).is_file():
        name = root.resolve().name
        return {name if _NAME_PART.match(name) else "experiment": root}
    found: dict[str, Path] = {}

    def walk(folder: Path, parts: tuple[str, ...]) -> None:
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            return
        for child in children:
            if not _NAME_PART.match(child.name) or child.name in _SKIP_DIRS:
                continue
            if (child / STORE_NAME).is_file():
                found["/".join((*parts, child.name))] = child
            elif len(parts) + 1 < max_depth:
                walk(child, (*parts, child.name))

    walk(root, ())
    return found


def valid_name(name: str) -> bool:
    """Whether ``name`` can be an experiment name at all (no ``..``, no absolute path)."""
    return bool(name) and len(name) <= 512 and all(_NAME_PART.match(p) for p in name.split("/"))


def experiments_index(root: str | Path) -> dict[str, Any]:
    """Every experiment under ``root``: state, best score, spend, budget, trial counts, wall."""
    rows = []
    for name, path in discover(root).items():
        entry: dict[str, Any] = {"name": name}
        try:
            store = Store(path, readonly=True)
        except Exception as exc:  # a store being created, or not a store: listed, not fatal
            rows.append({**entry, "error": f"{type(exc).__name__}: {exc}"})
            continue
        try:
            exp = store.experiment()
            doc = status_document(store, path)
            best = doc["best"]
            entry.update(
                experiment=doc["experiment"], sweep=exp["name"], state=doc["state"],
                metric=exp["metric"], mode=exp["mode"],
                best_value=_num(best["value"]) if best else None,
                best_trial_id=best["trial_id"] if best else None,
                spend_usd=doc["spend_usd"], cost_budget_usd=doc["cost_budget_usd"],
                trials=doc["trials"], wall_s=doc["wall_s"], time_budget_s=doc["time_budget_s"],
                created_at=exp["created_at"])
            if best is None and doc["state"] == ExperimentState.RUNNING:
                entry["best_value"] = _running_best(store, exp)
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            store.close()
        rows.append(entry)
    rows.sort(key=lambda e: -(e.get("created_at") or 0.0))
    return {"root": str(Path(root).resolve()), "experiments": rows}


def _running_best(store: Store, exp: dict[str, Any]) -> float | None:
    agg = "MAX" if exp["mode"] == "max" else "MIN"
    row = store.query(f"SELECT {agg}(value) FROM trials WHERE state != ?",
                      (TrialState.FAILED,))[0]
    return _num(row[0])


# -- one experiment --------------------------------------------------------------------------
def summary(store: Store, experiment_dir: str | Path) -> dict[str, Any]:
    """The status document (``elastune status --json``, unchanged) plus what the page shows."""
    exp = store.experiment()
    doc = status_document(store, experiment_dir)
    t0 = _t0(exp, store)
    counts = store.trial_counts()
    plans = store.query("SELECT COUNT(*) FROM plans")[0][0]
    instances = store.query("SELECT COUNT(*), SUM(terminated_at IS NULL) FROM instances")[0]
    return {
        **doc,
        "name": exp["name"], "metric": exp["metric"], "mode": exp["mode"],
        "message": exp["message"], "t0": t0, "end_t": _round(_t_end(exp, store) - t0, 3),
        "created_at": exp["created_at"],
        "trials_by_state": counts,
        "best_so_far": _running_best(store, exp) if doc["best"] is None else None,
        "plans": plans, "instances": {"total": instances[0], "live": instances[1] or 0},
        "param_names": param_names(store, exp),
        "version": version(store),
    }


def version(store: Store) -> str:
    """A token that changes whenever the store does (cheap: the page polls it)."""
    row = store.query(
        "SELECT (SELECT state || ':' || IFNULL(spend_usd, '') || ':' || IFNULL(best_value, '')"
        " FROM experiment), (SELECT MAX(rowid) FROM reports), (SELECT MAX(rowid) FROM segments),"
        " (SELECT MAX(rowid) FROM spend), (SELECT MAX(rowid) FROM plans),"
        " (SELECT COUNT(*) || ':' || IFNULL(MAX(updated_at), '') FROM trials),"
        " (SELECT COUNT(*) || ':' || COUNT(terminated_at) FROM instances),"
        " (SELECT COUNT(finished_at) FROM segments)")[0]
    return "|".join("" if v is None else str(v) for v in row)


def best_series(store: Store) -> dict[str, Any]:
    """The best score so far against time and against dollars spent.

    Replays the controller's rules: a trial's value is its metric at the end of its latest
    finished segment (``done``, ``ended`` or ``stopped``), a failed trial drops out, and the best
    is over the trials' current values. A point is added whenever the best changes, and one at
    the end of the axis, so the last point is the experiment's best and its spend. Dollars are
    the ledger's spend (``spend`` table) interpolated at each point's time.
    """
    exp = store.experiment()
    t0 = _t0(exp, store)
    sign = _sign(exp["mode"])
    placeholders = ",".join("?" * len(_VALUED))
    rows = store.query(
        "SELECT s.trial_id, s.finished_at, s.last_step,"
        " (SELECT r.value FROM reports r WHERE r.trial_id = s.trial_id AND r.step <= s.last_step"
        "  AND r.value IS NOT NULL"
        # The earliest report of a step is the one the controller saw when the segment ended
        # (a later one at the same step comes from a re-run after a stop).
        "  ORDER BY r.step DESC, r.rowid ASC LIMIT 1),"
        " t.number"
        " FROM segments s JOIN trials t ON t.trial_id = s.trial_id"
        f" WHERE s.finished_at IS NOT NULL AND s.state IN ({placeholders})"
        " ORDER BY s.finished_at, s.rowid", _VALUED)
    failed_at = {r[0]: r[1] for r in store.query(
        "SELECT t.trial_id, MAX(s.finished_at) FROM trials t JOIN segments s"
        " ON s.trial_id = t.trial_id WHERE t.state = ? GROUP BY t.trial_id",
        (TrialState.FAILED,))}
    events: list[tuple[float, int, str, int, float | None, int]] = []
    for trial_id, ts, last_step, value, number in rows:
        events.append((ts, 0, trial_id, last_step or 0, value, number))
    for trial_id, ts in failed_at.items():
        if ts is not None:
            events.append((ts, 1, trial_id, 0, None, 0))
    events.sort(key=lambda e: (e[0], e[1]))

    step: dict[str, int] = {}
    current: dict[str, float] = {}
    heap: list[tuple[float, int, str, float]] = []
    out_t: list[float] = []
    out_v: list[float] = []
    out_id: list[str] = []
    last: tuple[str, float] | None = None

    def incumbent() -> tuple[str, float] | None:
        while heap:
            _, _, tid, v = heap[0]
            if current.get(tid) == v:
                return tid, v
            heapq.heappop(heap)
        return None

    for ts, kind, trial_id, last_step, value, number in events:
        if kind == 1:
            current.pop(trial_id, None)
        elif last_step > step.get(trial_id, 0):
            step[trial_id] = last_step
            if value is not None and math.isfinite(value):
                current[trial_id] = value
                heapq.heappush(heap, (-sign * value, number, trial_id, value))
        best = incumbent()
        if best != last and best is not None:
            out_t.append(ts - t0)
            out_v.append(best[1])
            out_id.append(best[0])
        last = best
    end = _t_end(exp, store)
    final = incumbent()
    if final is not None:
        out_t.append(max(end - t0, out_t[-1] if out_t else 0.0))
        out_v.append(final[1])
        out_id.append(final[0])
    xs, ys = _spend_interp(store)
    spend = _interp([t + t0 for t in out_t], xs, ys)
    if final is not None and exp["finished_at"] is not None:
        spend[-1] = exp["spend_usd"] or 0.0
    cols = _thin({"t_s": out_t, "spend_usd": spend, "value": out_v, "trial_id": out_id})
    accrued = _accrued(store, [t + t0 for t in cols["t_s"]])
    return {
        "metric": exp["metric"], "mode": exp["mode"],
        "t_s": [_round(t, 3) for t in cols["t_s"]],
        "spend_usd": [_round(s, 6) for s in cols["spend_usd"]],
        "accrued_usd": [_round(s, 9) for s in accrued],
        "value": [_num(v) for v in cols["value"]], "trial_id": cols["trial_id"],
        "cost_budget_usd": exp["cost_budget_usd"], "time_budget_s": exp["time_budget_s"],
    }


def spend_series(store: Store) -> dict[str, Any]:
    """Spend against budget over time: what the ledger has billed (``spent``) and what it has
    committed (``committed``: billed plus work already reserved, the ledger's forecast), and,
    while the sweep runs, a projection to the deadline: the live instances kept until then,
    billed as the ledger bills (per second, with the provider's minimum), capped at the
    budget."""
    exp = store.experiment()
    t0 = _t0(exp, store)
    rows = store.query("SELECT ts, spent_usd, committed_usd, workers FROM spend ORDER BY ts, rowid")
    cols = _thin({"t_s": [r[0] - t0 for r in rows], "spent_usd": [r[1] for r in rows],
                  "committed_usd": [r[2] for r in rows], "workers": [r[3] for r in rows]})
    projection = None
    if exp["state"] == ExperimentState.RUNNING and rows:
        live = store.query("SELECT price_per_hour, launched_at FROM instances"
                           " WHERE terminated_at IS NULL")
        rate = sum(r[0] for r in live) / 3600.0
        t_now, spent = rows[-1][0] - t0, rows[-1][1]
        horizon = exp["time_budget_s"]
        if horizon is None or horizon <= t_now:
            horizon = t_now + max(600.0, t_now)
        provider = exp["config"].get("provider") if isinstance(exp["config"], dict) else None
        minimum = (provider or {}).get("billing_minimum_s")
        minimum = DEFAULT_MINIMUM_S if minimum is None else float(minimum)
        # What the live instances add from now to the horizon, billed as the ledger bills.
        end_value = spent + sum(
            billed(price, horizon + t0 - launched, minimum)
            - billed(price, t_now + t0 - launched, minimum) for price, launched in live)
        if exp["cost_budget_usd"] is not None:
            # The ledger stops the sweep before the budget: the projection stops there too.
            end_value = min(end_value, exp["cost_budget_usd"])
        projection = {"t_s": [_round(t_now, 3), _round(horizon, 3)],
                      "spend_usd": [_round(spent), _round(end_value)], "rate_usd_per_s": rate}
    accrued = _accrued(store, [t + t0 for t in cols["t_s"]])
    return {
        "t_s": [_round(t, 3) for t in cols["t_s"]],
        "spent_usd": [_round(v) for v in cols["spent_usd"]],
        "committed_usd": [_round(v) for v in cols["committed_usd"]],
        "accrued_usd": [_round(v, 9) for v in accrued],
        "workers": cols["workers"],
        "cost_budget_usd": exp["cost_budget_usd"], "time_budget_s": exp["time_budget_s"],
        "spend_usd": _round(exp["spend_usd"] or 0.0), "projection": projection,
    }


def _preempted_instances(store: Store) -> set[str]:
    out = set()
    if "preempted" in _columns(store, "instances"):
        out |= {r[0] for r in store.query("SELECT instance_id FROM instances WHERE preempted")}
    out |= {r[0] for r in store.query(
        "SELECT DISTINCT instance_id FROM segments WHERE state = ?",
        (SegmentState.PREEMPTED,))}
    return out


def workers_series(store: Store) -> dict[str, Any]:
    """Planned against actual workers over time.

    Actual: instances held (booting included) from the ``instances`` table's launch and
    termination times. Planned: each stored plan's timeline (its ``t_s`` count from the sweep's
    start) from the time the plan was made until the next one. Preempted instances are marked
    at their termination.
    """
    exp = store.experiment()
    t0 = _t0(exp, store)
    end = _t_end(exp, store)
    inst = store.query("SELECT instance_id, instance_type, spot, launched_at, terminated_at"
                       " FROM instances ORDER BY launched_at, rowid")
    preempted = _preempted_instances(store)
    changes: list[tuple[float, int]] = []
    for r in inst:
        changes.append((r["launched_at"], 1))
        if r["terminated_at"] is not None:
            changes.append((r["terminated_at"], -1))
    changes.sort()
    at: list[float] = [0.0]
    count: list[int] = [0]
    live = 0
    for ts, d in changes:
        live += d
        t = round(ts - t0, 3)   # changes closer than the precision sent are one change
        if at and at[-1] == t:
            count[-1] = live
        else:
            at.append(t)
            count.append(live)
    at.append(max(end - t0, at[-1]))
    count.append(live)
    actual = _thin({"t_s": at, "workers": count})

    plans = [(r[0], json.loads(r[1])) for r in store.query(
        "SELECT ts, plan FROM plans ORDER BY ts, rowid")]
    p_t: list[float] = []
    p_w: list[int] = []
    p_type: list[str] = []
    made = []
    for k, (ts, plan) in enumerate(plans):
        start = max(ts - t0, 0.0)    # a fixed cluster's plan is stored just before the start
        # A plan is followed until the next one, and no plan past the sweep's end: the
        # timeline a plan predicted beyond it would stretch the time axis past the wall time.
        stop = plans[k + 1][0] - t0 if k + 1 < len(plans) else end - t0
        timeline = sorted(plan.get("timeline") or [], key=lambda p: p["t_s"])
        made.append({"t_s": _round(start, 3), "feasible": plan.get("feasible"),
                     "planner": plan.get("planner"), "num_trials": plan.get("num_trials"),
                     "predicted_cost_usd": _num(plan.get("predicted_cost_usd")),
                     "predicted_wall_s": _num(plan.get("predicted_wall_s"))})
        if not timeline or start > end - t0:
            continue
        before = [p for p in timeline if p["t_s"] <= start]
        first = before[-1] if before else timeline[0]
        p_t.append(start)
        p_w.append(int(first["workers"]))
        p_type.append(str(first.get("instance_type", "")))
        for p in timeline:
            if start < p["t_s"] < stop:
                p_t.append(float(p["t_s"]))
                p_w.append(int(p["workers"]))
                p_type.append(str(p.get("instance_type", "")))
    if p_t and p_t[-1] < end - t0:
        p_t.append(end - t0)        # the plan in force holds to the end of the axis
        p_w.append(p_w[-1])
        p_type.append(p_type[-1])
    planned = _thin({"t_s": p_t, "workers": p_w, "instance_type": p_type})
    marks = [r for r in inst if r["instance_id"] in preempted and r["terminated_at"] is not None]
    pre_t = [r["terminated_at"] - t0 for r in marks]
    pre_count = [_count_at(at, count, t) for t in pre_t]
    types = store.query("SELECT instance_type, spot, COUNT(*) FROM instances"
                        " GROUP BY instance_type, spot ORDER BY COUNT(*) DESC")
    return {
        "actual": {"t_s": [_round(t, 3) for t in actual["t_s"]], "workers": actual["workers"]},
        "planned": {"t_s": [_round(t, 3) for t in planned["t_s"]],
                    "workers": planned["workers"], "instance_type": planned["instance_type"]},
        "plans": made,
        "preempted": {"t_s": [_round(t, 3) for t in pre_t], "workers": pre_count,
                      "instance_id": [r["instance_id"] for r in marks],
                      "instance_type": [r["instance_type"] for r in marks]},
        "instance_types": [{"instance_type": r[0], "spot": bool(r[1]), "count": r[2]}
                           for r in types],
        "instances": len(inst),
        "end_t": _round(end - t0, 3),
        "wall": _planned_vs_actual_wall(store, exp),
    }


def _planned_vs_actual_wall(store: Store, exp: dict[str, Any]) -> dict[str, float | None]:
    """The first plan's predicted wall time against the sweep's: ``difference_s`` > 0 when it
    took longer than planned. Null while there is no plan, or the sweep has not ended."""
    predicted = predicted_wall_s(store)
    wall = exp["wall_s"]
    actual = round(wall, 3) if wall is not None and exp["finished_at"] is not None else None
    diff = None if predicted is None or actual is None else round(actual - predicted, 3)
    return {"predicted_s": predicted, "actual_s": actual, "difference_s": diff}


def _count_at(at: list[float], count: list[int], t: float) -> int:
    import bisect

    i = bisect.bisect_right(at, t) - 1
    return count[max(i, 0)]


def rungs(store: Store) -> list[int]:
    """The steps segments stopped at (the scheduler's rungs), ascending."""
    return [r[0] for r in store.query(
        "SELECT DISTINCT stop_step FROM segments WHERE stop_step IS NOT NULL ORDER BY stop_step")]


def _order_by_value(mode: str) -> str:
    return "value IS NULL, value DESC" if mode == "max" else "value IS NULL, value ASC"


def learning_curves(store: Store, top: int = CURVE_TOP, sample: int = CURVE_SAMPLE,
                    points: int = CURVE_POINTS) -> dict[str, Any]:
    """Learning curves (metric against step) of the ``top`` best trials and an even sample of
    ``sample`` others, each thinned to ``points`` points; with their state and rung reached."""
    exp = store.experiment()
    top = max(0, min(int(top), 1000))
    sample = max(0, min(int(sample), 5000))
    total = store.query("SELECT COUNT(*) FROM trials")[0][0]
    chosen = [r[0] for r in store.query(
        f"SELECT trial_id FROM trials WHERE value IS NOT NULL AND state != ?"
        f" ORDER BY {_order_by_value(exp['mode'])}, number LIMIT ?", (TrialState.FAILED, top))]
    stride = max(1, math.ceil(total / sample)) if sample else 0
    if stride:
        picked = set(chosen)
        chosen += [r[0] for r in store.query(
            "SELECT trial_id FROM trials WHERE (number - 1) % ? = 0 ORDER BY number", (stride,))
            if r[0] not in picked]
    info = {r[0]: r for r in _in_chunks(
        store, "SELECT trial_id, number, state, last_step, value FROM trials"
        " WHERE trial_id IN ({})", chosen)}
    steps: dict[str, dict[int, float]] = {t: {} for t in chosen}
    for trial_id, step, value in _in_chunks(
            store, "SELECT trial_id, step, value FROM reports WHERE trial_id IN ({})"
            " AND value IS NOT NULL ORDER BY rowid", chosen):
        steps[trial_id][step] = value
    curves = []
    for trial_id in sorted(chosen, key=lambda t: info[t]["number"]):
        xs = sorted(steps[trial_id])
        keep = _thin_indices(len(xs), points)
        xs = [xs[i] for i in keep]
        row = info[trial_id]
        curves.append({"trial_id": trial_id, "number": row["number"], "state": row["state"],
                       "last_step": row["last_step"], "value": _num(row["value"]),
                       "step": xs, "metric": [_num(steps[trial_id][s]) for s in xs]})
    best = exp["best_trial_id"]
    if best is None and chosen[:1] and top:
        best = chosen[0]
    return {"metric": exp["metric"], "mode": exp["mode"], "rungs": rungs(store),
            "total": total, "shown": len(curves), "top": top, "best_trial_id": best,
            "curves": curves}


def _in_chunks(store: Store, sql: str, ids: Sequence[str], size: int = 500) -> Iterable[Any]:
    for i in range(0, len(ids), size):
        chunk = ids[i:i + size]
        yield from store.query(sql.format(",".join("?" * len(chunk))), chunk)


def parallel(store: Store, limit: int = PARALLEL_MAX) -> dict[str, Any]:
    """Parameters against score for parallel coordinates: every trial with a value, or past
    ``limit`` of them the best quarter of ``limit`` and an even sample of the rest (best
    first). Numbers stay numbers (``log`` when the space samples them log-uniformly); anything
    else is a category, sent as an index into ``categories``."""
    exp = store.experiment()
    limit = max(1, min(int(limit), 20000))
    total = store.query("SELECT COUNT(*) FROM trials WHERE value IS NOT NULL")[0][0]
    ranked = (f"SELECT trial_id, params, value, state FROM trials WHERE value IS NOT NULL"
              f" ORDER BY {_order_by_value(exp['mode'])}, number")
    if total <= limit:
        rows = store.query(ranked)
    else:
        top = max(1, limit // 4)
        rows = store.query(ranked + " LIMIT ?", (top,))
        rest = store.query(ranked + " LIMIT -1 OFFSET ?", (top,))
        rows += [rest[i] for i in _thin_indices(len(rest), limit - top)]
    names = param_names(store, exp)
    logs = _log_params(exp)
    params = [json.loads(r["params"]) for r in rows]
    dims = []
    for name in names:
        values = [p.get(name) for p in params]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool)
                      and math.isfinite(v) for v in values if v is not None)
        if numeric:
            kind = "log" if name in logs and all(v is None or v > 0 for v in values) else (
                "numeric")
            dims.append({"name": name, "kind": kind, "values": [_num(v) for v in values]})
        else:
            labels = sorted({json.dumps(v) if not isinstance(v, str) else v for v in values})
            index = {lab: i for i, lab in enumerate(labels)}
            dims.append({"name": name, "kind": "categorical", "categories": labels,
                         "values": [index[json.dumps(v) if not isinstance(v, str) else v]
                                    for v in values]})
    return {"metric": exp["metric"], "mode": exp["mode"], "total": total, "shown": len(rows),
            "trial_id": [r["trial_id"] for r in rows], "state": [r["state"] for r in rows],
            "score": [_num(r["value"]) for r in rows], "dimensions": dims}


def trials_page(store: Store, sort: str = "value", order: str | None = None,
                state: str | None = None, q: str | None = None, offset: int = 0,
                limit: int = 50, *, max_limit: int = TABLE_LIMIT) -> dict[str, Any]:
    """One page of the trials table, sorted and filtered in SQL.

    ``sort``: a column of :data:`TRIAL_COLUMNS` or ``params.<name>``; ``order``: ``asc`` or
    ``desc`` (default: best first for ``value``, else ascending); ``state``: comma-separated
    states; ``q``: a substring of the trial id or its parameters' JSON. Empty values sort last.
    Raises ``ValueError`` naming the argument for anything else.
    """
    exp = store.experiment()
    names = param_names(store, exp)
    args: list[Any] = []
    if sort in TRIAL_COLUMNS:
        key = sort
    elif sort.startswith("params.") and sort[len("params."):] in names:
        key = "json_extract(params, ?)"
        args.append('$."' + sort[len("params."):].replace('"', '\\"') + '"')
    else:
        allowed = ", ".join([*TRIAL_COLUMNS, *(f"params.{n}" for n in names)])
        raise ValueError(f"sort: {sort!r} is not a column; allowed: {allowed}")
    if order is None:
        order = ("desc" if exp["mode"] == "max" else "asc") if sort == "value" else "asc"
    if order not in ("asc", "desc"):
        raise ValueError(f"order: {order!r}; allowed: asc, desc")
    if not 0 <= offset <= 10**9:
        raise ValueError(f"offset: {offset}; must be >= 0")
    if not 1 <= limit <= max_limit:
        raise ValueError(f"limit: {limit}; must be 1..{max_limit}")
    where: list[str] = []
    wargs: list[Any] = []
    if state:
        states = [s.strip() for s in state.split(",") if s.strip()]
        bad = [s for s in states if s not in TRIAL_STATES]
        if bad:
            raise ValueError(f"state: {bad[0]!r}; allowed: {', '.join(TRIAL_STATES)}")
        where.append(f"state IN ({','.join('?' * len(states))})")
        wargs += states
    if q:
        pattern = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where.append("(trial_id LIKE ? ESCAPE '\\' OR params LIKE ? ESCAPE '\\')")
        wargs += [pattern, pattern]
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    matching = store.query(f"SELECT COUNT(*) FROM trials{clause}", wargs)[0][0]
    rows = store.query(
        f"SELECT * FROM trials{clause} ORDER BY ({key}) IS NULL, {key} {order.upper()}, number"
        f" LIMIT ? OFFSET ?", [*wargs, *args, *args, limit, offset])
    out = []
    for r in rows:
        d = {c: r[c] for c in TRIAL_COLUMNS}
        d["value"] = _num(d["value"])
        d["params"] = json.loads(r["params"])
        out.append(d)
    total = store.query("SELECT COUNT(*) FROM trials")[0][0]
    return {"total": total, "matching": matching, "offset": offset, "limit": limit,
            "sort": sort, "order": order, "state": state or None, "q": q or None,
            "columns": list(TRIAL_COLUMNS), "param_names": names, "rows": out}


def timeline(store: Store, max_workers: int = TIMELINE_WORKERS,
             max_segments: int = TIMELINE_SEGMENTS) -> dict[str, Any]:
    """Segments per worker over time: an even sample of ``max_workers`` workers (by launch)
    and at most ``max_segments`` of their segments (an even sample, in time order)."""
    exp = store.experiment()
    t0 = _t0(exp, store)
    end = _t_end(exp, store) - t0
    inst = store.query("SELECT instance_id, instance_type, spot, launched_at, terminated_at"
                       " FROM instances ORDER BY launched_at, rowid")
    preempted = _preempted_instances(store)
    keep = [inst[i] for i in _thin_indices(len(inst), max(1, int(max_workers)))]
    ids = [r["instance_id"] for r in keep]
    segs = list(_in_chunks(
        store, "SELECT instance_id, trial_id, segment_id, start_step, stop_step, state,"
        " started_at, finished_at FROM segments WHERE instance_id IN ({})"
        " AND started_at IS NOT NULL", ids))
    segs.sort(key=lambda r: (r["started_at"], r["segment_id"]))
    n_total = store.query("SELECT COUNT(*) FROM segments WHERE started_at IS NOT NULL")[0][0]
    chosen = [segs[i] for i in _thin_indices(len(segs), max(1, int(max_segments)))]
    return {
        "workers": {
            "instance_id": ids, "instance_type": [r["instance_type"] for r in keep],
            "spot": [bool(r["spot"]) for r in keep],
            "launched_t": [_round(r["launched_at"] - t0, 3) for r in keep],
            "terminated_t": [_round((r["terminated_at"] if r["terminated_at"] is not None
                                     else end + t0) - t0, 3) for r in keep],
            "preempted": [r["instance_id"] in preempted for r in keep],
        },
        "segments": {
            "instance_id": [r["instance_id"] for r in chosen],
            "trial_id": [r["trial_id"] for r in chosen],
            "start_step": [r["start_step"] for r in chosen],
            "stop_step": [r["stop_step"] for r in chosen],
            "state": [r["state"] for r in chosen],
            "start_t": [_round(r["started_at"] - t0, 3) for r in chosen],
            "end_t": [_round((r["finished_at"] if r["finished_at"] is not None
                              else end + t0) - t0, 3) for r in chosen],
        },
        "total_workers": len(inst), "shown_workers": len(keep),
        "total_segments": n_total, "shown_segments": len(chosen), "end_t": _round(end, 3),
    }


def bundle(store: Store, experiment_dir: str | Path, *, table_limit: int = 50) -> dict[str, Any]:
    """Everything the experiment page draws, in one answer (what the page and the report load)."""
    return {
        "summary": summary(store, experiment_dir),
        "best": best_series(store),
        "spend": spend_series(store),
        "workers": workers_series(store),
        "curves": learning_curves(store),
        "parallel": parallel(store),
        "timeline": timeline(store),
        "trials": trials_page(store, limit=table_limit),
    }
