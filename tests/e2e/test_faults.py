"""Faults with real processes: Redis killed and restarted, a hung or slow trainable past its
timeout, a worker that stops heart-beating, the controller SIGKILLed again and again. After
each, nothing finished is lost: the store's reports of every finished segment are exactly what
the trainable emitted in that run (each run logs what it sent), and no instance is left."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests._procs import descendants
from tuner import choice, tune, uniform
from tuner._store import Store

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(400)


def _sweep(log: Path, **over):
    base = {
        "name": "faults",
        "trainable": "tests.trainables:counted",
        "metric": "score",
        "mode": "max",
        "space": {"x": uniform(0.0, 1.0), "sleep": 0.1, "log": str(log)},
        "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                      "reduction_factor": 3},
        "num_trials": 9,
        "seed": 3,
        "provider": {"type": "local", "workers": 2},
    }
    base.update(over)
    return base


def _runs(log: Path) -> list[dict]:
    """What each run of the ``counted`` trainable emitted."""
    runs = []
    for path in log.glob("*.txt"):
        lines = path.read_text().splitlines()
        _, trial, start = lines[0].split()
        runs.append({"trial": trial, "start": int(start),
                     "steps": [int(x.split()[1]) for x in lines if x.startswith("report ")],
                     "ended": lines[-1] == "end"})
    return runs


def assert_nothing_lost(exp: Path, log: Path) -> Store:
    """Every segment the store holds as done kept exactly the reports its run emitted; no
    step of a trial is stored twice; every finished trial's curve is continuous."""
    store = Store(exp, readonly=True)
    runs = _runs(log)
    stored: dict[str, list[int]] = {}
    for row in store.query("SELECT segment_id, step FROM reports ORDER BY step"):
        stored.setdefault(row["segment_id"], []).append(row["step"])
    done = [s for s in store.segments() if s["state"] == "done"]
    assert done, "no segment finished"
    for seg in done:
        emitted = [r["steps"] for r in runs if r["ended"] and r["trial"] == seg["trial_id"]
                   and r["start"] == seg["start_step"]]
        assert stored.get(seg["segment_id"], []) in emitted, (seg, emitted)
    dup = store.query("SELECT trial_id, step, COUNT(*) AS n FROM reports "
                      "GROUP BY trial_id, step HAVING n > 1")
    assert not dup, dup
    for row in store.query("SELECT trial_id, last_step FROM trials "
                           "WHERE state IN ('completed', 'pruned')"):
        steps = [r["step"] for r in store.reports(row["trial_id"])]
        assert steps == list(range(1, row["last_step"] + 1)), row
    return store


def _no_instance_left(store: Store) -> None:
    left = [i for i in store.instances() if i["state"] != "terminated"]
    assert not left, left


def _children(name: str) -> set[int]:
    out = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", name], capture_output=True,
                         text=True).stdout.split()
    return {int(p) for p in out}


