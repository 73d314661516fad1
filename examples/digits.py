"""A scikit-learn MLP on the bundled digits data: one epoch per step, checkpoint and restore.

Runs on the CPU in milliseconds per epoch, so a whole successive-halving sweep fits in a
minute on a laptop. Used by the README's first command and by the tests and benchmarks.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

CLASSES = np.arange(10)


@lru_cache(maxsize=1)
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.3, random_state=0,
                                                      stratify=y)
    scaler = StandardScaler().fit(x_train)
    return scaler.transform(x_train), scaler.transform(x_val), y_train, y_val


def make_model(params: dict[str, Any]) -> MLPClassifier:
    return MLPClassifier(
        hidden_layer_sizes=(int(params.get("hidden", 64)),),
        learning_rate_init=float(params.get("lr", 1e-3)),
        alpha=float(params.get("alpha", 1e-4)),
        batch_size=int(params.get("batch_size", 64)),
        random_state=int(params.get("seed", 0)),
    )


def train(params: dict[str, Any], ctx: Any) -> None:
    """One epoch per step; the model is the checkpoint, so a promoted trial continues."""
    x_train, x_val, y_train, y_val = data()
    model = ctx.restore() or make_model(params)
    rng = np.random.default_rng(int(params.get("seed", 0)) + ctx.start_step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for step in ctx.steps():
            order = rng.permutation(len(x_train))
            model.partial_fit(x_train[order], y_train[order], classes=CLASSES)
            ctx.report(step, accuracy=float(model.score(x_val, y_val)))
    ctx.checkpoint(model)
