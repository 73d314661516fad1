"""The experiment store: one SQLite file per experiment directory, written as events happen.

The controller is the only writer; ``status``, the CLI and the dashboard read concurrently
(WAL mode). It holds trials, segments, reports, instances, spend and plans.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.records import ExperimentState, SegmentState, TrialState

if TYPE_CHECKING:  # pandas is imported where a frame is built: `status` has no use for it
    import pandas as pd

STORE_NAME = "experiment.db"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS experiment (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, config TEXT NOT NULL, metric TEXT NOT NULL,
    mode TEXT NOT NULL, state TEXT NOT NULL, time_budget_s REAL, cost_budget_usd REAL,
    created_at REAL NOT NULL, started_at REAL, finished_at REAL, wall_s REAL,
    spend_usd REAL NOT NULL DEFAULT 0, best_trial_id TEXT, best_value REAL, message TEXT);
CREATE TABLE IF NOT EXISTS trials (
    trial_id TEXT PRIMARY KEY, number INTEGER NOT NULL, params TEXT NOT NULL,
    state TEXT NOT NULL, bracket INTEGER NOT NULL DEFAULT 0, last_step INTEGER NOT NULL DEFAULT 0,
    value REAL, gpu_seconds REAL NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0, error TEXT, created_at REAL NOT NULL,
    updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS segments (
    segment_id TEXT PRIMARY KEY, trial_id TEXT NOT NULL, instance_id TEXT, start_step INTEGER,
    stop_step INTEGER, gpus INTEGER, state TEXT NOT NULL, submitted_at REAL, started_at REAL,
    finished_at REAL, last_step INTEGER, checkpoint_step INTEGER, error TEXT);
CREATE INDEX IF NOT EXISTS segments_trial ON segments(trial_id);
CREATE INDEX IF NOT EXISTS segments_instance ON segments(instance_id);
CREATE TABLE IF NOT EXISTS reports (
    trial_id TEXT NOT NULL, segment_id TEXT NOT NULL, step INTEGER NOT NULL, value REAL,
    metrics TEXT NOT NULL, ts REAL NOT NULL);
CREATE INDEX IF NOT EXISTS reports_trial ON reports(trial_id, step);
CREATE TABLE IF NOT EXISTS instances (
    instance_id TEXT PRIMARY KEY, provider TEXT NOT NULL, instance_type TEXT NOT NULL,
    spot INTEGER NOT NULL, slots INTEGER NOT NULL, price_per_hour REAL NOT NULL,
    state TEXT NOT NULL, launched_at REAL NOT NULL, terminated_at REAL, cost_usd REAL,
    zone TEXT NOT NULL DEFAULT '', preempted INTEGER NOT NULL DEFAULT 0,
    tags TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS spend (
    ts REAL NOT NULL, spent_usd REAL NOT NULL, committed_usd REAL NOT NULL, workers INTEGER);
CREATE TABLE IF NOT EXISTS plans (ts REAL NOT NULL, plan TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS journal (
    kind TEXT NOT NULL, trial_id TEXT NOT NULL, step INTEGER, value REAL, bracket INTEGER,
    flag INTEGER NOT NULL DEFAULT 0);
"""


# Columns added after a table was first released: a store written before them gains them
# (with their defaults) when next opened for writing.
_ADDED_COLUMNS = {"instances": {"tags": "TEXT NOT NULL DEFAULT '{}'"}}


def _add_missing_columns(db: sqlite3.Connection) -> None:
    for table, columns in _ADDED_COLUMNS.items():
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        for name, kind in columns.items():
            if name not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")


