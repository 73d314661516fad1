"""A pool sweep hands its workers absolute paths: they run in working directories of their own
(on other machines, the same path on a shared filesystem), where the default relative
experiment directory (``experiments/...``) would name another folder."""

from __future__ import annotations

from pathlib import Path

from budgets import RealClock
from tuner import load_sweep
from tuner._providers import _pool
from worker import BrokerAddress

SWEEP = {"trainable": "tests.trainables:slow", "metric": "score", "mode": "max",
         "space": {"x": {"uniform": [0.0, 1.0]}},
         "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9},
         "num_trials": 3, "budget": {"time": "10m"}, "provider": {"type": "pool", "name": "gpu-a"}}


def _workers(exp_dir: Path, trainable: str, bundle_fn=None):
    # (no connection is made: the client connects at its first command)
    return _pool(load_sweep(SWEEP), BrokerAddress.parse("redis://:pw@127.0.0.1:6379/0"),
                 "exp", exp_dir, trainable, bundle_fn, RealClock())


def test_a_relative_experiment_dir_reaches_pool_workers_as_an_absolute_path(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rel = Path("experiments") / "exp"
    rel.mkdir(parents=True)
    workers = _workers(rel, "tests.trainables:slow")
    assert workers.checkpoint_root == str(tmp_path / "experiments" / "exp" / "checkpoints")
    assert workers.trainable == "tests.trainables:slow"


def test_a_code_bundle_reaches_pool_workers_by_an_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rel = Path("experiments") / "exp"
    rel.mkdir(parents=True)

    def train(params, ctx):
        pass

    bundle = tmp_path / "experiments" / "exp" / "code" / "trainable.pkl"
    assert _workers(rel, "<train>", train).trainable == f"bundle:{bundle}"
    # ...and on resume, the stored bundle it is given by its relative path
    assert _workers(rel, f"bundle:{rel / 'code' / 'trainable.pkl'}").trainable \
        == f"bundle:{bundle}"
