"""The search space: helpers that build Optuna distributions, and the parser for YAML/dict spaces.

Dimensions are plain Optuna distributions so that every Optuna sampler works on them unchanged;
only ``grid`` needs a marker of its own (:class:`Grid`), because Optuna expresses a grid as an
argument of ``GridSampler`` rather than as a distribution.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from tuner._errors import ConfigError

D = TypeVar("D", bound=BaseDistribution)

Scalar: TypeAlias = None | bool | int | float | str

KINDS = ("uniform", "loguniform", "randint", "choice", "grid", "int", "float")
_RANGE_KEYS = {"low", "high"}
_STEP_KEYS = {"low", "high", "log", "step"}


@dataclass(frozen=True)
class Grid:
    """A grid dimension: every value is tried, in combination with every other grid dimension.

    A space with grid dimensions is searched by ``optuna.samplers.GridSampler``; it may hold fixed
    values besides, but no sampled (random/TPE) dimension.
    """

    values: tuple[Scalar, ...]

    def __len__(self) -> int:
        return len(self.values)


Dimension: TypeAlias = BaseDistribution | Grid | Scalar


class _Where:
    """Where an error is reported: a helper's argument, or one entry of a space."""

    def __init__(self, kind: str, name: str | None = None) -> None:
        self.kind, self.name = kind, name

    def error(self, arg: str, message: str) -> ConfigError:
        if self.name is None:
            return ConfigError(f"{self.kind}.{arg}" if arg else self.kind, message)
        what = f"{self.kind} {arg}" if arg else self.kind
        return ConfigError(f"space.{self.name}", f"{what} {message}")


def _float(value: object, where: _Where, arg: str) -> float:
    # PyYAML reads 1e-4 (no dot) as a string, so numeric strings are accepted for float bounds.
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except (OverflowError, ValueError, TypeError):
            number = math.nan
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = math.nan
    else:
        number = math.nan
    if not math.isfinite(number):
        raise where.error(arg, f"must be a finite number; got {value!r}")
    return number


def _int(value: object, where: _Where, arg: str) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    raise where.error(arg, f"must be an integer; got {value!r}")


def _bool(value: object, where: _Where, arg: str) -> bool:
    if isinstance(value, bool):
        return value
    raise where.error(arg, f"must be true or false; got {value!r}")


def _make(factory: Callable[..., D], where: _Where, **kwargs: Any) -> D:
    # The checks above cover what users get wrong; this catches whatever Optuna still refuses.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # Optuna's "high adjusted to step" note
            return factory(**kwargs)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise where.error("", f"is not a valid distribution ({exc}); got {kwargs}") from exc


def _float_dist(
    low: object, high: object, where: _Where, log: object = False, step: object = None
) -> FloatDistribution:
    lo, hi = _float(low, where, "low"), _float(high, where, "high")
    is_log = _bool(log, where, "log")
    st = None if step is None else _float(step, where, "step")
    if hi < lo:
        raise where.error("high", f"must be >= low ({lo!r}); got {hi!r}")
    if is_log and lo <= 0:
        raise where.error("low", f"must be > 0 on a log scale; got {lo!r}")
    if st is not None:
        if is_log:
            raise where.error("step", "cannot be combined with log: true")
        if st <= 0:
            raise where.error("step", f"must be > 0; got {st!r}")
    dist = _make(FloatDistribution, where, low=lo, high=hi, log=is_log, step=st)
    if st is not None and dist.high != hi:
        # Optuna moved high down onto the step grid, in decimal arithmetic on the shortest
        # repr of each float; the float it returns may be off the grid by a rounding error,
        # and then moves down a step each time it is adjusted again (a saved sweep would load
        # with another space). Adjust until it stays put: the sweep runs the space it saves.
        for _ in range(64):
            again = _make(FloatDistribution, where, low=lo, high=dist.high, log=False, step=st)
            if again.high == dist.high:
                break
            dist = again
    return dist


def _int_dist(
    low: object, high: object, where: _Where, log: object = False, step: object = 1
) -> IntDistribution:
    lo, hi = _int(low, where, "low"), _int(high, where, "high")
    is_log = _bool(log, where, "log")
    st = _int(step, where, "step")
    if hi < lo:
        raise where.error("high", f"must be >= low ({lo!r}); got {hi!r}")
    if is_log and lo < 1:
        raise where.error("low", f"must be >= 1 on a log scale; got {lo!r}")
    if st < 1:
        raise where.error("step", f"must be >= 1; got {st!r}")
    if is_log and st != 1:
        raise where.error("step", "cannot be combined with log: true")
    return _make(IntDistribution, where, low=lo, high=hi, log=is_log, step=st)


