"""A pool sweep hands its workers absolute paths: they run in working directories of their own
(on other machines, the same path on a shared filesystem), where the default relative
experiment directory (``experiments/...``) would name another folder; or, with
``provider.storage``, URIs in object storage (checked writable before the sweep starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from budgets import RealClock
from tests.aws_server import (  # noqa: F401 - the fixtures aws, aws_env, aws_server
    aws_env_fixture,
    aws_fixture,
    aws_server_fixture,
)
from tuner import ConfigError, load_sweep
from tuner._providers import _pool
from worker import BrokerAddress

SWEEP = {"trainable": "tests.trainables:slow", "metric": "score", "mode": "max",
         "space": {"x": {"uniform": [0.0, 1.0]}},
         "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9},
         "num_trials": 3, "budget": {"time": "10m"}, "provider": {"type": "pool", "name": "gpu-a"}}


def _workers(exp_dir: Path, trainable: str, bundle_fn=None, **provider):
    # (no connection is made: the client connects at its first command)
    sweep = load_sweep({**SWEEP, "provider": {**SWEEP["provider"], **provider}})
    return _pool(sweep, BrokerAddress.parse("redis://:pw@127.0.0.1:6379/0"),
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


def test_with_storage_the_bundle_and_checkpoints_live_in_object_storage(tmp_path, aws,
                                                                        monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    s3 = aws.client("s3")
    s3.create_bucket(Bucket="lab-store")

    def train(params, ctx):
        pass

    workers = _workers(tmp_path, "<train>", train, storage="s3://lab-store/runs")
    assert workers.checkpoint_root == "s3://lab-store/runs/exp/checkpoints"
    assert workers.trainable == "bundle:s3://lab-store/runs/exp/code/trainable.pkl"
    body = s3.get_object(Bucket="lab-store", Key="runs/exp/code/trainable.pkl")["Body"].read()
    assert body == (tmp_path / "code" / "trainable.pkl").read_bytes()   # (kept for resume)
    # A bucket this machine cannot write to is bad input, named before anything runs.
    with pytest.raises(ConfigError, match=r"provider\.storage.*s3://no-such-bucket/runs/exp"):
        _workers(tmp_path, "tests.trainables:slow", storage="s3://no-such-bucket/runs")
