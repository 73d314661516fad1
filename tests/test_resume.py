"""Resume: a stopped or killed sweep is taken up where it stopped, nothing finished is lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from budgets import Ledger
from tuner import ConfigError, resume, tune, uniform
from tuner._journal import RestoreError, replay
from tuner._store import Store
from tuner.schedulers import ASHA, Hyperband, SuccessiveHalving, TrialStatus

ROOT = Path(__file__).resolve().parents[1]


def _drive(scheduler, store, values, stop_after):
    """Run a scheduler with the controller's journaling for ``stop_after`` calls."""
    n, calls, running = 0, 0, []
    while calls < stop_after:
        job = scheduler.next_job(f"t{n + 1:04d}")
        if job is not None:
            if job.new:
                n += 1
            store.journal_add("job", job.trial_id, job.to_step, bracket=job.bracket,
                              flag=job.new)
            running.append(job)
        elif not running:
            break
        if running and (job is None or len(running) >= 3):
            done = running.pop(0)
            v = values(done.trial_id, done.to_step)
            store.journal_add("rung", done.trial_id, done.to_step, v)
            scheduler.on_rung(done.trial_id, done.to_step, v)
        calls += 1
    return running


@pytest.mark.parametrize("make", [
    lambda: ASHA(1, 27, 3, "max", 40),
    lambda: SuccessiveHalving(1, 27, 3, "max", 27),
    lambda: SuccessiveHalving(1, 27, 3, "max", 27, early_promotion=True),
    lambda: Hyperband(1, 27, 3, "max"),
])
def test_the_journal_rebuilds_every_scheduler(tmp_path, make):
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "m", "max", None, None)

    def values(tid, step):
        return (int(tid[1:]) * 7919 % 101) / 100 + step / 1000

    original = make()
    running = _drive(original, store, values, 60)
    rebuilt = make()
    assert replay(rebuilt, store.journal()) == len(store.journal())
    ids = {e["trial_id"] for e in store.journal()}
    assert {t: rebuilt.status(t) for t in ids} == {t: original.status(t) for t in ids}
    for job in running:                       # in flight at the "crash": offered again
        original.on_job_lost(job.trial_id)
        rebuilt.on_job_lost(job.trial_id)
    for k in range(5):                        # and both go on making the same decisions
        a, b = original.next_job(f"n{k}"), rebuilt.next_job(f"n{k}")
        assert a == b


def test_a_stage_decided_early_is_journaled_and_replayed(tmp_path):
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "m", "max", None, None)
    original = SuccessiveHalving(1, 9, 3, "max", 9)

    def start(trial_id):
        job = original.next_job(trial_id)
        store.journal_add("job", job.trial_id, job.to_step, bracket=job.bracket, flag=job.new)
        return job

    for job in [start(f"t{i}") for i in range(9)]:             # stage 0, all reported
        store.journal_add("rung", job.trial_id, 1, int(job.trial_id[1:]) / 10)
        original.on_rung(job.trial_id, 1, int(job.trial_id[1:]) / 10)
    job = [start("x") for _ in range(3)][-1]                  # stage 1: one of 3 reports
    store.journal_add("rung", job.trial_id, 3, 1.0)
    original.on_rung(job.trial_id, 3, 1.0)
    store.journal_add("decide", "*")
    cut = original.decide_stage()
    assert len(cut) == 2
    rebuilt = SuccessiveHalving(1, 9, 3, "max", 9)
    replay(rebuilt, store.journal())
    assert [rebuilt.status(t) for t in cut] == [TrialStatus.PRUNED] * 2
    assert rebuilt.next_job("y") == original.next_job("y")
    with pytest.raises(RestoreError, match="cannot decide"):
        replay(ASHA(1, 9, 3, "max", 9), [{"kind": "decide", "trial_id": "*"}])


def _resized_stage(tmp_path, kind: str, trials: int) -> tuple[Store, SuccessiveHalving]:
    # 9 trials to rung 1 of 1/3/9, stage 1 resized to ``trials`` as the controller journals
    # it (``kind``), then every trial's rung-1 report.
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "m", "max", None, None)
    original = SuccessiveHalving(1, 9, 3, "max", 9)
    for i in range(9):
        job = original.next_job(f"t{i}")
        store.journal_add("job", job.trial_id, job.to_step, bracket=job.bracket, flag=job.new)
    store.journal_add(kind, "*", trials, bracket=1)
    (original.limit_stage if kind == "promote" else original.widen_stage)(1, trials)
    for i in range(9):
        store.journal_add("rung", f"t{i}", 1, i / 10)
        original.on_rung(f"t{i}", 1, i / 10)
    return store, original


