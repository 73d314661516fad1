"""``elastune ls`` and ``elastune stop`` on real sweeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner.cli import main

ROOT = Path(__file__).resolve().parents[2]
SLOW = """\
name: stop-me
trainable: tests.trainables:slow
metric: score
mode: max
space:
  sleep: 0.3
scheduler: {type: asha, min_resource: 1, max_resource: 27, reduction_factor: 3}
num_trials: 9
budget: {time: 5m, cost: 1.0}
provider: {type: local, workers: 2}
"""


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_stop_ends_a_running_sweep_cleanly_and_ls_lists_it(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(SLOW)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    exp = tmp_path / "root" / "exp"
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--json",
                             "--dir", str(exp)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = _cli("status", str(exp), "--json", env=env)
            if status.returncode == 0 and json.loads(status.stdout)["trials"]["running"] > 0:
                break
            time.sleep(0.3)
        stopped = _cli("stop", str(exp), env=env)
        assert stopped.returncode == 0, stopped.stderr
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    doc = json.loads(out)
    assert doc["state"] == "stopped", err
    assert doc["wall_s"] < 60                 # it stopped well before its 5 minute budget
    listed = _cli("ls", str(tmp_path / "root"), "--json", env=env)
    assert listed.returncode == 0
    (entry,) = json.loads(listed.stdout)["experiments"]
    assert entry["experiment"] == doc["experiment"] and entry["state"] == "stopped"
    assert entry["spend_usd"] == doc["spend_usd"]
    again = _cli("stop", str(exp), env=env)     # not running any more: bad input
    assert again.returncode == 2 and "stopped" in again.stderr


def test_ls_and_stop_reject_what_is_not_an_experiment(tmp_path, capsys):
    assert main(["ls", str(tmp_path / "nowhere")]) == 2
    assert "ROOT" in capsys.readouterr().err
    assert main(["stop", str(tmp_path)]) == 2
    assert "DIR" in capsys.readouterr().err


def test_cloud_cli_names_bad_options(capsys):
    assert main(["cloud", "ls", "--provider", "azure"]) == 2
    assert "--provider" in capsys.readouterr().err
    assert main(["cloud", "ls", "--provider", "gcp", "--zone", "us-central1-a"]) == 2
    assert "--project" in capsys.readouterr().err
