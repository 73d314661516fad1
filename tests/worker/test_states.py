"""The state enums keep the words the store, the status document and the worker's events use."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tests._sims import ASHA, Synth
from tuner._status import status_document
from tuner.sim import SimFaults, simulate_wired
from worker.records import (
    EndReason,
    ExperimentState,
    SegmentFinished,
    SegmentState,
    TrialState,
    parse_event,
)


def test_each_state_is_its_text_in_comparisons_and_in_json():
    assert list(TrialState) == ["running", "paused", "completed", "pruned", "failed", "stopped"]
    assert list(SegmentState) == ["submitted", "running", "done", "ended", "stopped", "failed",
                                  "lost", "preempted", "stale"]
    assert list(ExperimentState) == ["running", "finished", "stopped", "failed"]
    assert "deadline" in list(EndReason) and "done" in list(EndReason)
    for enum in (TrialState, SegmentState, ExperimentState, EndReason):
        for member in enum:
            text = member.value
            assert member == text and hash(member) == hash(text) and f"{member}" == text
            assert json.dumps({member: member}) == json.dumps({text: text})


def test_a_sweeps_store_and_status_document_hold_exactly_the_states_text(tmp_path):
    # Faults and a short deadline, so that trials and segments end in many different states.
    r = simulate_wired(Synth(), metric="acc", mode="max", scheduler=ASHA, num_trials=81, workers=6,
                 seed=7, spot=True, preemptions_per_hour=3.0, time_budget_s=500.0,
                 faults=SimFaults(app_error_prob=0.1, vm_failures_per_hour=3.0, hang_prob=0.05,
                                  worker_losses_per_hour=2.0))
    q = r.store.query
    trials = {row[0]: row[1] for row in q("SELECT DISTINCT state, typeof(state) FROM trials")}
    segments = {row[0]: row[1] for row in q("SELECT DISTINCT state, typeof(state) FROM segments")}
    assert set(trials) == {"completed", "failed", "pruned", "stopped"}
    assert set(segments) == {"done", "failed", "lost", "preempted", "stale", "stopped"}
    assert set(trials.values()) == set(segments.values()) == {"text"}
    assert set(trials) <= set(TrialState) and set(segments) <= set(SegmentState)
    exp = q("SELECT state, typeof(state), message FROM experiment")[0]
    assert tuple(exp) == ("finished", "text", "deadline")
    assert (r.outcome.state, r.outcome.reason) == (ExperimentState.FINISHED, EndReason.DEADLINE)

    doc = status_document(r.store, tmp_path)
    assert json.loads(json.dumps(doc)) == doc
    assert doc["state"] == "finished" and type(doc["state"]) is str
    counts = dict(q("SELECT state, COUNT(*) FROM trials GROUP BY state"))
    assert doc["trials"] == {"total": sum(counts.values()), "completed": counts["completed"],
                             "pruned": counts["pruned"], "failed": counts["failed"],
                             "running": 0, "paused": 0, "stopped": counts["stopped"]}


@pytest.mark.parametrize("status", ["done", "ended", "stopped", "failed", "lost"])
def test_a_segment_end_crosses_the_wire_as_the_same_text(status):
    event = SegmentFinished(segment_id="e/t0001/s1", trial_id="t0001",
                            status=SegmentState(status), last_step=3, ts=1.5)
    wire = json.dumps(event.model_dump())        # what a worker writes to its events stream
    assert json.loads(wire)["status"] == status
    assert f'"status": "{status}"' in wire and wire == json.dumps(
        json.loads(event.model_dump_json()))
    back = parse_event(wire)
    assert back == event and type(back.status) is SegmentState and back.status == status


def test_a_segment_end_with_a_state_only_the_controller_writes_is_refused():
    schema = SegmentFinished.model_json_schema()["properties"]["status"]
    assert schema["enum"] == ["done", "ended", "stopped", "failed", "lost"]
    for status in ("stale", "preempted", "submitted", "running", "finished"):
        with pytest.raises(ValidationError, match="status"):
            parse_event({"kind": "finished", "segment_id": "s", "trial_id": "t",
                         "status": status, "last_step": 0, "ts": 0.0})