def _nan_to_none(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


class Store:
    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        path = Path(path)
        self.path = path / STORE_NAME if path.is_dir() else path
        if readonly:
            if not self.path.exists():
                raise FileNotFoundError(f"no experiment store at {self.path}")
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30,
                                       check_same_thread=False)
        else:
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            _add_missing_columns(self._db)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
            self._db.commit()
        self._db.row_factory = sqlite3.Row
        self._atomic = 0  # depth of atomic() blocks: writes inside commit at the outermost end

    def close(self) -> None:
        self._db.close()

    # -- writes ----------------------------------------------------------------------------
    @contextmanager
    def atomic(self) -> Iterator[None]:
        """The writes made inside are committed together when the outermost block ends, or
        not at all if it raises (a controller killed between two of them leaves neither)."""
        if self._atomic:
            yield
            return
        self._atomic += 1
        try:
            with self._db:
                yield
        finally:
            self._atomic -= 1

    def _tx(self) -> AbstractContextManager[Any]:
        return nullcontext() if self._atomic else self._db

    def create_experiment(self, experiment_id: str, name: str, config: Mapping[str, Any],
                          metric: str, mode: str, time_budget_s: float | None,
                          cost_budget_usd: float | None) -> None:
        with self._tx():
            self._db.execute(
                "INSERT INTO experiment (id, name, config, metric, mode, state, time_budget_s,"
                " cost_budget_usd, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (experiment_id, name, json.dumps(config), metric, mode, ExperimentState.RUNNING,
                 time_budget_s, cost_budget_usd, time.time()))

    def update_experiment(self, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._tx():
            self._db.execute(f"UPDATE experiment SET {cols}", tuple(fields.values()))

    def add_trial(self, trial_id: str, number: int, params: Mapping[str, Any], bracket: int,
                  t: float) -> None:
        with self._tx():
            self._db.execute(
                "INSERT INTO trials (trial_id, number, params, state, bracket, created_at,"
                " updated_at) VALUES (?,?,?,?,?,?,?)",
                (trial_id, number, json.dumps(dict(params)), TrialState.RUNNING, bracket, t, t))

    def forget_trial(self, trial_id: str) -> None:
        """Remove a trial that never started (the controller died between sampling it and
        recording its first job): a resumed sweep samples that slot again."""
        with self._tx():
            for table in ("reports", "segments", "trials"):
                self._db.execute(f"DELETE FROM {table} WHERE trial_id = ?", (trial_id,))

    def update_trial(self, trial_id: str, t: float, **fields: Any) -> None:
        if "value" in fields:
            fields["value"] = _nan_to_none(fields["value"])
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._tx():
            self._db.execute(f"UPDATE trials SET {cols}, updated_at = ? WHERE trial_id = ?",
                             (*fields.values(), t, trial_id))

    def add_trial_usage(self, trial_id: str, gpu_seconds: float, cost_usd: float) -> None:
        with self._tx():
            self._db.execute(
                "UPDATE trials SET gpu_seconds = gpu_seconds + ?, cost_usd = cost_usd + ?"
                " WHERE trial_id = ?", (gpu_seconds, cost_usd, trial_id))

    def add_segment(self, segment_id: str, trial_id: str, instance_id: str, start_step: int,
                    stop_step: int, gpus: int, submitted_at: float) -> None:
        with self._tx():
            self._db.execute(
                "INSERT INTO segments (segment_id, trial_id, instance_id, start_step, stop_step,"
                " gpus, state, submitted_at) VALUES (?,?,?,?,?,?,?,?)",
                (segment_id, trial_id, instance_id, start_step, stop_step, gpus,
                 SegmentState.SUBMITTED, submitted_at))

    def update_segment(self, segment_id: str, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._tx():
            self._db.execute(f"UPDATE segments SET {cols} WHERE segment_id = ?",
                             (*fields.values(), segment_id))

    def add_reports(self, rows: Iterable[tuple[str, str, int, float | None, str, float]]) -> None:
        """Rows of (trial_id, segment_id, step, metric value, metrics JSON, ts), one transaction."""
        with self._tx():
            self._db.executemany("INSERT INTO reports VALUES (?,?,?,?,?,?)",
                                 [(a, b, c, _nan_to_none(d), e, f) for a, b, c, d, e, f in rows])

    def drop_reports(self, segment_id: str) -> None:
        with self._tx():
            self._db.execute("DELETE FROM reports WHERE segment_id = ?", (segment_id,))

    def upsert_instance(self, instance: Any, cost_usd: float | None = None) -> None:
        with self._tx():
            self._db.execute(
                "INSERT OR REPLACE INTO instances (instance_id, provider, instance_type, spot,"
                " slots, price_per_hour, state, launched_at, terminated_at, cost_usd, zone,"
                " preempted, tags) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (instance.instance_id, instance.provider, instance.instance_type,
                 int(instance.spot), instance.slots, instance.price_per_hour,
                 str(instance.state), instance.launched_at, instance.terminated_at, cost_usd,
                 getattr(instance, "zone", ""), int(getattr(instance, "preempted", False)),
                 json.dumps(dict(getattr(instance, "tags", {})), sort_keys=True)))

    def close_instance(self, instance_id: str, terminated_at: float) -> None:
        """Mark an instance terminated at ``terminated_at`` (its cost as last recorded): one
        that an earlier run left and that is gone when a later run takes over."""
        with self._tx():
            self._db.execute(
                "UPDATE instances SET state = 'terminated', terminated_at = ? "
                "WHERE instance_id = ? AND state != 'terminated'",
                (max(terminated_at, 0.0), instance_id))

    def record_spend(self, t: float, spent: float, committed: float, workers: int) -> None:
        with self._tx():
            self._db.execute("INSERT INTO spend VALUES (?,?,?,?)", (t, spent, committed, workers))
            self._db.execute("UPDATE experiment SET spend_usd = ?", (spent,))

    def add_plan(self, t: float, plan: Mapping[str, Any]) -> None:
        with self._tx():
            self._db.execute("INSERT INTO plans VALUES (?,?)", (t, json.dumps(plan)))

    def set_meta(self, key: str, value: str) -> None:
        """Keep one fact about the experiment that its config does not hold."""
        with self._tx():
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- reads -----------------------------------------------------------------------------
    def experiment(self) -> dict[str, Any]:
        row = self._db.execute("SELECT * FROM experiment").fetchone()
        if row is None:
            raise LookupError(f"{self.path} holds no experiment")
        out = dict(row)
        out["config"] = json.loads(out["config"])
        return out

    def trial_counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(
            ("total", TrialState.COMPLETED, TrialState.PRUNED, TrialState.FAILED,
             TrialState.RUNNING, TrialState.PAUSED), 0)
        for state, n in self._db.execute("SELECT state, COUNT(*) FROM trials GROUP BY state"):
            counts[state] = counts.get(state, 0) + n
            counts["total"] += n
        return counts

    def trials_on_workers(self) -> int:
        """Trials with a segment running on a worker now (the others that are not finished
        wait: for a promotion, or for a free slot)."""
        row = self._db.execute(
            "SELECT COUNT(DISTINCT s.trial_id) FROM segments s JOIN trials t"
            " ON t.trial_id = s.trial_id WHERE s.state = ? AND t.state IN (?, ?)",
            (SegmentState.RUNNING, TrialState.RUNNING, TrialState.PAUSED)).fetchone()
        return int(row[0])

    def first_plan(self) -> dict[str, Any] | None:
        """The first plan stored (the one the sweep set out to follow), or None."""
        row = self._db.execute("SELECT plan FROM plans ORDER BY rowid LIMIT 1").fetchone()
        return None if row is None else json.loads(row[0])

    def trial(self, trial_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT * FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
        if row is None:
            return None
        out = dict(row)
        out["params"] = json.loads(out["params"])
        return out

    def trials_frame(self) -> pd.DataFrame:
        import pandas as pd

        rows = [dict(r) for r in self._db.execute("SELECT * FROM trials ORDER BY number")]
        records = []
        for r in rows:
            params = json.loads(r.pop("params"))
            records.append({**r, **{f"params.{k}": v for k, v in params.items()}})
        return pd.DataFrame.from_records(records)

    def trial_rows(self) -> list[dict[str, Any]]:
        """Every trial's row, by number (``params`` as stored: JSON text)."""
        return [dict(r) for r in self._db.execute("SELECT * FROM trials ORDER BY number")]

    def first_step_times(self) -> dict[str, float]:
        """When each segment reported its first step (fresh segments only)."""
        out: dict[str, float] = {}
        for r in self._db.execute("SELECT segment_id, ts FROM reports WHERE step = 1 "
                                  "ORDER BY rowid"):
            out.setdefault(r[0], float(r[1]))
        return out

    def finished_segments(self) -> list[dict[str, Any]]:
        """The segments that finished done having trained a step, in the order they ended."""
        return [dict(r) for r in self._db.execute(
            "SELECT * FROM segments WHERE state = 'done' AND last_step > start_step AND "
            "finished_at IS NOT NULL ORDER BY finished_at, rowid")]

    def last_spend_ts(self) -> float | None:
        """When spend was last written (None: never)."""
        row = self._db.execute("SELECT ts FROM spend ORDER BY rowid DESC LIMIT 1").fetchone()
        return None if row is None else float(row[0])

    def reports(self, trial_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM reports"
        args: tuple[Any, ...] = ()
        if trial_id is not None:
            sql += " WHERE trial_id = ?"
            args = (trial_id,)
        return [dict(r) for r in self._db.execute(sql + " ORDER BY rowid", args)]

    def reported_steps(self) -> dict[str, set[int]]:
        """The steps each trial has reports of."""
        out: dict[str, set[int]] = {}
        for r in self._db.execute("SELECT DISTINCT trial_id, step FROM reports"):
            out.setdefault(r["trial_id"], set()).add(int(r["step"]))
        return out

    def segments(self, trial_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM segments"
        args: tuple[Any, ...] = ()
        if trial_id is not None:
            sql += " WHERE trial_id = ?"
            args = (trial_id,)
        return [dict(r) for r in self._db.execute(sql + " ORDER BY rowid", args)]

    def workers(self) -> list[dict[str, Any]]:
        """The workers that took part: name, host (a pool worker's; else the cloud zone),
        slots, how many segments were sent to each, and its state."""
        return [{"name": r[0], "host": r[1] or None, "slots": r[2], "segments_run": r[3],
                 "state": r[4]} for r in self._db.execute(
            "SELECT i.instance_id, i.zone, i.slots, COUNT(s.segment_id), i.state "
            "FROM instances i LEFT JOIN segments s ON s.instance_id = i.instance_id "
            "GROUP BY i.instance_id ORDER BY i.rowid")]

    def instances(self) -> list[dict[str, Any]]:
        """Each instance's record; ``tags`` as a dict (empty in a store older than them)."""
        return [{**dict(r), "tags": json.loads(r["tags"]) if "tags" in r.keys() else {}}
                for r in self._db.execute("SELECT * FROM instances ORDER BY rowid")]

    def journal_add(self, kind: str, trial_id: str, step: int | None = None,
                    value: float | None = None, bracket: int | None = None,
                    flag: bool = False) -> None:
        """One call the controller made to its scheduler (``job``, ``rung``, ``end``,
        ``lost``, ``close``: admission closed, ``decide``, ``promote``: at most ``step`` trials
        promoted into stage ``bracket``, ``widen``: at least that many, ``first``: the trial's
        queued promotion handed out before the others, ``bracket``: a new bracket of ``step``
        trials, ``admit``: ``step`` more trials admitted while trials run), in order: a
        resumed sweep replays them into a fresh scheduler; and ``limit`` (``step``: the most
        trials a re-plan admits, in the bracket under way)."""
        with self._tx():
            self._db.execute("INSERT INTO journal VALUES (?,?,?,?,?,?)",
                             (kind, trial_id, step, _nan_to_none(value), bracket, int(flag)))

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def journal(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._db.execute("SELECT * FROM journal ORDER BY rowid")]

    def plans(self) -> list[dict[str, Any]]:
        return [json.loads(r[0]) for r in self._db.execute("SELECT plan FROM plans ORDER BY rowid")]

    def query(self, sql: str, args: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Rows of one read-only SQL statement (the dashboard aggregates in SQL, not Python)."""
        return self._db.execute(sql, tuple(args)).fetchall()
