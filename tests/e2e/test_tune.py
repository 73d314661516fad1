"""End to end: tune() on the embedded default with real Celery workers and Redis."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tuner import tune, uniform
from tuner._store import Store
from worker import load_checkpoint


def _sweep(**over):
    base = {
        "name": "t",
        "trainable": "tests.trainables:quadratic",
        "metric": "score",
        "mode": "max",
        "space": {"x": uniform(0.0, 1.0)},
        "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                      "reduction_factor": 3},
        "num_trials": 9,
        "seed": 1,
        "provider": {"type": "local", "workers": 2},
    }
    base.update(over)
    return base


@pytest.fixture(scope="module")
def asha_run(tmp_path_factory):
    exp = tmp_path_factory.mktemp("asha") / "exp"
    result = tune(_sweep(num_trials=12), time_budget="2m", cost_budget=1.0, experiment_dir=exp)
    return result, Store(exp, readonly=True)


def test_promoted_trials_continue_from_their_checkpoint(asha_run):
    result, store = asha_run
    assert result.state == "finished" and result.trials.shape[0] == 12
    promoted = 0
    for trial in result.trials.itertuples():
        steps = [r["step"] for r in store.reports(trial.trial_id)]
        assert steps == list(range(1, trial.last_step + 1)), (trial.trial_id, steps)
        segments = store.segments(trial.trial_id)
        for before, after in zip(segments, segments[1:], strict=False):
            assert after["start_step"] == before["stop_step"]
        if len(segments) > 1:
            promoted += 1
            # The checkpoint holds every step once: training resumed, never restarted.
            state = load_checkpoint(result.experiment_dir / "checkpoints" / trial.trial_id,
                                    trial.last_step)[1]
            assert state["steps"] == list(range(1, trial.last_step + 1))
    assert promoted >= 3


def test_pruned_trials_never_run_past_their_rung(asha_run):
    result, store = asha_run
    rungs = {1, 3, 9}
    for trial in result.trials.itertuples():
        if trial.state == "pruned":
            assert trial.last_step in rungs and trial.last_step < 9
        for seg in store.segments(trial.trial_id):
            reported = [r["step"] for r in store.reports(trial.trial_id)
                        if r["segment_id"] == seg["segment_id"]]
            assert max(reported) <= seg["stop_step"]
            assert seg["stop_step"] in rungs
    counts = Counter(s["stop_step"] for s in store.segments())
    # ASHA: every trial runs rung 0; promotions into a rung never outnumber the rung below.
    assert counts[1] == 12 and counts[3] <= counts[1] and counts[9] <= counts[3]
    # ...and by the end every trial in the top 1/eta of a rung has been promoted.
    assert counts[3] >= counts[1] // 3 and counts[9] >= counts[3] // 3 >= 1


def test_result_and_status_agree(asha_run):
    result, store = asha_run
    assert result.best_trial_id is not None
    best = result.trials.set_index("trial_id").loc[result.best_trial_id]
    assert result.best_value == pytest.approx(best["value"])
    assert result.best_value == pytest.approx(result.trials["value"].max())
    assert result.best_checkpoint is not None and result.best_checkpoint.exists()
    assert result.spend_usd > 0 and result.budget_respected and result.deadline_met
    assert set(result.trials.columns) >= {"trial_id", "state", "last_step", "value",
                                          "gpu_seconds", "cost_usd", "params.x"}
    assert result.trials["cost_usd"].sum() <= result.spend_usd + 1e-9


def test_sha_runs_the_exact_stage_sizes(tmp_path):
    result = tune(_sweep(scheduler={"type": "sha", "min_resource": 1, "max_resource": 9,
                                    "reduction_factor": 3}),
                  time_budget="2m", cost_budget=1.0, experiment_dir=tmp_path / "exp")
    store = Store(tmp_path / "exp", readonly=True)
    counts = Counter(s["stop_step"] for s in store.segments())
    assert counts == {1: 9, 3: 3, 9: 1}
    assert Counter(result.trials["state"]) == {"pruned": 8, "completed": 1}


def test_the_sweep_stops_before_the_cost_budget(tmp_path):
    # 36 $/h per worker with a 1 s billing minimum: the budget lasts a few seconds.
    sweep = _sweep(trainable="tests.trainables:slow", space={"sleep": 0.1},
                   num_trials=50, scheduler={"type": "asha", "min_resource": 5,
                                             "max_resource": 45, "reduction_factor": 3},
                   provider={"type": "local", "workers": 2, "price_per_hour": 36.0,
                             "billing_minimum_s": 1})
    result = tune(sweep, time_budget="2m", cost_budget=0.1, experiment_dir=tmp_path / "exp")
    assert result.state == "finished"
    assert 0.0 < result.spend_usd <= 0.1
    assert result.budget_respected
    assert result.trials.shape[0] < 50         # it did stop early
    store = Store(tmp_path / "exp", readonly=True)
    costs = sum(i["cost_usd"] for i in store.instances())
    assert costs == pytest.approx(result.spend_usd)


def test_the_sweep_ends_by_its_time_budget(tmp_path):
    # Segments of 9 steps of 0.2 s: at the deadline the ones running are most likely mid-way
    # and stop there (with 3-step segments both running ones could end their rung within the
    # grace on a busy machine, and no trial was left stopped).
    sweep = _sweep(trainable="tests.trainables:slow", space={"sleep": 0.2}, num_trials=40,
                   scheduler={"type": "asha", "min_resource": 9, "max_resource": 27,
                              "reduction_factor": 3},
                   profile={"seconds_per_step": 0.2})
    result = tune(sweep, time_budget=5, cost_budget=None, experiment_dir=tmp_path / "exp")
    assert result.state == "finished" and result.deadline_met
    assert result.wall_s <= 5 + 5          # bounded grace: stopped segments end within a step
    assert result.best_value is not None   # the best so far is returned
    assert (result.trials["state"] == "stopped").sum() >= 1


def test_a_trainable_defined_in_a_notebook_travels_as_a_code_bundle(tmp_path):
    offset = 0.5

    def train(params, ctx):  # a closure: workers cannot import it by name
        for step in ctx.steps():
            ctx.report(step, score=params["x"] + offset)
        ctx.checkpoint(None)

    result = tune(_sweep(trainable=train, num_trials=3,
                         scheduler={"type": "asha", "min_resource": 1, "max_resource": 1,
                                    "reduction_factor": 3}),
                  time_budget="1m", cost_budget=None, experiment_dir=tmp_path / "exp")
    assert result.trials.shape[0] == 3
    assert (result.trials["value"] >= 0.5).all()
    assert (tmp_path / "exp" / "code" / "trainable.pkl").exists()
    config = Store(tmp_path / "exp", readonly=True).experiment()["config"]
    json.dumps(config)  # what is stored is JSON, with no pickled code in it


def test_multi_gpu_trials_get_all_their_slots_on_one_worker(tmp_path):
    result = tune(_sweep(trainable="tests.trainables:gpu_probe", space={"sleep": 0.0},
                         num_trials=4, gpus_per_trial=2,
                         scheduler={"type": "asha", "min_resource": 1, "max_resource": 1,
                                    "reduction_factor": 3},
                         provider={"type": "local", "workers": 2, "slots": 2}, metric="ngpus"),
                  time_budget="1m", cost_budget=None, experiment_dir=tmp_path / "exp")
    reports = Store(tmp_path / "exp", readonly=True).reports()
    assert len(reports) == 4
    assert all(json.loads(r["metrics"])["env"] == 2 and r["value"] == 2 for r in reports)
    assert result.state == "finished"


def test_a_killed_worker_costs_its_segment_not_the_sweep(tmp_path):
    import os
    import signal

    from tests._procs import descendants

    killed: list[int] = []

    def kill_one_worker(snapshot):
        if killed or snapshot["running_segments"] == 0:
            return
        for pid in descendants("--name lossy-w-1 "):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    sweep = _sweep(trainable="tests.trainables:quadratic", space={"x": uniform(0, 1),
                                                                   "sleep": 0.15},
                   num_trials=6, scheduler={"type": "asha", "min_resource": 3,
                                            "max_resource": 9, "reduction_factor": 3})
    result = tune(sweep, time_budget="2m", cost_budget=None, experiment_dir=tmp_path / "lossy",
                  observer=kill_one_worker)
    assert killed, "no worker was killed"
    store = Store(tmp_path / "lossy", readonly=True)
    lost = [s for s in store.segments() if s["state"] == "lost"]
    assert lost, "the killed worker's segment was not marked lost"
    assert result.state == "finished"
    assert set(result.trials["state"]) <= {"completed", "pruned"}   # no trial lost or failed
    instances = store.instances()
    assert len(instances) == 3                                      # a replacement was launched
    for trial in result.trials.itertuples():                        # curves stay continuous
        steps = [r["step"] for r in store.reports(trial.trial_id)]
        assert steps == list(range(1, trial.last_step + 1))


def test_a_failing_trainable_is_retried_then_failed_and_the_sweep_goes_on(tmp_path):
    sweep = _sweep(trainable="tests.trainables:failing", space={"fail_at": 2}, num_trials=3,
                   max_failures=1, scheduler={"type": "asha", "min_resource": 3,
                                              "max_resource": 9, "reduction_factor": 3})
    result = tune(sweep, time_budget="1m", cost_budget=None, experiment_dir=tmp_path / "exp")
    # Every trial failed and none produced a value: the sweep failed (it is no success).
    assert result.state == "failed"
    assert "RuntimeError: boom at step 2" in result.message
    assert list(result.trials["state"]) == ["failed"] * 3
    assert (result.trials["failures"] == 2).all()          # the first try and one retry
    assert all("boom at step 2" in e for e in result.trials["error"])
    assert result.best_value is None


def test_a_sweep_whose_every_trial_fails_is_given_up_as_failed(tmp_path):
    sweep = _sweep(trainable="tests.trainables:broken", num_trials=27, max_failures=1)
    result = tune(sweep, time_budget="1m", cost_budget=1.0, experiment_dir=tmp_path / "exp")
    assert result.state == "failed" and result.status["state"] == "failed"
    assert result.best_value is None and result.best_params is None
    # Its first 3 trials failed for good (tried twice each) with no value anywhere: stopped
    # there, not after trying all 27.
    assert 3 <= len(result.trials) < 27
    assert (result.trials["state"] == "failed").sum() >= 3
    assert "completed" not in set(result.trials["state"])   # those in flight were stopped
    assert result.message == result.status["message"]
    assert result.message.startswith("no trial produced a value: the first 3 trials failed")
    assert "FileNotFoundError: no data set at /nowhere/train.csv" in result.message
    assert "in _load_rows" in result.message
    assert Store(tmp_path / "exp", readonly=True).experiment()["state"] == "failed"


def test_a_sweep_is_given_up_early_only_while_no_trial_has_a_value():
    from tuner._failures import fail_fast_at, nothing_but_failures

    assert [fail_fast_at(n) for n in (1, 2, 3, 27, 100)] == [1, 2, 3, 3, 10]
    first3 = [(1, "failed", False), (2, "failed", False), (3, "failed", False)]
    assert nothing_but_failures([*first3, (4, "running", False)], first=3) == [1, 2, 3]
    # Another trial has a value, or ended without failing: some bad regions of the space.
    assert nothing_but_failures([*first3, (4, "running", True)], first=3) is None
    assert nothing_but_failures([*first3, (4, "pruned", False)], first=3) is None
    assert nothing_but_failures([(1, "failed", False), (2, "running", False),
                                 (3, "failed", False), (4, "failed", False)], first=3) is None
    assert nothing_but_failures([(1, "failed", True), (2, "stopped", False)]) == [1]
    assert nothing_but_failures([(1, "stopped", False)]) is None      # no error: not failed


def test_a_report_without_the_sweeps_metric_stops_the_sweep_as_failed(tmp_path):
    sweep = _sweep(trainable="tests.trainables:misnamed", metric="accuracy",
                   space={"sleep": 0.5}, num_trials=27,
                   scheduler={"type": "asha", "min_resource": 3, "max_resource": 27,
                              "reduction_factor": 3})
    result = tune(sweep, time_budget="2m", cost_budget=1.0, experiment_dir=tmp_path / "exp")
    assert result.state == "failed"
    assert "'accuracy'" in result.message and "'acc'" in result.message, result.message
    # At the first report: no trial started after the first two (one a worker), none ran
    # on to its rung, every worker terminated.
    assert len(result.trials) <= 2
    assert (result.trials["last_step"] < 3).all()
    assert result.wall_s < 30
    store = Store(tmp_path / "exp", readonly=True)
    assert all(i["state"] == "terminated" for i in store.instances())


def test_a_time_budget_too_short_for_one_segment_is_refused(tmp_path):
    from tuner import ConfigError

    # Boot 2 s, then 3 steps at 1 s each: 5 s at least.
    sweep = _sweep(scheduler={"type": "asha", "min_resource": 3, "max_resource": 9,
                              "reduction_factor": 3})
    with pytest.raises(ConfigError) as err:
        tune(sweep, time_budget="4s", cost_budget=1.0, experiment_dir=tmp_path / "exp")
    assert err.value.field == "budget.time"
    assert "needs at least 5 s" in str(err.value) and "profile.boot_s" in str(err.value)
    assert not (tmp_path / "exp").exists()


def test_nan_and_infinite_values_rank_last(tmp_path):
    from tuner import choice

    sweep = _sweep(trainable="tests.trainables:nan_reporter",
                   space={"x": choice([0.1, 0.2, 0.8, 0.95])}, sampler="grid", num_trials=4,
                   scheduler={"type": "asha", "min_resource": 1, "max_resource": 3,
                              "reduction_factor": 3})
    result = tune(sweep, time_budget="1m", cost_budget=None, experiment_dir=tmp_path / "exp")
    assert sorted(result.trials["params.x"]) == [0.1, 0.2, 0.8, 0.95]   # the grid, each once
    assert result.best_params == {"x": 0.2} and result.best_value == pytest.approx(0.2)
    steps = dict(zip(result.trials["params.x"], result.trials["last_step"], strict=True))
    assert steps[0.8] == steps[0.95] == 1          # NaN and +inf are never promoted


def test_hyperband_runs_its_brackets(tmp_path):
    sweep = _sweep(scheduler={"type": "hyperband", "min_resource": 1, "max_resource": 9,
                              "reduction_factor": 3}, num_trials=None)
    result = tune(sweep, time_budget="2m", cost_budget=None, experiment_dir=tmp_path / "exp")
    # JMLR Hyperband for R=9, eta=3: brackets of 9, 5 and 3 trials starting at 1, 3 and 9.
    assert result.trials.shape[0] == 17
    assert Counter(result.trials["bracket"]) == {0: 9, 1: 5, 2: 3}
    store = Store(tmp_path / "exp", readonly=True)
    first = {}
    for seg in store.segments():
        first.setdefault(seg["trial_id"], seg["stop_step"])
    by_bracket = result.trials.set_index("trial_id")["bracket"]
    assert {by_bracket[t]: s for t, s in first.items()} == {0: 1, 1: 3, 2: 9}


def test_the_same_seed_samples_the_same_params(tmp_path):
    def params(name, seed):
        sweep = _sweep(sampler="random", num_trials=4, seed=seed,
                       scheduler={"type": "asha", "min_resource": 1, "max_resource": 1,
                                  "reduction_factor": 3})
        result = tune(sweep, time_budget="1m", cost_budget=None, experiment_dir=tmp_path / name)
        return list(result.trials["params.x"])

    assert params("a", 7) == params("b", 7)
    assert params("a2", 7) != params("c", 8)


def test_a_trainable_in_a_scripts_main_works(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "script.py"
    exp = str(tmp_path / "e")
    script.write_text(
        "from tuner import tune, uniform\n"
        "def train(params, ctx):\n"
        "    for step in ctx.steps():\n"
        "        ctx.report(step, score=params['x'])\n"
        "    ctx.checkpoint(None)\n"
        "if __name__ == '__main__':\n"
        "    r = tune({'trainable': train, 'metric': 'score', 'space': {'x': uniform(0, 1)},\n"
        "              'scheduler': {'max_resource': 3}, 'num_trials': 3},\n"
        f"             time_budget='1m', cost_budget=None, experiment_dir={exp!r})\n"
        "    print(r.state, r.trials.shape[0])\n")
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["finished", "3"]


def test_a_remote_broker_over_tcp_with_a_password(tmp_path):
    import secrets
    import socket
    import subprocess

    from worker._embedded import redis_server_binary

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    password = secrets.token_urlsafe(16)
    server = subprocess.Popen([redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
                               "--requirepass", password, "--save", "", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL)
    try:
        import redis

        client = redis.Redis(port=port, password=password)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                import time

                time.sleep(0.05)
        result = tune(_sweep(num_trials=3, scheduler={"type": "asha", "min_resource": 1,
                                                      "max_resource": 3,
                                                      "reduction_factor": 3}),
                      time_budget="1m", cost_budget=None, experiment_dir=tmp_path / "exp",
                      broker_url=f"redis://:{password}@127.0.0.1:{port}/0")
        assert result.state == "finished" and result.trials.shape[0] == 3
        # The password is in no file of the experiment: store, logs, code, checkpoints.
        for path in (tmp_path / "exp").rglob("*"):
            if path.is_file():
                assert password.encode() not in path.read_bytes(), path
    finally:
        server.terminate()
        server.wait()


def test_a_real_sha_sweep_that_promotes_early_promotes_the_same_trials(tmp_path):
    # The quadratic trainable's score depends on x and the step only: the same seed samples
    # the same x, so both sweeps rank the same trials at every rung.
    def run(early: bool):
        exp = tmp_path / f"early-{early}"
        sweep = _sweep(num_trials=18, space={"x": uniform(0.0, 1.0), "sleep": 0.02},
                       scheduler={"type": "sha", "min_resource": 1, "max_resource": 9,
                                  "reduction_factor": 3, "early_promotion": early},
                       provider={"type": "local", "workers": 3})
        result = tune(sweep, time_budget="2m", cost_budget=None, experiment_dir=exp)
        return result, Store(exp, readonly=True)

    (plain, _), (early, store) = run(False), run(True)
    assert plain.state == early.state == "finished"
    assert early.best_value == plain.best_value
    def by_x(r):
        return sorted(zip(r.trials["params.x"], r.trials["last_step"], strict=True))

    assert by_x(early) == by_x(plain)
    assert store.experiment()["config"]["scheduler"]["early_promotion"] is True
