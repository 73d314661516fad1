"""A segment's end and its journal entry are one transaction: a controller that dies between
them leaves neither, so a resumed sweep never re-runs a rung whose steps are stored."""

from __future__ import annotations

import pytest

from tests._sims import SHA, Synth
from tuner._store import Store
from tuner.sim import simulate_wired


def test_atomic_writes_commit_together_or_not_at_all(tmp_path):
    store = Store(tmp_path / "s.db")
    store.create_experiment("e", "e", {}, "acc", "max", None, None)
    store.add_trial("t1", 1, {}, 0, 0.0)
    store.add_segment("e/t1/s1", "t1", "i1", 0, 1, 1, 0.0)
    with pytest.raises(RuntimeError), store.atomic():
        store.update_segment("e/t1/s1", state="done", finished_at=5.0)
        with store.atomic():                       # nested: still the outer transaction
            store.journal_add("rung", "t1", 1, 0.5)
        raise RuntimeError("killed between the writes")
    other = Store(tmp_path / "s.db")               # what another process (a resume) sees
    assert other.segments()[0]["state"] == "submitted" and other.journal() == []
    with store.atomic():
        store.update_segment("e/t1/s1", state="done", finished_at=5.0)
        store.journal_add("rung", "t1", 1, 0.5)
    assert other.segments()[0]["state"] == "done" and len(other.journal()) == 1


class _Dies(Exception):
    pass


def test_a_controller_dying_before_the_journal_entry_leaves_the_segment_unfinished(
        tmp_path, monkeypatch):
    real = Store.journal_add
    seen = {"rung": 0}

    def journal_add(self, kind, *args, **kwargs):
        if kind == "rung":
            seen["rung"] += 1
            if seen["rung"] == 5:
                raise _Dies("the controller is gone")
        return real(self, kind, *args, **kwargs)

    monkeypatch.setattr(Store, "journal_add", journal_add)
    path = tmp_path / "store.db"
    with pytest.raises(_Dies):
        simulate_wired(Synth(n=9), metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                 num_trials=9, workers=3, seed=0, boot_s=lambda rng: 60.0, store_path=path)
    store = Store(path)
    done = [s for s in store.segments() if s["state"] == "done"]
    rungs = [e for e in store.journal() if e["kind"] == "rung"]
    assert len(rungs) == 4 and len(done) == 4     # the fifth: neither, not one without the other
    assert {s["trial_id"] for s in done} == {e["trial_id"] for e in rungs}


def test_a_store_from_before_instance_tags_gains_the_column_when_opened(tmp_path):
    import sqlite3

    from worker.records import Instance, InstanceState

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE instances (instance_id TEXT PRIMARY KEY, provider TEXT NOT NULL,"
        " instance_type TEXT NOT NULL, spot INTEGER NOT NULL, slots INTEGER NOT NULL,"
        " price_per_hour REAL NOT NULL, state TEXT NOT NULL, launched_at REAL NOT NULL,"
        " terminated_at REAL, cost_usd REAL, zone TEXT NOT NULL DEFAULT '',"
        " preempted INTEGER NOT NULL DEFAULT 0)")
    db.execute("INSERT INTO instances VALUES ('i-old','aws','g5',0,1,1.0,'running',0,"
               "NULL,NULL,'',0)")
    db.commit()
    db.close()
    assert Store(tmp_path / "old.db", readonly=True).instances()[0]["tags"] == {}
    store = Store(path)
    store.upsert_instance(Instance(instance_id="i-new", provider="aws", instance_type="g5",
                                   price_per_hour=1.0, state=InstanceState.RUNNING,
                                   launched_at=1.0, queue="i-new", tags={"a": "b"}), 0.5)
    assert [(r["instance_id"], r["tags"]) for r in store.instances()] == [
        ("i-old", {}), ("i-new", {"a": "b"})]
