"""Experiment trackers for a sweep's ``loggers``: MLflow, Weights & Biases, TensorBoard, CSV.

Each tracker gets one run per trial (its params, every reported metric by step, its final
state, GPU-seconds and dollars) and one run for the sweep (its budgets, spend and best trial),
through the controller's :class:`SweepCallback` hooks. Each lives in its own module, which
alone imports its library; names are imported on first use. See the trackers guide.
"""

from worker._exports import lazy

_HOMES = {
    "CSVLogger": "tuner.loggers._csv",
    "MLflowLogger": "tuner.loggers._mlflow",
    "SweepCallback": "tuner._hooks",
    "SweepInfo": "tuner._hooks",
    "SweepSummary": "tuner._hooks",
    "TensorBoardLogger": "tuner.loggers._tensorboard",
    "TrialInfo": "tuner._hooks",
    "WandbLogger": "tuner.loggers._wandb",
    "make_loggers": "tuner.loggers._make",
}

__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy(__name__, _HOMES)
