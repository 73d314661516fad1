"""Resume: a stopped or killed sweep is taken up where it stopped, nothing finished is lost."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from budgets import Ledger
from tests._sims import drive_journaled as _drive
from tuner import ConfigError, choice, grid, randint, resume, tune, uniform
from tuner._journal import RestoreError, replay
from tuner._sampling import Sampler
from tuner._status import status_document
from tuner._store import Store
from tuner.schedulers import ASHA, Hyperband, SuccessiveHalving, TrialStatus

ROOT = Path(__file__).resolve().parents[2]


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
    # (With more trials to run: a resume with nothing to do starts nothing, whatever its time.)
    with pytest.raises(ConfigError, match="needs at least 3 s") as short:
        resume(exp, time_budget=more.wall_s + 1.0, num_trials=27)
    assert short.value.field == "time_budget"
    assert Store(exp, readonly=True).experiment()["wall_s"] == pytest.approx(more.wall_s,
                                                                      abs=1e-3)


@pytest.mark.slow
def test_a_sweep_with_an_optuna_sampler_and_distributions_is_resumed_given_the_sampler(
        tmp_path):
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    space = {"x": FloatDistribution(0.0, 1.0, step=0.05), "lr": FloatDistribution(
        1e-4, 1e-1, log=True), "k": IntDistribution(1, 64, log=True),
        "h": CategoricalDistribution([16, 32]), "sleep": 0.05}
    exp = tmp_path / "exp"
    small = {"type": "asha", "min_resource": 1, "max_resource": 3, "reduction_factor": 3}
    first = tune(_sweep(space=space, num_trials=3, scheduler=small,
                        sampler=optuna.samplers.RandomSampler(1)),
                 time_budget="2m", cost_budget=1.0, experiment_dir=exp, verbose=0)
    assert first.state == "finished"
    with pytest.raises(ConfigError, match="sampler: the sweep ran with the Optuna sampler "
                                          "optuna.samplers._random.RandomSampler"):
        resume(exp, time_budget="4m", cost_budget=2.0, num_trials=5)
    more = resume(exp, time_budget="4m", cost_budget=2.0, num_trials=5,
                  sampler=optuna.samplers.TPESampler(seed=2))
    assert more.state == "finished" and more.trials.shape[0] == 5
    for _, row in more.trials.iterrows():
        for name, dist in space.items():
            if name != "sleep":
                value = row[f"params.{name}"]
                value = int(value) if isinstance(dist, IntDistribution) or name == "h" else value
                assert dist._contains(dist.to_internal_repr(value)), (name, value)


@pytest.mark.slow
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
            try:
                rows = store.query("SELECT trial_id, value FROM trials WHERE state IN "
                                   "('completed', 'pruned', 'paused')")
            except sqlite3.OperationalError:   # the file exists, its tables not yet
                rows = []
            finally:
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


# -- no parameter set is sampled twice --------------------------------------------------------
def _params(exp: Path) -> list[str]:
    """Every trial's params in the order they were sampled, each as one comparable string."""
    store = Store(exp, readonly=True)
    rows = store.query("SELECT params FROM trials ORDER BY number")
    store.close()
    return [json.dumps(json.loads(r["params"]), sort_keys=True) for r in rows]


def _params_so_far(exp: Path) -> list[str]:
    """:func:`_params` of a sweep that may still be creating its store (none yet)."""
    try:
        return _params(exp) if (exp / "experiment.db").exists() else []
    except sqlite3.OperationalError:   # the file exists, its tables not yet
        return []


def _history(sampler: Sampler, n: int) -> list[tuple[str, dict, str, float | None, dict]]:
    """``n`` trials asked of ``sampler`` as the controller hands them to ``restore``: every
    fourth completed, the rest paused at rung 1 (open, as ASHA leaves them)."""
    out = []
    for i in range(n):
        tid = f"t{i + 1:04d}"
        params = sampler.ask(tid)
        value = params["x"] if "x" in params else float(i)
        sampler.report(tid, value, 1)
        state = "completed" if i % 4 == 0 else "paused"
        if state == "completed":
            sampler.tell(tid, state, value)
        out.append((tid, params, state, value if state == "completed" else None, {1: value}))
    return out


