"""The CLI contract: exit codes, --json output, and bad input that starts nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tuner.cli import main

ROOT = Path(__file__).resolve().parents[2]

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
    "unknown logger": (GOOD + "loggers: [mlflow, neptune]\n", "loggers[1]"),
    "unknown logger option": (GOOD + "loggers: [{csv: {folder: out}}]\n", "loggers[0].csv.folder"),
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
    "time budget shorter than one segment": (GOOD.replace("time: 2m", "time: 1s"),
                                             "budget.time"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_names_the_field_and_starts_nothing(case, tmp_path, capsys,
                                                              monkeypatch):
    text, field = BAD[case]
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    private = tmp_path / "tmp"          # where an embedded Redis would make its folder
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    code = main(["run", str(sweep), "--json"])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert field in err, err
    assert out == ""
    assert not (tmp_path / "experiments").exists()
    assert not [n for n in os.listdir(private) if n.startswith("elastune-redis")]


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_worker_command_needs_a_broker():
    run = subprocess.run([sys.executable, "-m", "tuner.cli", "worker"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "ELASTUNE_BROKER_URL"})
    assert run.returncode == 2 and "--broker" in run.stderr


@pytest.mark.slow
def test_run_reads_the_broker_from_the_environment(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent(GOOD))
    env = dict(os.environ, PYTHONPATH=str(ROOT), ELASTUNE_BROKER_URL="ftp://:pw@example.com/0")
    run = subprocess.run([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--dir",
                          str(tmp_path / "exp")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and "broker_url" in run.stderr
    assert not (tmp_path / "exp").exists()


@pytest.mark.slow
def test_human_output_names_best_and_spend(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent(GOOD))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--dir",
                          str(tmp_path / "exp")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "best" in run.stdout and "spend" in run.stdout


@pytest.mark.slow
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


@pytest.mark.slow
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


def _cli(*args, cwd=ROOT, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tuner.cli", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_time_budget_too_short_for_one_segment_is_refused_before_anything(tmp_path, capsys,
                                                                            monkeypatch):
    # The default local profile: a worker boots in 2 s, a step takes 1 s; the first rung is
    # one step. 1 s cannot run it: exit 2 on budget.time with the 3 s it needs, no directory,
    # nothing billed.
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD.replace("time: 2m", "time: 1s"))
    run = _cli("run", sweep, "--json", "--dir", tmp_path / "out" / "exp", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    assert "budget.time" in run.stderr and "needs at least 3 s" in run.stderr, run.stderr
    assert "profile.seconds_per_step" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()
    monkeypatch.chdir(tmp_path)                             # the default root: no new entry
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["run", str(sweep)]) == 2
    assert "needs at least 3 s" in capsys.readouterr().err
    assert not (tmp_path / "experiments").exists()


def test_plan_reports_a_time_budget_too_short_for_one_segment(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD.replace("time: 2m", "time: 1s"))
    assert main(["plan", str(sweep), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] is False
    assert doc["reason"].startswith("budget.time: ") and "needs at least 3 s" in doc["reason"]
    assert main(["plan", str(sweep)]) == 0
    assert "run refuses this sweep (exit status 2, budget.time)" in capsys.readouterr().out
    assert main(["plan", str(sweep), "--time-budget", "3s", "--json"]) == 0
    assert "needs at least" not in (json.loads(capsys.readouterr().out)["reason"] or "")


@pytest.mark.slow
def test_a_sweep_whose_every_trial_fails_exits_1_and_says_why(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD.replace("tests.trainables:quadratic", "tests.trainables:broken")
                     .replace("num_trials: 4", "num_trials: 12\nmax_failures: 1"))
    exp = tmp_path / "exp"
    run = _cli("run", sweep, "--json", "--dir", exp)
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)                          # still one JSON object on stdout
    assert run.stdout.strip().count("\n") == 0
    assert doc["state"] == "failed" and doc["best"] is None
    # Given up after its first 3 trials failed (each tried twice), not run to its 12; those
    # in flight then were stopped.
    t = doc["trials"]
    assert t["failed"] >= 3 and t["completed"] == 0 and t["total"] < 12, t
    message = doc["message"]
    assert "the first 3 trials failed" in message and "'score'" in message
    # The first failure's exception type, message and last traceback lines.
    assert "FileNotFoundError: no data set at /nowhere/train.csv" in message
    assert "in _load_rows" in message and "trainables.py" in message
    assert "error: the sweep failed: " in run.stderr
    assert "FileNotFoundError: no data set at /nowhere/train.csv" in run.stderr
    status = _cli("status", exp, "--json", timeout=60)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout) == doc
    human = _cli("run", sweep, "--dir", tmp_path / "again")
    assert human.returncode == 1 and "failed" in human.stdout
    assert "FileNotFoundError: no data set at" in human.stderr


@pytest.mark.slow
def test_a_sweep_reporting_another_metric_name_stops_at_once_and_exits_1(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD.replace("tests.trainables:quadratic", "tests.trainables:misnamed")
                     .replace("x: {uniform: [0.0, 1.0]}", "sleep: 0.5")
                     .replace("max_resource: 3", "max_resource: 27")
                     .replace("num_trials: 4", "num_trials: 20"))
    exp = tmp_path / "exp"
    run = _cli("run", sweep, "--json", "--dir", exp)
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    assert doc["state"] == "failed" and doc["best"] is None
    message = doc["message"]
    assert "'score'" in message and "'acc'" in message and "'loss'" in message, message
    assert "error: the sweep failed: " in run.stderr and "'acc'" in run.stderr
    # Stopped at the first report: no trial started after the first two (one a worker),
    # workers released well before the 2 minute budget.
    assert doc["trials"]["total"] <= 2
    assert doc["wall_s"] < 30
    status = _cli("status", exp, "--json", timeout=60)
    assert json.loads(status.stdout)["state"] == "failed"
    assert json.loads(status.stdout)["message"] == message


@pytest.mark.slow
def test_a_sweep_where_some_trials_fail_and_others_score_finishes(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(GOOD.replace("tests.trainables:quadratic", "tests.trainables:failing")
                     .replace("x: {uniform: [0.0, 1.0]}", "fail_at: {grid: [1, 99]}")
                     .replace("num_trials: 4\n", "max_failures: 0\n"))
    run = _cli("run", sweep, "--json", "--dir", tmp_path / "exp")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["state"] == "finished" and doc["message"] is None
    assert doc["trials"]["failed"] == 1 and doc["best"]["params"] == {"fail_at": 99}