def test_a_stage_limited_by_a_replan_is_journaled_and_replayed(tmp_path):
    store, original = _resized_stage(tmp_path, "promote", 1)
    rebuilt = SuccessiveHalving(1, 9, 3, "max", 9)
    replay(rebuilt, store.journal())
    assert rebuilt.sizes == original.sizes == [9, 1, 1]
    assert rebuilt.next_job("y") == original.next_job("y")
    assert rebuilt.next_job("y") is None
    with pytest.raises(RestoreError, match="cannot limit"):
        replay(ASHA(1, 9, 3, "max", 9), [{"kind": "promote", "trial_id": "*", "step": 1,
                                          "bracket": 1}])


def test_a_stage_widened_by_a_replan_is_journaled_and_replayed(tmp_path):
    store, original = _resized_stage(tmp_path, "widen", 5)
    rebuilt = SuccessiveHalving(1, 9, 3, "max", 9)
    replay(rebuilt, store.journal())
    assert rebuilt.sizes == original.sizes == [9, 5, 1]
    assert [rebuilt.next_job("y") for _ in range(6)] == [original.next_job("y")
                                                         for _ in range(6)]
    with pytest.raises(RestoreError, match="cannot widen"):
        replay(ASHA(1, 9, 3, "max", 9), [{"kind": "widen", "trial_id": "*", "step": 5,
                                          "bracket": 1}])


def test_a_journal_from_another_scheduler_is_refused(tmp_path):
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "m", "max", None, None)
    _drive(ASHA(1, 9, 3, "max", 9), store, lambda t, s: 0.5, 20)
    with pytest.raises(RestoreError, match="journal entry"):
        replay(ASHA(2, 18, 3, "max", 9), store.journal())


def test_the_ledger_counts_earlier_spend():
    ledger = Ledger(1.0, 60.0, prior_usd=0.9)
    assert ledger.spent(0.0) == pytest.approx(0.9)
    assert not ledger.can_launch(7.2, 0.0)          # 60 s at 7.2 $/h = 0.12 > 0.1 left
    assert ledger.can_launch(3.6, 0.0)              # 0.06 fits


def _sweep(**over):
    base = {
        "name": "r", "trainable": "tests.trainables:quadratic", "metric": "score",
        "mode": "max", "space": {"x": uniform(0.0, 1.0), "sleep": 0.05},
        "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                      "reduction_factor": 3},
        "num_trials": 9, "seed": 5, "provider": {"type": "local", "workers": 2},
    }
    base.update(over)
    return base


@pytest.mark.slow
def test_a_finished_sweep_is_extended_with_more_trials_and_budget(tmp_path):
    exp = tmp_path / "exp"
    first = tune(_sweep(), time_budget="2m", cost_budget=1.0, experiment_dir=exp)
    assert first.state == "finished"
    before = first.trials.set_index("trial_id")
    done = before[before["state"] == "completed"]
    more = resume(exp, time_budget="4m", cost_budget=2.0, num_trials=18)
    assert more.state == "finished" and more.trials.shape[0] == 18
    after = more.trials.set_index("trial_id")
    for tid, row in done.iterrows():           # nothing finished is lost or re-run
        assert after.loc[tid, "state"] == "completed"
        assert after.loc[tid, "value"] == row["value"]
        assert after.loc[tid, "params.x"] == row["params.x"]
    assert more.spend_usd > first.spend_usd     # spend is a running total
    assert more.wall_s > first.wall_s
    store = Store(exp, readonly=True)
    for tid in done.index:                      # no step of a finished trial ran twice
        steps = [r["step"] for r in store.reports(tid)]
        assert steps == sorted(set(steps))
    with pytest.raises(ConfigError, match="time_budget"):
        resume(exp, time_budget=1.0)
    # 1 s left: shorter than a worker's boot and one first-rung step by the profile (3 s).
    with pytest.raises(ConfigError, match="needs at least 3 s") as short:
        resume(exp, time_budget=more.wall_s + 1.0)
    assert short.value.field == "time_budget"
    assert Store(exp, readonly=True).experiment()["wall_s"] == pytest.approx(more.wall_s,
                                                                      abs=1e-3)