def test_redis_killed_and_restarted_mid_sweep_loses_nothing(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    before = _children("redis-server")
    killed: list[int] = []

    def kill_redis(snapshot):
        if killed or snapshot["running_segments"] == 0 or not list(log.glob("*.txt")):
            return
        for pid in _children("redis-server") - before:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    result = tune(_sweep(log), time_budget="3m", cost_budget=None,
                  experiment_dir=tmp_path / "exp", observer=kill_redis)
    assert killed, "redis-server was not killed"
    assert result.state == "finished"
    assert set(result.trials["state"]) <= {"completed", "pruned"}
    store = assert_nothing_lost(tmp_path / "exp", log)
    # Nothing was lost to the broker's death: no segment given up, no instance replaced.
    assert {s["state"] for s in store.segments()} == {"done"}
    assert len(store.instances()) == 2
    _no_instance_left(store)


def test_a_trainable_past_its_segment_timeout_fails_and_the_sweep_goes_on(tmp_path):
    sweep = {
        "name": "timeouts", "trainable": "tests.trainables:stuck", "metric": "score",
        "mode": "max", "space": {"kind": choice(["ok", "slow", "hang"]), "sleep": 1.0},
        "sampler": "grid", "num_trials": 3, "seed": 0, "max_failures": 1,
        "segment_timeout": 2.5,
        "scheduler": {"type": "asha", "min_resource": 5, "max_resource": 5,
                      "reduction_factor": 3},
        "provider": {"type": "local", "workers": 3},
    }
    result = tune(sweep, time_budget="3m", cost_budget=None, experiment_dir=tmp_path / "exp")
    assert result.state == "finished"
    by_kind = {row["params.kind"]: row for _, row in result.trials.iterrows()}
    assert by_kind["ok"]["state"] == "completed"
    for kind in ("slow", "hang"):          # the first try and one retry, both timed out
        assert by_kind[kind]["state"] == "failed"
        assert by_kind[kind]["failures"] == 2
        assert "timed out" in by_kind[kind]["error"]
    store = Store(tmp_path / "exp", readonly=True)
    failed = [s for s in store.segments() if s["state"] == "failed"]
    assert len(failed) == 4 and all("timed out" in s["error"] for s in failed)
    # A cooperative trainable stops at its timeout; a deaf one costs its worker process,
    # which is replaced while there is work left (after the last hang there may be none).
    assert sum("was stopped at step" in s["error"] for s in failed) == 2
    assert 3 + 1 <= len(store.instances()) <= 3 + 2
    _no_instance_left(store)


def test_a_worker_that_stops_heart_beating_is_given_up_and_replaced(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    frozen: list[int] = []

    def freeze_one_worker(snapshot):
        if frozen or snapshot["running_segments"] == 0 or not list(log.glob("*.txt")):
            return
        for pid in descendants("--name beatless-w-1 "):
            os.kill(pid, signal.SIGSTOP)     # alive, but silent: no beat, no event
            frozen.append(pid)

    sweep = _sweep(log, name="beatless", provider={"type": "local", "workers": 2,
                                                   "heartbeat_timeout_s": 3.0})
    sweep["space"]["sleep"] = 0.3
    try:
        result = tune(sweep, time_budget="3m", cost_budget=None,
                      experiment_dir=tmp_path / "beatless", observer=freeze_one_worker)
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert frozen, "no worker was frozen"
    assert result.state == "finished"
    assert set(result.trials["state"]) <= {"completed", "pruned"}
    store = assert_nothing_lost(tmp_path / "beatless", log)
    states = Counter(s["state"] for s in store.segments())
    assert states["stale"] >= 1, states
    assert set(states) <= {"done", "stale"}
    assert len(store.instances()) == 3                      # the frozen one was replaced
    _no_instance_left(store)


def test_a_controller_killed_at_12_random_points_resumes_without_losing_anything(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"""\
name: killed-often
trainable: tests.trainables:counted
metric: score
mode: max
space: {{x: {{uniform: [0.0, 1.0]}}, sleep: 0.3, log: {json.dumps(str(log))}}}
scheduler: {{type: asha, min_resource: 1, max_resource: 27, reduction_factor: 3}}
num_trials: 27
seed: 4
budget: {{time: 10m, cost: 2.0}}
provider: {{type: local, workers: 2}}
""")
    exp = tmp_path / "exp"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rng = random.Random(20)
    kills = 0
    finished: dict[tuple[str, int], float] = {}
    first = True
    in_window = 0
    while kills < 12:
        cmd = (["run", str(sweep), "--dir", str(exp)] if first else ["resume", str(exp)])
        # Every fourth run kills itself at a segment's end, inside its transaction or just
        # after it commits (a window too narrow for a kill from outside to find).
        window = not first and kills % 4 == 2
        runner = (["tests._dies_at_segment_end", str(rng.randint(1, 3)),
                   rng.choice(["inside", "after"]), "--"] if window else ["tuner.cli"])
        proc = subprocess.Popen([sys.executable, "-m", *runner, *cmd, "--json"],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        try:
            # Mostly early (start-up, first segments); every fourth run lives long enough for
            # segments to finish even where starting the controller and workers is slow.
            proc.wait(timeout=60.0 if window else
                      rng.uniform(0.5, 2.5) if kills % 4 != 1 else rng.uniform(3.0, 6.0))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
        else:
            if window and proc.returncode == -signal.SIGKILL:
                kills += 1
                in_window += 1
            else:
                assert proc.returncode == 0, f"{cmd[0]} exited with {proc.returncode}"
                break   # it finished before the next kill
        finally:
            proc.stdout.close()
        if not (exp / "experiment.db").exists():
            continue   # killed before it wrote anything: start again
        first = False
        store = Store(exp, readonly=True)
        now = {(r["trial_id"], r["step"]): r["value"] for r in store.query(
            "SELECT r.trial_id, r.step, r.value FROM reports r JOIN segments s "
            "ON r.segment_id = s.segment_id WHERE s.state = 'done'")}
        store.close()
        for key, value in finished.items():   # a finished segment's reports stay, unchanged
            assert now.get(key) == value, (key, value, now.get(key))
        finished.update(now)
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "resume", str(exp), "--json"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "finished" and doc["trials"]["total"] == 27
    assert doc["trials"]["completed"] >= 1
    assert kills >= 8, f"only {kills} kills: the sweep was too quick to test"
    assert in_window >= 2, f"only {in_window} kills at a segment's end"
    store = assert_nothing_lost(exp, log)
    assert finished, "no segment had finished before the last kill"
    after = {(r["trial_id"], r["step"]): r["value"] for r in store.query(
        "SELECT trial_id, step, value FROM reports")}
    for key, value in finished.items():
        assert after[key] == value
    assert set(r["state"] for r in store.query("SELECT state FROM trials")) <= {
        "completed", "pruned"}
    _no_instance_left(store)


def test_a_full_checkpoint_disk_stops_the_sweep_cleanly_with_a_clear_error(tmp_path):
    sweep = _sweep(tmp_path, name="full", trainable="tests.trainables:disk_filler",
                   space={"x": uniform(0.0, 1.0), "full_at": 3})
    result = tune(sweep, time_budget="2m", cost_budget=None, experiment_dir=tmp_path / "exp")
    assert result.state == "failed"
    assert "checkpoint storage is full" in result.status["message"]
    store = Store(tmp_path / "exp", readonly=True)
    # Not blamed on a trial: none failed, and the rung-1 results stay.
    assert "failed" not in set(result.trials["state"])
    last = dict(zip(result.trials["trial_id"], result.trials["last_step"], strict=True))
    done = [s for s in store.segments() if s["state"] == "done"]
    assert done and all(last[s["trial_id"]] >= s["stop_step"] for s in done)
    failed = [s for s in store.segments() if s["state"] == "failed"]
    assert failed and all("checkpoint storage is full" in s["error"] for s in failed)
    _no_instance_left(store)
    # The CLI says so, with exit status 1.
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "status", str(tmp_path / "exp"),
                          "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert json.loads(out.stdout)["message"].startswith("the checkpoint storage is full")
