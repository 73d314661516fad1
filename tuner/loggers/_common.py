"""What the trackers share: the sweep's settings as flat params, and default folders."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner._errors import ConfigError
from tuner._hooks import SweepInfo

# The stored sweep's keys a sweep's run does not carry as params: the trackers themselves,
# the measured profile (long tables) and where imports resolve.
_NOT_PARAMS = ("loggers", "profile", "base_dir")


def sweep_params(sweep: SweepInfo) -> dict[str, Any]:
    """The stored sweep as flat ``section.key`` params (``scheduler.type``, ``space.lr``)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping) and not prefix.startswith("space."):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif value is not None:
            out[prefix] = value

    walk("", {k: v for k, v in sweep.config.items() if k not in _NOT_PARAMS})
    return out


def param_value(value: Any) -> str | int | float | bool:
    """A param as trackers keep one: a number, a bool or a string."""
    return value if isinstance(value, str | int | float | bool) else str(value)


def folder(given: str | None, sweep_dir: Path | None, default: str, where: str) -> Path:
    """The folder a tracker writes to: the one given, else ``default`` inside the experiment
    directory (ConfigError on ``where`` when there is none: a simulation in memory)."""
    if given is not None:
        return Path(given).expanduser()
    if sweep_dir is None:
        raise ConfigError(where, "a simulation kept in memory has no experiment directory to "
                          "write in: give the logger's dir (or simulate with store_path)")
    return Path(sweep_dir) / default
