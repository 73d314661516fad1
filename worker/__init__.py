"""Celery workers that run trial segments, the context a trainable sees, and the records that
cross process boundaries (:mod:`worker.records`).

Each name is imported from its module on first use (see :mod:`worker._exports`), so the
packages that need only the records (``cloud``, the CLI reading a stored sweep) do not load
Celery.
"""

from worker._exports import lazy

_HOMES = {
    "KEY_TTL_S": "worker._task",
    "NOTICE_KEY": "worker._interruption",
    "REGISTRY_KEY": "worker._main",
    "RIDE_OUT_S": "worker._broker",
    "TASK_NAME": "worker._task",
    "BrokerAddress": "worker._broker",
    "BrokerURLError": "worker._broker",
    "EmbeddedRedis": "worker._embedded",
    "TrialContext": "worker._context",
    "forget_workers": "worker._cleanup",
    "load_checkpoint": "worker._checkpoints",
    "load_trainable": "worker._trainable",
    "make_app": "worker._app",
    "save_checkpoint": "worker._checkpoints",
    "write_bundle": "worker._trainable",
}

__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy(__name__, _HOMES)