def _scalars(values: object, where: _Where) -> tuple[Scalar, ...]:
    tolist = getattr(values, "tolist", None)
    if callable(tolist):  # a numpy array
        values = tolist()
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Sequence):
        raise where.error("values", f"must be a non-empty list; got {values!r}")
    if len(values) == 0:
        raise where.error("values", "must be a non-empty list; got []")
    out: list[Scalar] = []
    for value in values:
        if value is None or isinstance(value, bool | str):
            out.append(value)
        elif isinstance(value, numbers.Integral):
            out.append(int(value))
        elif isinstance(value, numbers.Real) and math.isfinite(float(value)):
            out.append(float(value))
        else:
            raise where.error(
                "values",
                "must hold only null, booleans, integers, finite floats and strings "
                f"(they are stored as JSON); got {value!r}",
            )
    for i, value in enumerate(out):
        if any(type(value) is type(other) and value == other for other in out[:i]):
            raise where.error("values", f"holds {value!r} twice")
    return tuple(out)


def uniform(low: float, high: float) -> FloatDistribution:
    """A float drawn uniformly from ``[low, high]``.

    Example:
        >>> uniform(0.0, 0.5)
        FloatDistribution(high=0.5, log=False, low=0.0, step=None)
    """
    return _float_dist(low, high, _Where("uniform"))


def loguniform(low: float, high: float) -> FloatDistribution:
    """A float drawn uniformly on a log scale from ``[low, high]``; ``low`` must be > 0.

    Example:
        >>> loguniform(1e-4, 1e-1)
        FloatDistribution(high=0.1, log=True, low=0.0001, step=None)
    """
    return _float_dist(low, high, _Where("loguniform"), log=True)


def randint(low: int, high: int) -> IntDistribution:
    """An integer drawn uniformly from ``low`` to ``high``, both included.

    Example:
        >>> randint(1, 4)
        IntDistribution(high=4, log=False, low=1, step=1)
    """
    return _int_dist(low, high, _Where("randint"))


def choice(values: Sequence[Scalar]) -> CategoricalDistribution:
    """One of ``values`` (null, booleans, integers, floats or strings).

    Example:
        >>> choice([32, 64, 128])
        CategoricalDistribution(choices=(32, 64, 128))
    """
    return CategoricalDistribution(_scalars(values, _Where("choice")))


def grid(values: Sequence[Scalar]) -> Grid:
    """A grid dimension: every one of ``values`` is tried (with ``optuna.samplers.GridSampler``).

    Example:
        >>> grid([1, 2, 3])
        Grid(values=(1, 2, 3))
    """
    return Grid(_scalars(values, _Where("grid")))


def _bounds(kind: str, arg: object, where: _Where, keys: set[str]) -> dict[str, Any]:
    if isinstance(arg, Mapping):
        unknown = [k for k in arg if k not in keys]
        if unknown:
            raise where.error(
                "", f"has unknown key {unknown[0]!r}; allowed: {', '.join(sorted(keys))}"
            )
        missing = [k for k in ("low", "high") if k not in arg]
        if missing:
            raise where.error(missing[0], "is missing")
        return dict(arg)
    if isinstance(arg, Sequence) and not isinstance(arg, str | bytes) and len(arg) == 2:
        return {"low": arg[0], "high": arg[1]}
    raise where.error("", f"must be [low, high] or {{low: .., high: ..}}; got {arg!r}")


def _from_optuna(name: str, value: BaseDistribution) -> BaseDistribution:
    """An Optuna distribution given in the space, checked and rebuilt the way its YAML form is
    (the deprecated ``UniformDistribution`` family included): the sweep runs with the space it
    stores, and a resumed sweep reads the same space back."""
    if isinstance(value, CategoricalDistribution):
        # (params travel as JSON; numpy choices become plain numbers)
        return CategoricalDistribution(_scalars(value.choices, _Where("choice", name)))
    if isinstance(value, FloatDistribution):
        return _float_dist(value.low, value.high, _Where("float", name), value.log, value.step)
    if isinstance(value, IntDistribution):
        return _int_dist(value.low, value.high, _Where("int", name), value.log, value.step)
    raise ConfigError(
        f"space.{name}",
        f"{type(value).__name__} is not a distribution elastune can store; use "
        "optuna.distributions.FloatDistribution, IntDistribution or CategoricalDistribution",
    )


