"""Prices: which instance types there are, what they hold, and what an hour of each costs.

The planner compares instance types by dollars per GPU-hour and turns planned seconds into
dollars with :func:`cost`, the same per-second billing with a minimum that the ledger applies.

Hand-written because no maintained library ships an offline GPU price table we could depend on
from ``budgets`` (which imports only the stdlib, numpy, pandas and pyyaml): SkyPilot's catalog
needs SkyPilot and a download, and the cloud SDKs need credentials and a network. The shipped
``data/prices.csv`` holds list prices (see ``data/prices.README.md`` for source and date).

Example::

    >>> from budgets import PriceBook, cost
    >>> book = PriceBook()
    >>> t = book.get("aws", "g4dn.xlarge", "us-east-1")
    >>> round(cost(t, 30, spot=False), 6)     # half a minute is billed as the 60 s minimum
    0.008767
"""

from __future__ import annotations

import csv
import difflib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal, get_args

from budgets._ledger import DEFAULT_MINIMUM_S, billed

Provider = Literal["aws", "gcp", "local"]
PROVIDERS: tuple[str, ...] = get_args(Provider)
COLUMNS: tuple[str, ...] = (
    "provider", "name", "gpu", "gpus", "vcpus", "memory_gib", "region",
    "on_demand_per_hour", "spot_per_hour",
)


class PriceBookError(ValueError):
    """A price file is malformed; the message names the file, the line and the column."""


class NoSpotPriceError(LookupError):
    """Spot was asked for an instance type that has no spot price."""


@dataclass(frozen=True)
class InstanceType:
    """One rentable machine shape in one region, with its hourly prices in US dollars."""

    provider: Provider
    name: str
    gpu: str
    gpus: int
    vcpus: int
    memory_gib: float
    region: str
    on_demand_per_hour: float
    spot_per_hour: float | None = None

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError(f"invalid InstanceType {self.provider}/{self.name}: "
                             + "; ".join(problems))

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.provider, self.name, self.region)

    def hourly(self, spot: bool = False, *, fallback: bool = False) -> float:
        """Dollars per instance-hour.

        With ``spot=True`` and no spot price: the on-demand price if ``fallback`` (what the
        autoscaler pays when it falls back), else :class:`NoSpotPriceError`.
        """
        if not spot:
            return self.on_demand_per_hour
        if self.spot_per_hour is not None:
            return self.spot_per_hour
        if fallback:
            return self.on_demand_per_hour
        raise NoSpotPriceError(
            f"{self.provider}/{self.name} in {self.region} has no spot price; ask with "
            f"spot=False, or fallback=True to be given the on-demand price "
            f"({self.on_demand_per_hour} $/h)")


