"""Sweeps on the user's own Redis leave nothing behind: a finished or stopped sweep removes its
keys and its dead workers' (registry entries, queues, kombu's bindings, unacknowledged
messages); whatever remains carries a TTL."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import redis

from tests._redis_tcp import redis_on_loopback
from worker import REGISTRY_KEY

ROOT = Path(__file__).resolve().parents[2]
PW = "pw-" + secrets.token_hex(8)
SWEEP = """\
name: {name}
trainable: tests.trainables:stuck
metric: score
mode: max
space:
  kind: {{choice: [{kind}]}}
  sleep: {{uniform: [0.05, 0.1]}}
scheduler: {{type: asha, min_resource: 1, max_resource: 3, reduction_factor: 3}}
num_trials: {trials}
budget: {{time: 3m}}
provider: {{type: local, workers: 2}}
"""


def _run(tmp_path, name, url, trials, kind):
    sweep = tmp_path / f"{name}.yaml"
    sweep.write_text(SWEEP.format(name=name, trials=trials, kind=kind))
    return subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", "run", str(sweep), "--json", "--dir",
         str(tmp_path / name), "--broker", url], cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _status(exp):
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "status", str(exp), "--json"],
                         cwd=ROOT, capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout.strip() else None


def test_finished_and_stopped_sweeps_leave_no_keys_in_the_users_redis(tmp_path):
    with redis_on_loopback(PW) as port:
        url = f"redis://:{PW}@127.0.0.1:{port}/0"
        client = redis.Redis(port=port, password=PW)
        client.set("user:own", "kept")          # the user's data is not ours to touch
        experiments = []
        for i in range(2):                      # run to the end
            proc = _run(tmp_path, f"done{i}", url, trials=3, kind="slow")
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            doc = json.loads(out)
            assert doc["state"] == "finished"
            experiments.append(doc["experiment"])
        # Stopped while segments hang, deaf to the stop: after the grace the workers are killed
        # with their messages delivered and never acknowledged.
        exp = tmp_path / "stopped"
        proc = _run(tmp_path, "stopped", url, trials=9, kind="hang")
        deadline = time.monotonic() + 120
        doc = None
        while not (doc and doc["trials"]["running"] >= 2):
            assert time.monotonic() < deadline and proc.poll() is None, doc
            time.sleep(0.2)
            doc = _status(exp)
        assert subprocess.run([sys.executable, "-m", "tuner.cli", "stop", str(exp)],
                              cwd=ROOT).returncode == 0
        out, err = proc.communicate(timeout=120)
        doc = json.loads(out)
        assert doc["state"] == "stopped", err[-3000:]
        experiments.append(doc["experiment"])

        left = {k.decode(): client.pttl(k) for k in client.scan_iter(count=1000)}
        assert client.get("user:own") == b"kept"
        left.pop("user:own")
        mine = [k for k in left if any(e in k for e in experiments)]
        assert not mine, f"keys of the sweeps are left: {mine}"
        registered = [w.decode() for w in client.hkeys(REGISTRY_KEY)]
        assert not registered, f"dead workers are still registered: {registered}"
        # Anything else (kombu's short-lived restore mutex, say) must expire on its own.
        forever = {k: ttl for k, ttl in left.items() if ttl < 0}
        assert not forever, f"keys without a TTL are left: {forever}"
