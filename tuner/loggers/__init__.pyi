# For type checkers: tuner/loggers/__init__.py imports these names lazily (worker._exports).
from tuner._hooks import SweepCallback as SweepCallback
from tuner._hooks import SweepInfo as SweepInfo
from tuner._hooks import SweepSummary as SweepSummary
from tuner._hooks import TrialInfo as TrialInfo
from tuner.loggers._csv import CSVLogger as CSVLogger
from tuner.loggers._make import make_loggers as make_loggers
from tuner.loggers._mlflow import MLflowLogger as MLflowLogger
from tuner.loggers._tensorboard import TensorBoardLogger as TensorBoardLogger
from tuner.loggers._wandb import WandbLogger as WandbLogger