def _problems(t: InstanceType) -> list[str]:
    out = []
    if t.provider not in PROVIDERS:
        out.append(f"provider is {t.provider!r}, but must be one of {list(PROVIDERS)}")
    for name in ("name", "gpu", "region"):
        if not getattr(t, name):
            out.append(f"{name} is empty")
    for name in ("gpus", "vcpus"):
        v = getattr(t, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            out.append(f"{name} is {v!r}, but must be an integer >= 0")
    for name in ("memory_gib", "on_demand_per_hour", "spot_per_hour"):
        v = getattr(t, name)
        if v is None and name == "spot_per_hour":
            continue
        if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            out.append(f"{name} is {v!r}, but must be a number >= 0")
    return out


def per_gpu_hour(t: InstanceType, spot: bool = False, *, fallback: bool = False) -> float:
    """Dollars per GPU-hour of ``t``; an instance type without GPUs has no such price."""
    if t.gpus < 1:
        raise ValueError(f"{t.provider}/{t.name} has no GPUs, so no price per GPU-hour")
    return t.hourly(spot, fallback=fallback) / t.gpus


def cost(t: InstanceType, seconds: float, spot: bool = False,
         minimum_s: float = DEFAULT_MINIMUM_S, *, fallback: bool = False) -> float:
    """Dollars for one instance of ``t`` running ``seconds``: per second, at least ``minimum_s``."""
    return billed(t.hourly(spot, fallback=fallback), seconds, minimum_s)


# -- reading price files --------------------------------------------------------------------

def shipped_prices_path() -> Path:
    """The price file that ships inside the package."""
    return Path(str(resources.files("budgets").joinpath("data", "prices.csv")))


def read_prices(path: str | Path) -> list[InstanceType]:
    """Read and validate a price CSV (header :data:`COLUMNS`; ``spot_per_hour`` may be empty).

    Every problem is reported at once, each as ``<file> line <n>, column '<col>': ...``.
    Blank lines and lines starting with ``#`` are skipped.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceBookError(f"cannot read price file {path}: {exc}") from exc
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise PriceBookError(f"{path}: no header; expected columns {', '.join(COLUMNS)}")
    header_line, header_text = lines[0]
    header = [h.strip() for h in next(csv.reader([header_text]))]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise PriceBookError(
            f"{path} line {header_line} (header): missing column(s) "
            + ", ".join(repr(c) for c in missing) + f"; expected {', '.join(COLUMNS)}")
    index = {c: header.index(c) for c in COLUMNS}

    types: list[InstanceType] = []
    errors: list[str] = []
    seen: dict[tuple[str, str, str], int] = {}
    for line_no, line_text in lines[1:]:
        cells = next(csv.reader([line_text]))
        row = {c: (cells[i].strip() if i < len(cells) else "") for c, i in index.items()}
        t, problems = _parse_row(row)
        key = (row["provider"], row["name"], row["region"])
        if key in seen:
            problems.append(("name", f"{'/'.join(key)} already given on line {seen[key]}"))
        errors += [f"{path} line {line_no}, column {col!r}: {msg}" for col, msg in problems]
        if t is not None and not problems:
            seen[key] = line_no
            types.append(t)
    if errors:
        shown = errors[:20] + ([f"... and {len(errors) - 20} more"] if len(errors) > 20 else [])
        raise PriceBookError("invalid price file:\n  " + "\n  ".join(shown))
    return types


def _parse_row(row: dict[str, str]) -> tuple[InstanceType | None, list[tuple[str, str]]]:
    """One CSV row as an instance type, or the (column, problem) pairs that stop it."""
    problems: list[tuple[str, str]] = []
    if row["provider"] not in PROVIDERS:
        problems.append(("provider", f"{row['provider']!r} is not one of {list(PROVIDERS)}"))
    for col in ("name", "gpu", "region"):
        if not row[col]:
            problems.append((col, "is empty"))
    ints: dict[str, int] = {}
    for col in ("gpus", "vcpus"):
        try:
            ints[col] = int(row[col])
        except ValueError:
            problems.append((col, f"{row[col]!r} is not an integer"))
            continue
        if ints[col] < 0:
            problems.append((col, f"{ints[col]} is negative; must be >= 0"))
    nums: dict[str, float | None] = {"spot_per_hour": None}
    for col in ("memory_gib", "on_demand_per_hour", "spot_per_hour"):
        if col == "spot_per_hour" and row[col] == "":
            continue  # no spot market for this type
        try:
            nums[col] = v = float(row[col])
        except ValueError:
            problems.append((col, f"{row[col]!r} is not a number"))
            continue
        if not math.isfinite(v) or v < 0:
            what = "price" if col.endswith("per_hour") else "value"
            problems.append((col, f"{what} {row[col]} must be a finite number >= 0"))
    if problems:
        return None, problems
    return InstanceType(
        provider=row["provider"],  # type: ignore[arg-type]  # checked above
        name=row["name"], gpu=row["gpu"], gpus=ints["gpus"], vcpus=ints["vcpus"],
        memory_gib=nums["memory_gib"],  # type: ignore[arg-type]  # set: no problems
        region=row["region"],
        on_demand_per_hour=nums["on_demand_per_hour"],  # type: ignore[arg-type]
        spot_per_hour=nums["spot_per_hour"],
    ), problems


# -- the book ---------------------------------------------------------------------------------

class PriceBook:
    """Instance types and prices: the shipped list, overlaid by an optional user CSV.

    Args:
        path: a CSV with the shipped file's header. Its rows replace shipped rows with the
            same (provider, name, region) and add the rest.
        shipped: start from the shipped ``data/prices.csv`` (default); ``False`` reads only
            ``path``.
    """

    def __init__(self, path: str | Path | None = None, *, shipped: bool = True) -> None:
        if path is None and not shipped:
            raise ValueError("PriceBook needs shipped=True or a path to a price CSV")
        types: list[InstanceType] = []
        if shipped:
            types += read_prices(shipped_prices_path())
        if path is not None:
            types += read_prices(path)
        self._types = _index(types)

    @classmethod
    def from_types(cls, types: Iterable[InstanceType]) -> PriceBook:
        """A book over the given types (later ones replace earlier ones with the same key)."""
        book = cls.__new__(cls)
        book._types = _index(types)
        return book

    def __len__(self) -> int:
        return len(self._types)

    def __iter__(self) -> Iterator[InstanceType]:
        return iter(self._types.values())

    def types(self, provider: str | None = None, region: str | None = None,
              min_gpus: int = 0) -> list[InstanceType]:
        """Instance types matching every given filter, in file order."""
        return [t for t in self._types.values()
                if (provider is None or t.provider == provider)
                and (region is None or t.region == region)
                and t.gpus >= min_gpus]

    def get(self, provider: str, name: str, region: str) -> InstanceType:
        """The instance type with this key; ``KeyError`` says what is known instead."""
        t = self._types.get((provider, name, region))
        if t is not None:
            return t
        regions = sorted(r for p, n, r in self._types if p == provider and n == name)
        if regions:
            hint = f"it is priced in {', '.join(regions)}"
        else:
            names = sorted({n for p, n, _ in self._types if p == provider})
            close = difflib.get_close_matches(name, names, n=3)
            hint = (f"did you mean {', '.join(close)}?" if close
                    else f"known {provider} types: {', '.join(names) or 'none'}")
        raise KeyError(f"no price for {provider}/{name} in {region}; {hint}")

    def price(self, provider: str, name: str, region: str, spot: bool = False, *,
              fallback: bool = False) -> float:
        """Dollars per instance-hour (see :meth:`InstanceType.hourly` for spot without a price)."""
        return self.get(provider, name, region).hourly(spot, fallback=fallback)

    def per_gpu_hour(self, t: InstanceType, spot: bool = False, *,
                     fallback: bool = False) -> float:
        """Dollars per GPU-hour of ``t``."""
        return per_gpu_hour(t, spot, fallback=fallback)

    def cheapest_per_gpu(self, provider: str | None = None, region: str | None = None,
                         spot: bool = False, *, min_gpus: int = 1) -> InstanceType:
        """The type with the lowest price per GPU-hour among those with >= ``min_gpus`` GPUs.

        With ``spot=True`` only types with a spot price compete. Ties go to the type with fewer
        GPUs (a smaller unit to rent), then to the name.
        """
        pool = [t for t in self.types(provider, region, max(min_gpus, 1))
                if not spot or t.spot_per_hour is not None]
        if not pool:
            raise LookupError(
                f"no instance type with >= {max(min_gpus, 1)} GPU(s)"
                f"{' and a spot price' if spot else ''} for provider={provider!r}, "
                f"region={region!r}")
        return min(pool, key=lambda t: (per_gpu_hour(t, spot), t.gpus, t.name))


def _index(types: Iterable[InstanceType]) -> dict[tuple[str, str, str], InstanceType]:
    out: dict[tuple[str, str, str], InstanceType] = {}
    for t in types:
        out[t.key] = t
    return out

