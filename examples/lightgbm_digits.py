"""LightGBM on scikit-learn's digits: one boosting round per step, through
:class:`tuner.integrations.LightGBMCallback`; a promoted trial boosts on from its booster.

CPU, milliseconds a round. Sweep: ``examples/lightgbm_digits.yaml``.
"""

from __future__ import annotations

from typing import Any

import lightgbm as lgb

from examples.digits import data
from tuner.integrations import LightGBMCallback


def train(params: dict[str, Any], ctx: Any) -> None:
    x_train, x_val, y_train, y_val = data()
    train_set = lgb.Dataset(x_train, label=y_train)
    val_set = lgb.Dataset(x_val, label=y_val, reference=train_set)
    booster_params = {
        "objective": "multiclass", "num_class": 10, "metric": "multi_logloss",
        "learning_rate": float(params.get("learning_rate", 0.1)),
        "num_leaves": int(params.get("num_leaves", 15)),
        "min_data_in_leaf": int(params.get("min_data_in_leaf", 20)),
        "num_threads": 1, "seed": int(params.get("seed", 0)), "verbosity": -1,
    }
    callback = LightGBMCallback(ctx, monitor="val-multi_logloss")
    lgb.train(booster_params, train_set, num_boost_round=callback.num_boost_round,
              init_model=callback.init_model, valid_sets=[val_set], valid_names=["val"],
              callbacks=[callback])