def test_a_trial_sampled_but_never_journaled_is_sampled_again_on_resume(tmp_path):
    # The controller died between recording a new trial and journaling its first job: the
    # scheduler never heard of it, so the resumed run forgets it and samples the slot again.
    exp = tmp_path / "exp"
    first = tune(_sweep(), time_budget="2m", cost_budget=1.0, experiment_dir=exp, num_trials=9)
    assert first.state == "finished"
    store = Store(exp)
    store.add_trial("t0010", 10, {"x": 0.5}, 0, time.time())
    store.close()
    more = resume(exp, time_budget="4m", cost_budget=2.0, num_trials=12)
    assert more.state == "finished" and more.trials.shape[0] == 12
    store = Store(exp, readonly=True)
    assert store.segments("t0010")                 # it ran this time, sampled afresh
    assert store.trial("t0010")["params"] != {"x": 0.5}


@pytest.mark.slow
def test_a_killed_controller_is_resumed_without_losing_finished_results(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("""\
name: kill-me
trainable: tests.trainables:quadratic
metric: score
mode: max
space: {x: {uniform: [0.0, 1.0]}, sleep: 0.15}
scheduler: {type: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
num_trials: 12
seed: 2
budget: {time: 5m, cost: 1.0}
provider: {type: local, workers: 2}
""")
    exp = tmp_path / "exp"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--json",
                             "--dir", str(exp)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    finished_before: dict[str, float] = {}
    while time.monotonic() < deadline:
        if (exp / "experiment.db").exists():
            store = Store(exp, readonly=True)
            rows = store.query("SELECT trial_id, value FROM trials WHERE state IN "
                               "('completed', 'pruned', 'paused')")
            store.close()
            if len(rows) >= 4:
                break
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = Store(exp, readonly=True)
    reports_before = {(r["trial_id"], r["step"]): r["value"] for r in store.query(
        "SELECT r.trial_id, r.step, r.value FROM reports r JOIN segments s "
        "ON r.segment_id = s.segment_id WHERE s.state = 'done'")}
    finished_before = {r["trial_id"]: r["value"] for r in store.query(
        "SELECT trial_id, value FROM trials WHERE state = 'completed'")}
    store.close()
    assert reports_before, "nothing had finished before the kill"
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "resume", str(exp), "--json"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["state"] == "finished" and doc["trials"]["total"] == 12
    store = Store(exp, readonly=True)
    after = {(r["trial_id"], r["step"]): r["value"] for r in store.query(
        "SELECT trial_id, step, value FROM reports")}
    for key, value in reports_before.items():   # every finished report is still there
        assert after[key] == value
    states = {r["trial_id"]: (r["state"], r["value"]) for r in store.query(
        "SELECT trial_id, state, value FROM trials")}
    for tid, value in finished_before.items():
        assert states[tid] == ("completed", value)
    assert set(s for s, _ in states.values()) <= {"completed", "pruned"}


def test_resume_refuses_a_dir_without_an_experiment(tmp_path):
    with pytest.raises(ConfigError, match="experiment_dir"):
        resume(tmp_path)


@pytest.mark.slow
def test_more_trials_than_a_decided_halving_can_take_is_refused_and_nothing_changes(tmp_path):
    exp = tmp_path / "exp"
    sha = {"type": "sha", "min_resource": 1, "max_resource": 9, "reduction_factor": 3}
    first = tune(_sweep(scheduler=sha), time_budget="2m", cost_budget=1.0, experiment_dir=exp)
    assert first.state == "finished"
    config = Store(exp, readonly=True).experiment()["config"]
    # Synchronous halving decided its rungs with 9 trials: a 10th has no stage to join.
    with pytest.raises(ConfigError, match="num_trials") as err:
        resume(exp, time_budget="4m", cost_budget=2.0, num_trials=18)
    assert "keep num_trials at 9" in str(err.value)
    store = Store(exp, readonly=True)
    assert store.experiment()["config"] == config      # the refusal wrote nothing
    assert store.experiment()["state"] == "finished"
    store.close()
    again = resume(exp, time_budget="4m", cost_budget=2.0)
    assert again.state == "finished" and again.trials.shape[0] == 9
