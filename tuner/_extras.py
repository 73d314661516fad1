"""Optional dependencies: what a sweep or a command needs beyond the core install, checked at
the edge so that a missing one is a clear exit-2 error naming the ``pip install`` that fixes
it, not an ImportError from deep inside a run.

The extras are ``aws`` (boto3), ``gcp`` (the Compute, Storage and Secret Manager clients) and
``dashboard`` (FastAPI, uvicorn, plotly); ``all`` is all three. The experiment trackers of a
sweep's ``loggers`` have one each: ``mlflow`` (mlflow-skinny), ``wandb``, ``tensorboard``
(tensorboardX, the writer); ``csv`` needs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.util import find_spec
from typing import Any

from tuner._errors import ConfigError

EXTRAS: dict[str, tuple[str, ...]] = {
    "aws": ("boto3",),
    "gcp": ("google.cloud.compute_v1", "google.cloud.storage", "google.cloud.secretmanager"),
    "dashboard": ("fastapi", "uvicorn", "plotly"),
    "mlflow": ("mlflow",),
    "wandb": ("wandb",),
    "tensorboard": ("tensorboardX",),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported."""
    out = []
    for module in EXTRAS[extra]:
        try:
            found = find_spec(module) is not None
        except ModuleNotFoundError:     # (a parent package is missing)
            found = False
        if not found:
            out.append(module)
    return out


def require(extra: str, field: str, what: str) -> None:
    """Raise :class:`ConfigError` on ``field`` when ``extra`` is not installed; ``what``
    names what needs it (``the aws provider``)."""
    gone = missing(extra)
    if gone:
        raise ConfigError(field, f"{what} needs {', '.join(gone)}, which is not installed: "
                                 f"pip install 'elastune[{extra}]'")


def require_for_sweep(provider_type: str) -> None:
    """What a sweep's provider needs: the ``aws`` or ``gcp`` extra."""
    if provider_type in ("aws", "gcp"):
        require(provider_type, "provider.type", f"the {provider_type} provider")


def require_for_loggers(loggers: Sequence[Any]) -> None:
    """What a sweep's ``loggers`` need: each tracker's extra (``csv`` needs none)."""
    for i, entry in enumerate(loggers):
        if entry.name in EXTRAS:
            require(entry.name, f"loggers[{i}]", f"the {entry.name} logger")
