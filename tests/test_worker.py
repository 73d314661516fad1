"""Real workers on a real embedded Redis: segments, slots, stop requests, JSON only."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from records import Segment, parse_event
from worker import TASK_NAME, BrokerAddress, load_checkpoint, make_app


def _segment(tmp_path, sid, trainable, params, start=0, stop=3, gpus=1):
    return Segment(segment_id=sid, experiment_id="exp", trial_id=f"trial-{sid}",
                   trainable=trainable, params=params, start_step=start, stop_step=stop,
                   gpus=gpus, checkpoint_dir=str(tmp_path / "ckpt" / sid), events_key="ev",
                   stop_key="stop", submitted_at=time.time())


def _collect(address, until_finished, timeout=30.0):
    client = address.client()
    last, events, finished = "0-0", [], set()
    deadline = time.monotonic() + timeout
    while not until_finished <= finished:
        assert time.monotonic() < deadline, f"timed out; got {events}"
        for _, messages in client.xread({"ev": last}, block=200) or []:
            for mid, fields in messages:
                last = mid
                event = parse_event(fields[b"e"])
                events.append(event)
                if event.kind == "finished":
                    finished.add(event.segment_id)
    return events


def test_embedded_redis_is_private(redis_server):
    sock = redis_server.path
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(sock)).st_mode) == 0o700
    assert len(redis_server.password) >= 32
    import redis

    with pytest.raises(redis.AuthenticationError):
        redis.Redis(unix_socket_path=sock, retry=None).ping()
    assert "***" in redis_server.redacted and redis_server.password not in redis_server.redacted


def test_a_segment_runs_reports_and_checkpoints(redis_server, workers, tmp_path):
    workers.start("w1")
    app = make_app(redis_server)
    seg = _segment(tmp_path, "s1", "tests.trainables:quadratic", {"x": 0.3}, start=0, stop=3)
    app.send_task(TASK_NAME, args=[seg.model_dump()], queue="w1")
    events = _collect(redis_server, {"s1"})
    kinds = [e.kind for e in events]
    assert kinds == ["started", "report", "report", "report", "finished"]
    assert [e.step for e in events if e.kind == "report"] == [1, 2, 3]
    fin = events[-1]
    assert fin.status == "done" and fin.last_step == 3 and fin.checkpoint_step == 3
    step, state = load_checkpoint(seg.checkpoint_dir, 3)
    assert step == 3 and state == {"steps": [1, 2, 3]}

    # The next segment of the trial continues from the checkpoint: steps 4..5, nothing twice.
    seg2 = seg.model_copy(update={"segment_id": "s2", "start_step": 3, "stop_step": 5})
    app.send_task(TASK_NAME, args=[seg2.model_dump()], queue="w1")
    events = _collect(redis_server, {"s2"})
    assert [e.step for e in events if e.kind == "report" and e.segment_id == "s2"] == [4, 5]
    assert load_checkpoint(seg.checkpoint_dir, 5)[1] == {"steps": [1, 2, 3, 4, 5]}


def test_trainable_errors_come_back_as_failed_segments(redis_server, workers, tmp_path):
    workers.start("w1")
    app = make_app(redis_server)
    seg = _segment(tmp_path, "f1", "tests.trainables:failing", {"fail_at": 2})
    app.send_task(TASK_NAME, args=[seg.model_dump()], queue="w1")
    fin = [e for e in _collect(redis_server, {"f1"}) if e.kind == "finished"][0]
    assert fin.status == "failed" and "boom at step 2" in fin.error and fin.last_step == 1


def test_gpu_slots_are_given_whole_and_never_split(redis_server, workers, tmp_path):
    workers.start("big", slots=3)
    app = make_app(redis_server)
    a = _segment(tmp_path, "g2", "tests.trainables:gpu_probe", {"sleep": 0.3}, stop=2, gpus=2)
    b = _segment(tmp_path, "g2b", "tests.trainables:gpu_probe", {"sleep": 0.0}, stop=1, gpus=2)
    app.send_task(TASK_NAME, args=[a.model_dump()], queue="big")
    time.sleep(0.3)
    app.send_task(TASK_NAME, args=[b.model_dump()], queue="big")
    events = _collect(redis_server, {"g2", "g2b"})
    started = {e.segment_id: e for e in events if e.kind == "started"}
    assert len(started["g2"].gpus) == 2
    reports = [e for e in events if e.kind == "report" and e.segment_id == "g2"]
    assert all(r.metrics["ngpus"] == 2 and r.metrics["env"] == 2 for r in reports)
    fin = {e.segment_id: e for e in events if e.kind == "finished"}
    # Only one slot was free while g2 ran: the second 2-GPU segment is refused, not split.
    assert fin["g2b"].status == "lost"
    assert fin["g2"].status == "done"


def test_stop_request_ends_a_segment_early(redis_server, workers, tmp_path):
    workers.start("w1")
    app = make_app(redis_server)
    seg = _segment(tmp_path, "long", "tests.trainables:slow", {"sleep": 0.1}, stop=200)
    app.send_task(TASK_NAME, args=[seg.model_dump()], queue="w1")
    time.sleep(0.8)
    redis_server.client().sadd("stop", "long")
    fin = [e for e in _collect(redis_server, {"long"}) if e.kind == "finished"][0]
    assert fin.status == "stopped" and 0 < fin.last_step < 200
    assert fin.checkpoint_step == fin.last_step


def test_pickled_messages_are_refused_not_executed(redis_server, workers, tmp_path):
    workers.start("w1")
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    app = make_app(BrokerAddress.parse(redis_server.url))
    with app.producer_or_acquire() as producer:
        producer.publish(
            {"args": [Exploit()], "kwargs": {}}, serializer="pickle", routing_key="w1",
            exchange="", headers={"task": TASK_NAME, "id": "evil", "lang": "py"},
            declare=[])
    time.sleep(1.0)
    # The worker is still alive and runs the next (JSON) segment; the pickle never ran.
    seg = _segment(tmp_path, "ok", "tests.trainables:quadratic", {"x": 0.1}, stop=1)
    app.send_task(TASK_NAME, args=[seg.model_dump()], queue="w1")
    _collect(redis_server, {"ok"})
    assert not marker.exists()
    log = (tmp_path / "w1.log").read_text()
    assert "ContentDisallowed" in log or "disallowed" in log.lower(), log[-2000:]
    assert json.loads(seg.model_dump_json())["trainable"] == "tests.trainables:quadratic"