def _parse_entry(name: str, value: object) -> Dimension:
    if isinstance(value, BaseDistribution):
        return _from_optuna(name, value)
    if isinstance(value, Grid):
        return Grid(_scalars(value.values, _Where("grid", name)))
    if isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise ConfigError(f"space.{name}", f"a fixed value must be finite; got {value!r}")
        return float(value)
    if isinstance(value, Mapping):
        if len(value) != 1:
            raise ConfigError(
                f"space.{name}",
                "a distribution is a mapping with exactly one key, e.g. {loguniform: [1e-4, 0.1]}; "
                f"got {dict(value)!r}",
            )
        ((kind, arg),) = value.items()
        if kind not in KINDS:
            raise ConfigError(
                f"space.{name}",
                f"unknown distribution {kind!r}; allowed: {', '.join(KINDS)}",
            )
        where = _Where(kind, name)
        if kind in ("choice", "grid"):
            values = _scalars(arg, where)
            return CategoricalDistribution(values) if kind == "choice" else Grid(values)
        keys = _STEP_KEYS if kind in ("int", "float") else _RANGE_KEYS
        b = _bounds(kind, arg, where, keys)
        if kind == "uniform":
            return _float_dist(b["low"], b["high"], where)
        if kind == "loguniform":
            return _float_dist(b["low"], b["high"], where, log=True)
        if kind == "randint":
            return _int_dist(b["low"], b["high"], where)
        if kind == "int":
            return _int_dist(b["low"], b["high"], where, b.get("log", False), b.get("step", 1))
        return _float_dist(b["low"], b["high"], where, b.get("log", False), b.get("step"))
    if isinstance(value, Sequence):
        raise ConfigError(
            f"space.{name}",
            "a list is not a distribution; write {choice: [...]} or {grid: [...]}; "
            f"got {value!r}",
        )
    raise ConfigError(
        f"space.{name}",
        "expected a distribution (e.g. {uniform: [0, 1]}, loguniform(1e-4, 0.1)) or a fixed "
        f"number, string or boolean; got {value!r}",
    )


def parse_space(space: object) -> dict[str, Dimension]:
    """Parse a search space into ``{name: distribution | Grid | fixed value}``.

    Each entry is an Optuna ``BaseDistribution``, a :class:`Grid`, a YAML form
    (``{loguniform: [1e-4, 1e-1]}``, ``{uniform: [a, b]}``, ``{randint: [a, b]}``,
    ``{int: [a, b]}`` or ``{int: {low, high, log, step}}``, ``{float: ...}`` likewise,
    ``{choice: [...]}``, ``{grid: [...]}``), or a fixed int/float/str/bool kept as-is.
    Grid dimensions cannot be mixed with sampled ones. Errors are :class:`ConfigError` with
    field ``space.<name>`` (or ``space`` for the mapping itself).

    Example:
        >>> parse_space({"lr": {"loguniform": [1e-4, 0.1]}, "epochs": 10})
        {'lr': FloatDistribution(high=0.1, log=True, low=0.0001, step=None), 'epochs': 10}
    """
    if not isinstance(space, Mapping):
        raise ConfigError(
            "space", f"expected a mapping of parameter names to distributions; got {space!r}"
        )
    if not space:
        raise ConfigError("space", "is empty; give at least one parameter")
    parsed: dict[str, Dimension] = {}
    for name, value in space.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"space.{name!r}", f"parameter names must be non-empty strings; got {name!r}"
            )
        parsed[name] = _parse_entry(name, value)
    grids = [n for n, d in parsed.items() if isinstance(d, Grid)]
    sampled = [n for n, d in parsed.items() if isinstance(d, BaseDistribution)]
    if grids and sampled:
        raise ConfigError(
            f"space.{sampled[0]}",
            f"cannot mix grid dimensions ({', '.join(grids)}) with sampled dimensions "
            f"({', '.join(sampled)}); make every varying dimension a grid, or none",
        )
    return parsed


def is_fixed(dimension: Dimension) -> bool:
    """True for a fixed value (neither a distribution nor a grid)."""
    return not isinstance(dimension, BaseDistribution | Grid)


def to_yaml_form(dimension: Dimension) -> Any:
    """The JSON/YAML form of a parsed dimension; :func:`parse_space` reads it back unchanged."""
    if isinstance(dimension, Grid):
        return {"grid": list(dimension.values)}
    if isinstance(dimension, CategoricalDistribution):
        return {"choice": list(dimension.choices)}
    if isinstance(dimension, IntDistribution):
        if not dimension.log and dimension.step == 1:
            return {"randint": [dimension.low, dimension.high]}
        return {"int": {"low": dimension.low, "high": dimension.high,
                        "log": dimension.log, "step": dimension.step}}  # fmt: skip
    if isinstance(dimension, FloatDistribution):
        if dimension.step is None:
            kind = "loguniform" if dimension.log else "uniform"
            return {kind: [dimension.low, dimension.high]}
        return {"float": {"low": dimension.low, "high": dimension.high,
                          "log": dimension.log, "step": dimension.step}}  # fmt: skip
    if isinstance(dimension, BaseDistribution):
        raise ConfigError(
            "space", f"cannot store distribution {dimension!r}; use float, int or choice ones"
        )
    return dimension
