"""From a sweep's ``loggers`` entries to the trackers the controller calls."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner._errors import ConfigError
from tuner._extras import require_for_loggers
from tuner._hooks import SweepCallback
from tuner._logger_config import LoggerConfig


def make_loggers(entries: Sequence[LoggerConfig], experiment_dir: Path | None
                 ) -> list[SweepCallback]:
    """One tracker per entry, writing inside ``experiment_dir`` unless its options say
    where; ConfigError naming the entry (``loggers[0]``) when its library is not installed
    or it has nowhere to write."""
    require_for_loggers(entries)
    out: list[SweepCallback] = []
    for i, entry in enumerate(entries):
        options: dict[str, Any] = entry.options.model_dump()
        try:
            out.append(_make(entry.name, options, experiment_dir))
        except ConfigError as exc:
            raise ConfigError(f"loggers[{i}]", exc.message) from None
    return out


def _make(name: str, options: dict[str, Any], experiment_dir: Path | None) -> SweepCallback:
    if name == "mlflow":
        from tuner.loggers._mlflow import MLflowLogger

        return MLflowLogger(**options, experiment_dir=experiment_dir)
    if name == "wandb":
        from tuner.loggers._wandb import WandbLogger

        return WandbLogger(**options, experiment_dir=experiment_dir)
    if name == "tensorboard":
        from tuner.loggers._tensorboard import TensorBoardLogger

        return TensorBoardLogger(**options, experiment_dir=experiment_dir)
    from tuner.loggers._csv import CSVLogger

    return CSVLogger(**options, experiment_dir=experiment_dir)
