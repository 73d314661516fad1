"""The ``loggers`` key of a sweep: which experiment trackers receive its trials, and their
options.

A sweep lists trackers by name (``loggers: [mlflow, csv]``) or with options, one mapping of a
name to its options per entry (``loggers: [{mlflow: {tracking_uri: "sqlite:///m.db"}}]``).
Each tracker's options are one model here; :func:`parse_loggers` turns what a user wrote into
:class:`LoggerConfig` entries and names the entry of any mistake (``loggers[0].mlflow.tags``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tuner._errors import ConfigError

LOGGER_NAMES = ("mlflow", "wandb", "tensorboard", "csv")


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MLflowOptions(_Options):
    """One MLflow run per trial, nested under one run for the sweep."""

    # Where runs are kept: a database URI (sqlite:///mlflow.db) or a tracking server. Default:
    # the MLFLOW_TRACKING_URI environment variable, else mlflow/mlflow.db (SQLite) inside the
    # experiment directory.
    tracking_uri: str | None = Field(None, min_length=1, strict=True)
    # The MLflow experiment the runs go to (created if missing). Default: the sweep's name.
    experiment_name: str | None = Field(None, min_length=1, strict=True)
    # Tags set on every run of the sweep.
    tags: dict[str, str] | None = Field(None, strict=True)


class WandbOptions(_Options):
    """One W&B run per trial and one for the sweep, grouped by the experiment."""

    # The W&B project. Default: the sweep's name.
    project: str | None = Field(None, min_length=1, strict=True)
    entity: str | None = Field(None, min_length=1, strict=True)  # the W&B team or user
    # The run group. Default: the experiment's id.
    group: str | None = Field(None, min_length=1, strict=True)
    # The folder W&B writes its wandb/ folder into. Default: the experiment directory.
    dir: str | None = Field(None, min_length=1, strict=True)
    # offline: written to disk only (upload later with `wandb sync`); online: sent to W&B as
    # the sweep runs (needs a login and the network).
    mode: Literal["offline", "online"] = "offline"
    tags: list[str] | None = Field(None, strict=True)  # tags of every run of the sweep


class TensorBoardOptions(_Options):
    """TensorBoard event files: one folder per trial and one for the sweep."""

    # Where the event files go. Default: tensorboard/ inside the experiment directory.
    dir: str | None = Field(None, min_length=1, strict=True)


class CSVOptions(_Options):
    """A CSV file per trial (its metrics by step), one of every trial, one of the sweep."""

    # Where the files go. Default: csv/ inside the experiment directory.
    dir: str | None = Field(None, min_length=1, strict=True)


OPTIONS: dict[str, type[_Options]] = {
    "mlflow": MLflowOptions, "wandb": WandbOptions, "tensorboard": TensorBoardOptions,
    "csv": CSVOptions,
}


class LoggerConfig(BaseModel):
    """One tracker of a sweep: its name and its options."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: Literal["mlflow", "wandb", "tensorboard", "csv"]
    options: _Options

    def to_json(self) -> str | dict[str, Any]:
        """The sweep file's form: the name alone, or ``{name: {options given}}``."""
        given = self.options.model_dump(mode="json", exclude_defaults=True)
        return {self.name: given} if given else self.name


def _entry(value: Any, where: str) -> LoggerConfig:
    if isinstance(value, LoggerConfig):
        return value
    if isinstance(value, str):
        name, options = value, None
    elif isinstance(value, Mapping) and len(value) == 1:
        name, options = next(iter(value.items()))
    else:
        raise ConfigError(where, "expected a tracker's name or one mapping of a name to its "
                          f"options, e.g. {{mlflow: {{tracking_uri: sqlite:///mlflow.db}}}}; "
                          f"got {_given(value)}")
    if not isinstance(name, str) or name not in OPTIONS:
        close = difflib.get_close_matches(str(name), LOGGER_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(where, f"unknown logger {_given(name)}{hint}; allowed: "
                          f"{', '.join(LOGGER_NAMES)}")
    model = OPTIONS[name]
    options = {} if options is None else options
    if not isinstance(options, Mapping):
        raise ConfigError(f"{where}.{name}", f"expected a mapping of options (allowed: "
                          f"{', '.join(model.model_fields)}); got {_given(options)}")
    for key in options:
        if key not in model.model_fields:
            close = difflib.get_close_matches(str(key), list(model.model_fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}.{name}.{key}", f"unknown option{hint}; allowed: "
                              f"{', '.join(model.model_fields)}")
    try:
        parsed = model.model_validate(dict(options))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{where}.{name}.{loc}" if loc else f"{where}.{name}",
                          f"{first['msg']}; got {_given(first.get('input'))}") from None
    return LoggerConfig(name=name, options=parsed)


def parse_loggers(value: Any) -> list[LoggerConfig]:
    """The ``loggers`` of a sweep as entries; a tracker given twice is refused (its runs
    would be written twice)."""
    if value is None:
        return []
    if isinstance(value, str | Mapping):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ConfigError("loggers", f"expected a list such as [mlflow, csv]; got "
                          f"{_given(value)}")
    out: list[LoggerConfig] = []
    for i, item in enumerate(value):
        entry = _entry(item, f"loggers[{i}]")
        if any(e.name == entry.name for e in out):
            raise ConfigError(f"loggers[{i}]", f"{entry.name} is given twice")
        out.append(entry)
    return out


def _given(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
