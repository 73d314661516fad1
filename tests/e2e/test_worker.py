"""Real workers on a real embedded Redis: segments, slots, stop requests, JSON only, and workers
started by hand (they outlive their shell and import from their working directory)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from worker import KEY_TTL_S, REGISTRY_KEY, TASK_NAME, BrokerAddress, load_checkpoint, make_app
from worker._slots import slots_key
from worker.records import Segment, parse_event

ROOT = Path(__file__).resolve().parents[2]
ELASTUNE = str(Path(sys.executable).parent / "elastune")
# A user's shell: starts `elastune worker` in the background, and exits once it is up.
SHELL = """
import json, signal, subprocess, sys, time
from worker import REGISTRY_KEY, BrokerAddress
cmd, log, url, name = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
signal.signal(signal.SIGHUP, signal.SIG_IGN)   # as `nohup` starts it
proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=open(log, "wb"),
                        stderr=subprocess.STDOUT)
client = BrokerAddress.parse(url).client()
deadline = time.monotonic() + 90
while not client.hexists(REGISTRY_KEY, name):
    if proc.poll() is not None or time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.05)
print(proc.pid)
"""


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


def _start_by_hand(address, tmp_path, name, cwd, env, *extra):
    """``elastune worker`` started from a shell that exits once the worker is up: the pid."""
    log = tmp_path / f"{name}.log"
    cmd = [ELASTUNE, "worker", "--name", name, *extra]
    shell = subprocess.run([sys.executable, "-c", SHELL, json.dumps(cmd), str(log), address.url,
                            name], cwd=cwd, env={**env, "ELASTUNE_BROKER_URL": address.url},
                           capture_output=True, text=True, timeout=120)
    assert shell.returncode == 0, shell.stderr + (log.read_text() if log.exists() else "")
    return int(shell.stdout), log


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid, timeout=30.0):
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def test_a_worker_started_by_hand_outlives_its_shell_and_stops_on_sigterm(redis_server,
                                                                           tmp_path):
    pid, log = _start_by_hand(redis_server, tmp_path, "by-hand", ROOT,
                              dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        # Its shell is gone; a worker that followed its parent would be shutting down now.
        time.sleep(2.0)
        client = redis_server.client()
        assert _alive(pid) and client.hexists(REGISTRY_KEY, "by-hand"), log.read_text()[-2000:]
        # Logging out sends the hangup `nohup` ignored: the worker neither stops nor restarts.
        os.kill(pid, signal.SIGHUP)
        time.sleep(1.0)
        assert _alive(pid) and "Restarting" not in log.read_text(), log.read_text()[-2000:]
        app = make_app(redis_server)
        seg = _segment(tmp_path, "h1", "tests.trainables:quadratic", {"x": 0.5}, stop=2)
        app.send_task(TASK_NAME, args=[seg.model_dump()], queue="by-hand")
        fin = [e for e in _collect(redis_server, {"h1"}) if e.kind == "finished"][0]
        assert fin.status == "done" and fin.last_step == 2
        # The events a worker writes outlive a controller that is gone for good only so long.
        assert 0 < client.ttl("ev") <= KEY_TTL_S
        os.kill(pid, signal.SIGTERM)
        assert _wait_gone(pid), "the worker did not stop on SIGTERM"
        # A worker that stops leaves neither its registry entry nor its slots behind.
        assert not client.hexists(REGISTRY_KEY, "by-hand")
        assert not client.exists(slots_key("by-hand"))
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_worker_started_by_hand_imports_modules_from_its_working_directory(redis_server,
                                                                              tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "handmod.py").write_text(textwrap.dedent("""
        def train(params, ctx):
            for step in ctx.steps():
                ctx.report(step, score=params["x"] * step)
    """))
    # Nothing but the working directory says where handmod is.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pid, log = _start_by_hand(redis_server, tmp_path, "beside", project, env,
                              "--preload", "handmod")
    try:
        app = make_app(redis_server)
        seg = _segment(tmp_path, "m1", "handmod:train", {"x": 2.0}, stop=2)
        app.send_task(TASK_NAME, args=[seg.model_dump()], queue="beside")
        events = _collect(redis_server, {"m1"})
        assert [e.metrics["score"] for e in events if e.kind == "report"] == [2.0, 4.0]
        assert events[-1].status == "done", log.read_text()[-2000:]
    finally:
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid):
            os.kill(pid, signal.SIGKILL)
