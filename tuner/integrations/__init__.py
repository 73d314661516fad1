"""Callbacks that run a training framework's loop as a trial's segment: each reports the
monitored metric at every step, checkpoints and restores through the trial's context, and
stops at the segment's last step. Guide: docs/guides/frameworks.md.

Each name is imported from its module on first use, and each module imports its framework
only then, so ``import tuner.integrations`` needs none of them installed.
"""

from worker._exports import lazy

_HOMES = {
    "LightGBMCallback": "tuner.integrations.lightgbm",
    "LightningCallback": "tuner.integrations.lightning",
    "TransformersCallback": "tuner.integrations.transformers",
    "XGBoostCallback": "tuner.integrations.xgboost",
}

__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy(__name__, _HOMES)
