"""Time and money at the edge: what a user writes ("1h30m", "$2.50") as seconds and dollars."""

from __future__ import annotations

import datetime as _dt
import math
import numbers
import re

from tuner._errors import ConfigError

_UNIT_SECONDS = {
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN = re.compile(rf"{_NUMBER}")
_PART = re.compile(rf"\s*({_NUMBER})\s*([a-z]+)\s*")
_DURATION_HELP = 'seconds as a number, or a string like "90s", "30m", "2h", "1h30m"'
_MONEY = re.compile(rf"\$?\s*({_NUMBER})\s*(?:usd)?")


def _positive_finite(seconds: float, value: object, field: str, help_: str) -> float:
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(field, f"must be > 0 and finite ({help_}); got {value!r}")
    return seconds


def parse_duration(value: object, field: str) -> float | None:
    """Seconds from a number or a duration string; ``None`` stays ``None`` (no deadline).

    Accepts ``int``/``float`` seconds, a ``datetime.timedelta``, a bare number as a string
    (``"45"``), or one or more ``<number><unit>`` parts with units s/m/h/d (``"1h30m"``,
    ``"1.5h"``, ``"90 s"``), each unit at most once. Zero, negative, NaN, infinite, booleans and
    anything else raise :class:`ConfigError` naming ``field``.

    Example:
        >>> parse_duration("1h30m", "budget.time")
        5400.0
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(field, f"expected a duration ({_DURATION_HELP}); got {value!r}")
    if isinstance(value, _dt.timedelta):
        return _positive_finite(value.total_seconds(), value, field, _DURATION_HELP)
    if isinstance(value, numbers.Real):
        try:
            seconds = float(value)
        except (OverflowError, ValueError, TypeError):
            seconds = math.inf
        return _positive_finite(seconds, value, field, _DURATION_HELP)
    if isinstance(value, str):
        text = value.strip().lower()
        if _PLAIN.fullmatch(text):
            return _positive_finite(float(text), value, field, _DURATION_HELP)
        seconds, seen, pos = 0.0, set(), 0
        for match in _PART.finditer(text):
            if match.start() != pos:
                break
            number, unit = match.groups()
            if unit not in _UNIT_SECONDS or _UNIT_SECONDS[unit] in seen:
                break
            seen.add(_UNIT_SECONDS[unit])
            seconds += float(number) * _UNIT_SECONDS[unit]
            pos = match.end()
        else:
            if text and pos == len(text):
                return _positive_finite(seconds, value, field, _DURATION_HELP)
    raise ConfigError(field, f"expected a duration ({_DURATION_HELP}); got {value!r}")


def parse_money(value: object, field: str) -> float | None:
    """US dollars from a number (or ``"2.5"``, ``"$2.50"``); ``None`` stays ``None`` (no cap).

    The amount must be finite and > 0: a cap of zero would forbid every launch, so it is far more
    likely a mistake than a wish.

    Example:
        >>> parse_money("$2.50", "budget.cost")
        2.5
    """
    help_ = 'US dollars as a number, e.g. 2.5 or "$2.50"'
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(field, f"expected an amount ({help_}); got {value!r}")
    if isinstance(value, numbers.Real):
        try:
            usd = float(value)
        except (OverflowError, ValueError, TypeError):
            usd = math.inf
        return _positive_finite(usd, value, field, help_)
    if isinstance(value, str):
        match = _MONEY.fullmatch(value.strip().lower())
        if match:
            return _positive_finite(float(match.group(1)), value, field, help_)
    raise ConfigError(field, f"expected an amount ({help_}); got {value!r}")
