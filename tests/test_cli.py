"""The CLI contract: exit codes, --json output, and bad input that starts nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tuner.cli import main

ROOT = Path(__file__).resolve().parents[1]

GOOD = """\
name: cli-test
trainable: tests.trainables:quadratic
metric: score
mode: max
space:
  x: {uniform: [0.0, 1.0]}
scheduler: {type: asha, min_resource: 1, max_resource: 3, reduction_factor: 3}
num_trials: 4
budget: {time: 2m, cost: 1.0}
provider: {type: local, workers: 2}
"""

BAD = {
    "unknown distribution": (GOOD.replace("{uniform: [0.0, 1.0]}", "{logunif: [0.0, 1.0]}"),
                             "space.x"),
    "low above high": (GOOD.replace("{uniform: [0.0, 1.0]}", "{uniform: [1.0, 0.0]}"),
                       "space.x"),
    "missing trainable": (GOOD.replace("trainable: tests.trainables:quadratic\n", ""),
                          "trainable"),
    "unimportable trainable": (GOOD.replace("tests.trainables:quadratic",
                                            "tests.nowhere:train"), "trainable"),
    "missing function": (GOOD.replace("tests.trainables:quadratic",
                                      "tests.trainables:nothing_here"), "trainable"),
    "malformed yaml": (GOOD.replace("space:\n", "space: [\n"), "config"),
    "negative budget": (GOOD.replace("cost: 1.0", "cost: -1.0"), "budget.cost"),
    "negative time": (GOOD.replace("time: 2m", "time: -5s"), "budget.time"),
    "bad reduction factor": (GOOD.replace("reduction_factor: 3", "reduction_factor: 1"),
                             "scheduler.reduction_factor"),
    "unknown key": (GOOD + "colour: blue\n", "colour"),
    "cloud sweep without a reachable broker": (
        GOOD.replace("provider: {type: local, workers: 2}",
                     "provider: {type: aws, region: us-east-1, instance_types: [g5.xlarge], "
                     "storage: 's3://bucket/x'}"),
        "broker_url"),
    "cloud key on the local provider": (
        GOOD.replace("provider: {type: local, workers: 2}",
                     "provider: {type: local, workers: 2, storage: 's3://bucket/x'}"),
        "provider.storage"),
    "aws storage on gcs": (
        GOOD.replace("provider: {type: local, workers: 2}",
                     "provider: {type: aws, instance_types: [g5.xlarge], "
                     "storage: 'gs://bucket/x'}"),
        "provider.storage"),
    "budget below one billing minimum": (GOOD.replace("cost: 1.0", "cost: 0.001"),
                                         "budget.cost"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_names_the_field_and_starts_nothing(case, tmp_path, capsys,
                                                              monkeypatch):
    text, field = BAD[case]
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    before = set(os.listdir("/tmp"))
    code = main(["run", str(sweep), "--json"])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert field in err, err
    assert out == ""
    assert not (tmp_path / "experiments").exists()
    started = {n for n in set(os.listdir("/tmp")) - before if n.startswith("elastune-redis")}
    assert not started


def test_cli_flags_are_validated_too(tmp_path, capsys, monkeypatch):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["run", str(sweep), "--cost-budget", "lots"]) == 2
    assert "cost_budget" in capsys.readouterr().err
    assert main(["run", str(sweep), "--time-budget", "soon"]) == 2
    assert "time_budget" in capsys.readouterr().err
    assert main(["status", str(tmp_path / "nothing")]) == 2


def test_run_json_prints_one_object_and_status_agrees(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--json",
                          "--dir", str(tmp_path / "exp")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)          # exactly one JSON object, nothing else
    assert run.stdout.strip().count("\n") == 0
    assert set(doc) >= {"experiment", "dir", "state", "best", "trials", "spend_usd",
                        "cost_budget_usd", "wall_s", "time_budget_s", "deadline_met",
                        "budget_respected"}
    assert doc["state"] == "finished" and doc["trials"]["total"] == 4
    assert doc["trials"]["completed"] + doc["trials"]["pruned"] == 4
    assert 0 < doc["spend_usd"] <= 1.0 and doc["budget_respected"] is True
    status = subprocess.run([sys.executable, "-m", "tuner.cli", "status", str(tmp_path / "exp"),
                             "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout) == doc


def test_worker_command_needs_a_broker():
    run = subprocess.run([sys.executable, "-m", "tuner.cli", "worker"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "ELASTUNE_BROKER_URL"})
    assert run.returncode == 2 and "--broker" in run.stderr


def test_run_reads_the_broker_from_the_environment(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent(GOOD))
    env = dict(os.environ, PYTHONPATH=str(ROOT), ELASTUNE_BROKER_URL="ftp://:pw@example.com/0")
    run = subprocess.run([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--dir",
                          str(tmp_path / "exp")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and "broker_url" in run.stderr
    assert not (tmp_path / "exp").exists()


def test_human_output_names_best_and_spend(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent(GOOD))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--dir",
                          str(tmp_path / "exp")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "best" in run.stdout and "spend" in run.stdout


def test_status_reads_the_store_while_the_sweep_runs(tmp_path):
    import time

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD.replace("tests.trainables:quadratic", "tests.trainables:slow")
                     .replace("x: {uniform: [0.0, 1.0]}", "sleep: 0.3"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    exp = tmp_path / "exp"
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--json",
                             "--dir", str(exp)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if (exp / "experiment.db").exists():
            status = subprocess.run([sys.executable, "-m", "tuner.cli", "status", str(exp),
                                     "--json"], cwd=ROOT, env=env, capture_output=True,
                                    text=True, timeout=30)
            if status.returncode == 0:
                doc = json.loads(status.stdout)
                if doc["state"] == "running" and doc["trials"]["running"] > 0:
                    seen = doc
                    break
        time.sleep(0.2)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert seen is not None, "status never saw the sweep running"
    assert seen["wall_s"] is not None and seen["deadline_met"] is not None
    assert json.loads(out)["state"] == "finished"


def test_a_killed_controller_leaves_no_worker_or_broker_behind(tmp_path):
    import signal
    import time

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD.replace("tests.trainables:quadratic", "tests.trainables:slow")
                     .replace("x: {uniform: [0.0, 1.0]}", "sleep: 0.5"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    exp = tmp_path / "exp"
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--json",
                             "--dir", str(exp)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    children: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(children) < 3:   # redis + 2 workers
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        time.sleep(0.2)
    assert len(children) >= 3, children
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    alive = children
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if os.path.exists(f"/proc/{pid}")
                 and "Z" not in open(f"/proc/{pid}/stat").read().split()[2]]
        time.sleep(0.2)
    assert not alive, f"still running after the controller died: {alive}"
