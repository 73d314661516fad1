"""Celery workers that run trial segments, and the context a trainable sees."""

from worker._app import make_app
from worker._broker import RIDE_OUT_S, BrokerAddress, BrokerURLError
from worker._checkpoints import load_checkpoint, save_checkpoint
from worker._cleanup import forget_workers
from worker._context import TrialContext
from worker._embedded import EmbeddedRedis
from worker._interruption import NOTICE_KEY
from worker._main import REGISTRY_KEY
from worker._main import main as worker_main
from worker._task import KEY_TTL_S, TASK_NAME
from worker._trainable import load_trainable, write_bundle

__all__ = [
    "KEY_TTL_S",
    "NOTICE_KEY",
    "RIDE_OUT_S",
    "REGISTRY_KEY",
    "TASK_NAME",
    "BrokerAddress",
    "BrokerURLError",
    "EmbeddedRedis",
    "TrialContext",
    "forget_workers",
    "load_checkpoint",
    "load_trainable",
    "make_app",
    "save_checkpoint",
    "worker_main",
    "write_bundle",
]
