"""End to end: each framework integration (tuner.integrations) in a real sweep, tune() on
local workers. Synchronous halving over 3 trials runs the best one in three segments (steps
0-1, 1-3, 3-9): its model must come out of the last one as if it had trained 9 steps in one
go, never restarted at a promotion."""

from __future__ import annotations

import io
import json

import pytest

from tuner import tune
from tuner._store import Store
from worker import load_checkpoint

MAX = 9


def _run(tmp_path, trainable, metric, mode, space, workers=1):
    sweep = {
        "name": trainable.split(":")[0].rsplit(".", 1)[-1].replace("_", "-"),
        "trainable": trainable, "metric": metric, "mode": mode, "space": space,
        "scheduler": {"type": "sha", "min_resource": 1, "max_resource": MAX,
                      "reduction_factor": 3},
        "num_trials": 3, "seed": 0,
        "provider": {"type": "local", "workers": workers},
    }
    result = tune(sweep, time_budget="3m", cost_budget=1.0, experiment_dir=tmp_path / "exp")
    assert result.state == "finished", result.message
    store = Store(tmp_path / "exp", readonly=True)
    best = result.trials.set_index("trial_id").loc[result.best_trial_id]
    assert best["last_step"] == MAX
    segments = store.segments(result.best_trial_id)
    assert [(s["start_step"], s["stop_step"]) for s in segments] == [(0, 1), (1, 3), (3, MAX)]
    reports = store.reports(result.best_trial_id)
    assert [r["step"] for r in reports] == list(range(1, MAX + 1))
    step, state = load_checkpoint(result.experiment_dir / "checkpoints" / result.best_trial_id,
                                  MAX)
    assert step == MAX
    return result, [json.loads(r["metrics"])[metric] if isinstance(r["metrics"], str)
                    else r["metrics"][metric] for r in reports], state


def test_lightning_a_promoted_trial_continues_its_epochs_and_optimizer(tmp_path):
    pytest.importorskip("lightning")
    torch = pytest.importorskip("torch")
    from examples.lightning_digits import loaders

    _, values, state = _run(tmp_path, "examples.lightning_digits:train", "val_acc", "max",
                            {"lr": {"choice": [1e-4, 1e-3, 1e-2]}})
    ckpt = torch.load(io.BytesIO(state["lightning_checkpoint"]), weights_only=False)
    batches = len(loaders(64)[0])
    # Nine epochs' optimizer steps in the loops, the optimizer and the schedule: a restart
    # at a promotion would have counted only the last segment's six.
    assert ckpt["epoch"] == MAX - 1 and ckpt["global_step"] == MAX * batches
    adam = ckpt["optimizer_states"][0]["state"]
    assert {int(s["step"]) for s in adam.values()} == {MAX * batches}
    assert ckpt["lr_schedulers"][0]["last_epoch"] == MAX
    assert all(0.0 <= v <= 1.0 for v in values)


def test_transformers_a_promoted_trial_continues_its_trainer_state(tmp_path):
    pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from examples.transformers_tiny import data

    _, values, state = _run(tmp_path, "examples.transformers_tiny:train", "eval_accuracy",
                            "max", {"lr": {"choice": [1e-4, 1e-3, 3e-3]}})
    files = state["transformers_checkpoint"]
    trainer_state = json.loads(files["trainer_state.json"])
    steps_per_epoch = -(-len(data()[0]) // 32)
    assert trainer_state["global_step"] == MAX * steps_per_epoch
    assert trainer_state["epoch"] == MAX
    # The Trainer's own log, carried through the checkpoints, holds every epoch's evaluation
    # once, and they are what the sweep was told.
    evals = [e for e in trainer_state["log_history"] if "eval_accuracy" in e]
    assert [round(e["epoch"]) for e in evals] == list(range(1, MAX + 1))
    assert [e["eval_accuracy"] for e in evals] == pytest.approx(values)
    optimizer = torch.load(io.BytesIO(files["optimizer.pt"]), weights_only=False)
    assert {int(s["step"]) for s in optimizer["state"].values()} == {MAX * steps_per_epoch}


def _params(result):
    best = result.trials.set_index("trial_id").loc[result.best_trial_id]
    return {k.removeprefix("params."): v for k, v in best.items() if k.startswith("params.")}


def test_xgboost_a_promoted_trial_boosts_on_from_its_booster(tmp_path):
    xgb = pytest.importorskip("xgboost")
    from examples.digits import data

    result, values, state = _run(tmp_path, "examples.xgboost_digits:train", "val-mlogloss",
                                 "min", {"eta": {"choice": [0.05, 0.1, 0.3]}}, workers=2)
    booster = xgb.Booster(model_file=bytearray(state["xgboost_booster"]))
    assert booster.num_boosted_rounds() == MAX
    # Boosting in three segments gave the very rounds that one uninterrupted run gives.
    x_train, x_val, y_train, y_val = data()
    history: dict = {}
    xgb.train({"objective": "multi:softprob", "num_class": 10, "eval_metric": "mlogloss",
               "eta": _params(result)["eta"], "max_depth": 4, "subsample": 1.0, "nthread": 1,
               "seed": 0},
              xgb.DMatrix(x_train, label=y_train), num_boost_round=MAX,
              evals=[(xgb.DMatrix(x_val, label=y_val), "val")], evals_result=history,
              verbose_eval=False)
    assert values == pytest.approx(history["val"]["mlogloss"], rel=1e-6)


def test_lightgbm_a_promoted_trial_boosts_on_from_its_booster(tmp_path):
    lgb = pytest.importorskip("lightgbm")
    from examples.digits import data

    result, values, state = _run(tmp_path, "examples.lightgbm_digits:train",
                                 "val-multi_logloss", "min",
                                 {"learning_rate": {"choice": [0.05, 0.1, 0.3]}}, workers=2)
    booster = lgb.Booster(model_str=state["lightgbm_model"])
    assert booster.current_iteration() == MAX
    x_train, x_val, y_train, y_val = data()
    train_set = lgb.Dataset(x_train, label=y_train)
    history: dict = {}
    lgb.train({"objective": "multiclass", "num_class": 10, "metric": "multi_logloss",
               "learning_rate": _params(result)["learning_rate"], "num_leaves": 15,
               "min_data_in_leaf": 20, "num_threads": 1, "seed": 0, "verbosity": -1},
              train_set, num_boost_round=MAX,
              valid_sets=[lgb.Dataset(x_val, label=y_val, reference=train_set)],
              valid_names=["val"], callbacks=[lgb.record_evaluation(history)])
    assert values == pytest.approx(history["val"]["multi_logloss"], rel=1e-6)
