"""XGBoost on scikit-learn's digits: one boosting round per step, through
:class:`tuner.integrations.XGBoostCallback`; a promoted trial boosts on from its booster.

CPU, milliseconds a round. Sweep: ``examples/xgboost_digits.yaml``.
"""

from __future__ import annotations

from typing import Any

import xgboost as xgb

from examples.digits import data
from tuner.integrations import XGBoostCallback


def train(params: dict[str, Any], ctx: Any) -> None:
    x_train, x_val, y_train, y_val = data()
    dtrain, dval = xgb.DMatrix(x_train, label=y_train), xgb.DMatrix(x_val, label=y_val)
    booster_params = {
        "objective": "multi:softprob", "num_class": 10, "eval_metric": "mlogloss",
        "eta": float(params.get("eta", 0.3)), "max_depth": int(params.get("max_depth", 4)),
        "subsample": float(params.get("subsample", 1.0)), "nthread": 1,
        "seed": int(params.get("seed", 0)),
    }
    callback = XGBoostCallback(ctx, monitor="val-mlogloss")
    xgb.train(booster_params, dtrain, num_boost_round=callback.num_boost_round,
              xgb_model=callback.xgb_model, evals=[(dval, "val")], callbacks=[callback],
              verbose_eval=False)