@pytest.mark.parametrize("kind", ["tpe", "random"])
def test_a_restored_sampler_continues_its_seeded_stream(kind):
    space = {"x": uniform(0.0, 1.0), "hidden": choice([16, 32, 64, 128])}
    history = _history(Sampler(space, kind, "max", 0), 12)
    resumed, again = Sampler(space, kind, "max", 0), Sampler(space, kind, "max", 0)
    resumed.restore(history)
    again.restore(history)
    new = [resumed.ask(f"t{i:04d}") for i in range(13, 25)]
    # Not the first run's stream again: no set of the history comes back.
    sets = [json.dumps(p, sort_keys=True) for p in [h[1] for h in history] + new]
    assert len(set(sets)) == 24
    # The same seed and history give the same continuation.
    assert [again.ask(f"t{i:04d}") for i in range(13, 25)] == new


def test_a_restored_grid_goes_on_along_its_grid():
    space = {"x": grid([0.1, 0.2, 0.3]), "hidden": grid([16, 32]), "sleep": 0.0}
    whole = Sampler(space, "grid", "max", 4)
    order = [whole.ask(f"t{i}") for i in range(6)]
    first = Sampler(space, "grid", "max", 4)
    history = _history(first, 2)
    resumed = Sampler(space, "grid", "max", 4)
    resumed.restore(history)
    assert [h[1] for h in history] + [resumed.ask(f"n{i}") for i in range(4)] == order


@pytest.mark.parametrize("kind", ["tpe", "random"])
def test_a_finite_space_is_asked_through_before_any_set_repeats(kind):
    space = {"x": choice([0.0, 0.3, 0.6]), "hidden": randint(1, 2), "sleep": 0.0}
    for seed in range(5):
        sampler = Sampler(space, kind, "max", seed)
        history = _history(sampler, 4)
        sets = [json.dumps(h[1], sort_keys=True) for h in history]
        sets += [json.dumps(sampler.ask(f"n{i}"), sort_keys=True) for i in range(2)]
        assert len(set(sets)) == 6, seed                 # 3 x 2 sets: each once
        repeat = json.dumps(sampler.ask("n2"), sort_keys=True)
        assert repeat in sets                             # then repeats are all there is
        resumed = Sampler(space, kind, "max", seed)       # and a resumed sweep knows them
        resumed.restore(history)
        sets = [json.dumps(h[1], sort_keys=True) for h in history]
        sets += [json.dumps(resumed.ask(f"n{i}"), sort_keys=True) for i in range(2)]
        assert len(set(sets)) == 6, seed


@pytest.mark.slow
def test_a_choice_space_smaller_than_the_sweep_repeats_a_set_only_once_all_ran(tmp_path):
    # 3 sets and 5 trials: the first 3 trials take the 3 sets, the last 2 repeat some.
    exp = tmp_path / "exp"
    result = tune(_sweep(space={"x": choice([0.0, 0.3, 0.6]), "sleep": 0.0}, num_trials=5,
                         scheduler={"type": "asha", "min_resource": 1, "max_resource": 3,
                                    "reduction_factor": 3}),
                  time_budget="2m", cost_budget=1.0, experiment_dir=exp)
    assert result.state == "finished"
    sets = _params(exp)
    assert len(sets) == 5 and len(set(sets[:3])) == 3


SWEEP_YAML = """\
name: distinct
trainable: tests.trainables:quadratic
metric: score
mode: max
space: {{x: {{uniform: [0.0, 1.0]}}, hidden: {{choice: [16, 32, 64, 128]}}, sleep: {sleep}}}
scheduler: {{type: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}}
num_trials: {trials}
seed: 0
budget: {{time: 3m, cost: 1.0}}
provider: {{type: local, workers: 2}}
"""


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner.cli", *args], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_an_extended_sweep_samples_no_parameter_set_twice(tmp_path):
    sweep, exp = tmp_path / "sweep.yaml", tmp_path / "exp"
    sweep.write_text(SWEEP_YAML.format(sleep=0.0, trials=9))
    first = _cli("run", str(sweep), "--json", "--dir", str(exp))
    assert first.returncode == 0, first.stderr
    more = _cli("resume", str(exp), "--num-trials", "18", "--time-budget", "6m",
                "--cost-budget", "2", "--json")
    assert more.returncode == 0, more.stderr
    assert json.loads(more.stdout)["trials"]["total"] == 18
    sets = _params(exp)
    assert len(sets) == 18 and len(set(sets)) == 18


@pytest.mark.slow
def test_a_stopped_and_resumed_sweep_samples_no_parameter_set_twice(tmp_path):
    sweep, exp = tmp_path / "sweep.yaml", tmp_path / "exp"
    sweep.write_text(SWEEP_YAML.format(sleep=0.5, trials=12))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--json",
                             "--dir", str(exp)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(_params_so_far(exp)) < 2:
            time.sleep(0.1)
        # What ``elastune stop`` writes, without its start-up time: the sweep must stop
        # before it has sampled all its trials.
        (exp / "STOP").touch()
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert json.loads(out)["state"] == "stopped", err
    assert len(_params(exp)) < 12                   # trials are left to sample on resume
    again = _cli("resume", str(exp), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["state"] == "finished"
    sets = _params(exp)
    assert len(sets) == 12 and len(set(sets)) == 12


# -- a resume with nothing to do --------------------------------------------------------------
@pytest.mark.slow
def test_resuming_a_finished_sweep_with_nothing_to_do_starts_and_bills_nothing(tmp_path):
    sweep, exp = tmp_path / "sweep.yaml", tmp_path / "exp"
    sweep.write_text(SWEEP_YAML.format(sleep=0.0, trials=3).replace("max_resource: 9",
                                                                    "max_resource: 3"))
    first = _cli("run", str(sweep), "--json", "--dir", str(exp))
    assert first.returncode == 0, first.stderr
    before = json.loads(first.stdout)
    assert before["state"] == "finished"

    def stored() -> tuple[dict, list[dict]]:
        store = Store(exp, readonly=True)
        doc, rows = status_document(store, exp), store.instances()
        store.close()
        return doc, rows

    instances = stored()[1]
    again = _cli("resume", str(exp), "--json")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().count("\n") == 0       # one JSON object, nothing else
    assert json.loads(again.stdout) == before
    assert "nothing to do" in again.stderr
    human = _cli("resume", str(exp), "--time-budget", "6m", "--cost-budget", "2")
    assert human.returncode == 0, human.stderr
    assert "nothing to do" in human.stdout + human.stderr
    assert stored() == (before, instances)              # nothing spent, no worker started


@pytest.mark.slow
def test_a_planner_chosen_count_has_work_on_resume_only_with_larger_budgets(tmp_path):
    # With larger budgets the controller may start another bracket (``more_brackets``); with
    # those its bracket ended on, it asked for one then and was refused.
    from tuner._config import load_sweep
    from tuner._tune import _nothing_to_do

    exp = tmp_path / "exp"
    tune(_sweep(num_trials=3, scheduler={"type": "asha", "min_resource": 1, "max_resource": 3,
                                         "reduction_factor": 3}),
         time_budget="2m", cost_budget=1.0, experiment_dir=exp)
    store = Store(exp, readonly=True)
    row = store.experiment()
    assert row["state"] == "finished" and row["message"] == "done"
    planned = {**row["config"], "provider": {"type": "local", "scaling": "plan"}}
    same, larger = load_sweep(planned), load_sweep(planned, cost_budget=2.0)
    assert _nothing_to_do(same, store, row, chosen=True)
    assert not _nothing_to_do(larger, store, row, chosen=True)
    assert not _nothing_to_do(load_sweep(planned, time_budget="1h"), store, row, chosen=True)
    assert _nothing_to_do(larger, store, row, chosen=False)     # a count the user set
    # A controller that died left instances and segments for the resumed one to take over.
    assert not _nothing_to_do(same, store, {**row, "state": "running"}, chosen=False)
    store.close()
