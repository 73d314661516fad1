"""The sweep configuration: one validated model, read from sweep.yaml, a dict or ``tune`` keywords.

Everything a user writes is checked here, once, and every mistake becomes a :class:`ConfigError`
that names the field, what was given and what is allowed; code past this point trusts the config.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler, GridSampler
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from budgets import DEFAULT_MINIMUM_S
from tuner._duration import parse_duration, parse_money
from tuner._errors import ConfigError
from tuner._logger_config import LoggerConfig, parse_loggers
from tuner._space import Dimension, Grid, is_fixed, parse_space, to_yaml_form
from tuner.schedulers._rungs import rung_steps

SAMPLERS = ("tpe", "random", "grid", "bohb")
# More trials than any sweep runs; the planner's search grows with it, so it is bounded here.
MAX_TRIALS = 1_000_000
# Values a sweep file may expand to (a YAML alias repeats its anchor's whole node).
MAX_YAML_VALUES = 1_000_000
# Steps of one trial (each one reported), and seconds of one step, setup or boot in a profile:
# beyond these the planner's arithmetic loses whole seconds, and no sweep gets near them.
MAX_STEPS = 10**9
MAX_PROFILE_S = 365 * 86400.0
# Workers: a local one is a process on this machine; cloud ones are VMs the planner sizes (its
# search grows with the cap). Far above what a sweep uses, low enough to fail fast.
MAX_LOCAL_WORKERS = 1024
MAX_WORKERS = 100_000
_TRAINABLE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
# The keys a user writes at the top of a sweep; ``time_budget``/``cost_budget`` are the keyword
# spellings of ``tune``, ``time_budget_s``/``cost_budget_usd``/``base_dir`` what the model stores.
TOP_LEVEL_KEYS = (
    "name", "trainable", "metric", "mode", "space", "scheduler", "num_trials", "sampler",
    "provider", "budget", "seed", "gpus_per_trial", "max_failures", "segment_timeout", "profile",
    "loggers",
)  # fmt: skip
_ALSO_ACCEPTED = ("time_budget", "cost_budget", "time_budget_s", "cost_budget_usd", "base_dir",
                  "segment_timeout_s")


def _check_keys(data: Mapping, allowed: Iterable[str], prefix: str, shown: Iterable[str]) -> None:
    allowed, shown = set(allowed), list(shown)
    for key in data:
        if isinstance(key, str) and key in allowed:
            continue
        if not isinstance(key, str):
            message = f"keys must be strings; got {key!r}"
        else:
            close = difflib.get_close_matches(key, shown, n=1)
            message = "unknown key" + (f" (did you mean {close[0]!r}?)" if close else "")
        raise ConfigError(f"{prefix}{key}", f"{message}; allowed: {', '.join(shown)}")


def _string_keys(data: Any, prefix: str, shown: Iterable[str]) -> None:
    """Refuse keys that are not strings (YAML allows ``1:`` or ``null:``) before pydantic hands
    a model's input to its ``__init__`` as keyword arguments, where they raise TypeError."""
    if isinstance(data, Mapping):
        _check_keys({k: None for k in data if not isinstance(k, str)}, (), prefix, shown)


def _given(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(error: Mapping[str, Any]) -> str:
    kind, ctx, got = error["type"], error.get("ctx") or {}, _given(error.get("input"))
    if kind == "missing":
        return "is required"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}; got {got}"
    bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than": "<",
              "less_than_equal": "<="}  # fmt: skip
    if kind in bounds:
        limit = next(iter(ctx.values()), "?")
        return f"must be {bounds[kind]} {limit}; got {got}"
    msg = str(error["msg"])
    return f"{msg[:1].lower()}{msg[1:]}; got {got}"


def _config_error(exc: ValidationError, prefix: str = "") -> ConfigError:
    """One ConfigError from all of pydantic's errors: the first names the field, all are listed."""
    items: list[tuple[str, str]] = []
    for error in exc.errors():
        inner = (error.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigError):  # raised by our validators: already has its full field
            items.extend(inner.errors)
            continue
        loc = ([prefix] if prefix else []) + [str(part) for part in error["loc"]]
        items.append((".".join(loc) or prefix or "config", _describe(error)))
    field, message = items[0]
    if len(items) > 1:
        message += "; also " + "; ".join(f"{f}: {m}" for f, m in items[1:])
    return ConfigError(field, message, items)


class _Model(BaseModel):
    """Unknown keys and invalid values raise ConfigError, also when a model is built directly."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    _key: ClassVar[str] = ""  # where this section sits in a sweep, for error fields
    _shown_keys: ClassVar[tuple[str, ...]] = ()  # the keys an error lists (default: the fields)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _config_error(exc, type(self)._key) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Any:
        _string_keys(obj, f"{cls._key}." if cls._key else "", cls._shown_keys or cls.model_fields)
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _config_error(exc, cls._key) from None


class _Section(_Model):
    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            _check_keys(data, cls.model_fields, f"{cls._key}.", cls.model_fields)
        return data


class SchedulerConfig(_Section):
    """Successive halving over integer steps: ASHA (async), SHA (sync) or Hyperband brackets.

    ``min_resource``/``max_resource`` are steps of the trainable (``ctx.steps()``); rungs sit at
    ``min_resource * reduction_factor**k`` (Li et al., "A System for Massively Parallel
    Hyperparameter Tuning", MLSys 2020).
    """

    _key: ClassVar[str] = "scheduler"

    type: Literal["asha", "sha", "hyperband"] = "asha"
    min_resource: int = Field(1, ge=1, le=MAX_STEPS, strict=True)
    max_resource: int = Field(ge=1, le=MAX_STEPS, strict=True)
    reduction_factor: int = Field(3, ge=2, strict=True)
    # Synchronous halving's first cut alone (``sha``): the best 1/first_reduction of the first
    # rung go on, 1/reduction_factor at every rung after. None: reduction_factor. A sweep
    # whose shape the planner chooses (num_trials and min_resource left out) gets 2.
    first_reduction: int | None = Field(None, ge=2, strict=True)
    # ``hypersched``: near the deadline stop starting trials and give free GPUs to the best
    # ones (HyperSched); for a fixed cluster with a time budget. None: off.
    deadline_policy: Literal["hypersched"] | None = None
    # Synchronous halving (``sha``): a trial certain to be promoted goes on before its stage
    # is decided (the same trials are promoted; the next stage starts while the stage waits
    # for its stragglers). Needs num_trials: a sweep whose shape the planner chooses may cut
    # a stage under way.
    early_promotion: bool = Field(False, strict=True)
    # Asynchronous halving (``asha``) only: PASHA, whose top rung starts at the second rung
    # and grows only while the rankings of its two highest rungs disagree; max_resource is
    # the ceiling the planner plans for.
    pasha: bool = Field(False, strict=True)
    # Asynchronous halving (``asha``) only: new trials enter at one of the first ``brackets``
    # rungs in Hyperband's proportions (asynchronous Hyperband); 1: every trial at the first.
    brackets: int = Field(1, ge=1, strict=True)

    @field_validator("brackets")
    @classmethod
    def _brackets_for_asha(cls, value: int, info: Any) -> int:
        kind = info.data.get("type")
        if value != 1 and kind != "asha":
            raise ConfigError("scheduler.brackets",
                              f"is {value}, but only asynchronous halving (type: asha) enters "
                              f"trials at several rungs, not {kind!r}")
        if value != 1 and info.data.get("pasha"):
            raise ConfigError("scheduler.brackets",
                              f"is {value}, but PASHA (pasha: true) grows its top rung from "
                              "the first rungs: use one or the other")
        low, high, eta = (info.data.get(k) for k in ("min_resource", "max_resource",
                                                      "reduction_factor"))
        if all(isinstance(v, int) for v in (low, high, eta)) and high >= low:
            rungs = len(rung_steps(low, high, eta))
            if value > rungs:
                raise ConfigError("scheduler.brackets",
                                  f"is {value}, but the rungs from min_resource {low} to "
                                  f"max_resource {high} are {rungs}: at most {rungs}")
        return value

    @field_validator("pasha")
    @classmethod
    def _pasha_for_asha(cls, value: bool, info: Any) -> bool:
        kind = info.data.get("type")
        if value and kind != "asha":
            raise ConfigError("scheduler.pasha",
                              f"is true, but only asynchronous halving (type: asha) grows its "
                              f"top rung progressively, not {kind!r}")
        return value

    @field_validator("first_reduction")
    @classmethod
    def _first_cut_for_sha(cls, value: int | None, info: Any) -> int | None:
        kind = info.data.get("type")
        if value is not None and kind != "sha":
            raise ConfigError("scheduler.first_reduction",
                              f"is {value}, but only a synchronous halving (type: sha) has a "
                              f"first cut of its own, not {kind!r}")
        return value

    @field_validator("early_promotion")
    @classmethod
    def _early_for_sha(cls, value: bool, info: Any) -> bool:
        kind = info.data.get("type")
        if value and kind != "sha":
            raise ConfigError("scheduler.early_promotion",
                              f"is true, but only a synchronous halving (type: sha) decides "
                              f"its stages at once, not {kind!r}")
        return value

    @field_validator("max_resource")
    @classmethod
    def _max_at_least_min(cls, value: int, info: Any) -> int:
        low = info.data.get("min_resource")
        if low is not None and value < low:
            raise ConfigError(
                "scheduler.max_resource",
                f"is {value}, but must be max_resource >= min_resource ({low})",
            )
        return value


class ProviderConfig(_Section):
    """Where workers run: local processes, AWS/GCP VMs (the cloud keys are for those), or the
    workers of a shared pool (``elastune worker --pool NAME``)."""

    _key: ClassVar[str] = "provider"

    type: Literal["local", "aws", "gcp", "pool"] = "local"
    workers: int = Field(2, ge=1, le=MAX_WORKERS, strict=True)
    slots: int = Field(1, ge=1, strict=True)  # GPUs (trial slots) per worker
    price_per_hour: float = Field(1.0, ge=0, strict=True, allow_inf_nan=False)
    # Each instance is billed at least this long (per-second billing after it).
    billing_minimum_s: float = Field(DEFAULT_MINIMUM_S, ge=0, strict=True, allow_inf_nan=False)
    region: str | None = Field(None, min_length=1, strict=True)
    zone: str | None = Field(None, min_length=1, strict=True)
    project: str | None = Field(None, min_length=1, strict=True)
    instance_types: list[str] | None = Field(None, min_length=1, strict=True)
    machine_types: list[str] | None = Field(None, min_length=1, strict=True)
    # false: on-demand; true: every instance on spot; "deadline-safe": spot until the slack
    # before the time budget could not absorb one more preemption, then on-demand;
    # "exploratory": the same, and the last rung's survivors on on-demand; "tuning-aware":
    # the safety net asked again at each rung boundary, zones walked by price and recent
    # preemptions; "uniform-progress": Can't Be Late's rule (a baseline).
    spot: StrictBool | Literal["deadline-safe", "exploratory", "tuning-aware",
                               "uniform-progress"] = False
    # static: a fixed cluster of ``workers``; plan: follow the budget-aware planner's plan
    # (re-planned as timings arrive), with ``workers`` as a cap on local machines;
    # release-idle: start ``workers``, let each go while the scheduler has no job for it and
    # grow back when jobs queue (elastic without a plan). Default: static for local, plan for
    # the clouds.
    scaling: Literal["static", "plan", "release-idle"] | None = None
    # Cloud VMs: where checkpoints and the code bundle live (s3://bucket/prefix on aws,
    # gs://bucket/prefix on gcp), what pip installs on the VM, and the VM's image. A pool
    # may keep them in either (its workers on machines with no shared filesystem).
    storage: str | None = Field(None, pattern=r"^(s3|gs)://[a-z0-9][a-z0-9._-]{1,62}(/.*)?$")
    install: str | None = Field(None, min_length=1, strict=True)
    image: str | None = Field(None, min_length=1, strict=True)
    zones: list[str] | None = Field(None, min_length=1, strict=True)
    # aws only
    iam_instance_profile: str | None = Field(None, min_length=1, strict=True)
    security_group_ids: list[str] | None = Field(None, strict=True)
    subnet_ids: dict[str, str] | None = Field(None, strict=True)
    key_name: str | None = Field(None, min_length=1, strict=True)
    # gcp only
    service_account: str | None = Field(None, min_length=1, strict=True)
    network: str | None = Field(None, min_length=1, strict=True)
    # A VM whose worker has not registered this long after launch is replaced.
    register_timeout_s: float = Field(900.0, gt=0, strict=True, allow_inf_nan=False)
    # A VM whose controller has been gone this long (no heartbeat) powers itself off.
    orphan_timeout_s: float = Field(300.0, gt=0, strict=True, allow_inf_nan=False)
    # A running segment whose worker has not beaten this long is given up (STALE), re-run
    # from its last checkpoint elsewhere, and its worker's instance replaced.
    heartbeat_timeout_s: float = Field(120.0, gt=0, strict=True, allow_inf_nan=False)
    # pool only: the pool's name (the --pool of `elastune worker`)
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    # pool only: how many of its workers the sweep waits for (and plans on)
    min_workers: int = Field(1, ge=1, le=MAX_WORKERS, strict=True)
    # pool only: how long `run` waits for min_workers to join before it fails
    wait_for_workers: float | str = "10m"
    # aws/gcp: at the sweep's end its idle VMs stay up this long, paid by it, for the next
    # sweep of the same setup on the same broker to take up (None or 0: off)
    keep_warm: float | str | None = None

    @property
    def keep_warm_s(self) -> float:
        if self.keep_warm is None or (not isinstance(self.keep_warm, bool)
                                      and self.keep_warm in (0, "0")):
            return 0.0
        return float(parse_duration(self.keep_warm, "provider.keep_warm") or 0.0)

    @property
    def wait_for_workers_s(self) -> float:
        return float(parse_duration(self.wait_for_workers, "provider.wait_for_workers") or 0.0)

    @property
    def follows_plan(self) -> bool:
        return (self.scaling or ("static" if self.type in ("local", "pool") else "plan")) \
            == "plan"

    @field_validator("keep_warm", mode="before")
    @classmethod
    def _keep_warm_duration(cls, value: Any) -> Any:
        if isinstance(value, bool):   # (a bool would pass for the number 0 or 1)
            raise ConfigError("provider.keep_warm", f"expected a duration such as 10m or 600, "
                                                    f"or 0 for off; got {value!r}")
        return value

    @model_validator(mode="after")
    def _pool_keys(self) -> ProviderConfig:
        if self.keep_warm_s and self.type not in ("aws", "gcp"):
            raise ConfigError("provider.keep_warm", f"is for cloud VMs (type aws or gcp); a "
                                                    f"{self.type} sweep's workers end with it")
        if self.type != "pool":
            # (by value: a stored sweep holds every key, with its default)
            for key, default in (("name", None), ("min_workers", 1),
                                 ("wait_for_workers", "10m")):
                if getattr(self, key) != default:
                    raise ConfigError(f"provider.{key}", "is for provider type 'pool'")
            return self
        if self.name is None:
            raise ConfigError("provider.name", "a pool sweep names its pool (the --pool of "
                                               "`elastune worker`), e.g. name: gpu-a")
        for key, allowed in (("workers", (2, self.min_workers)), ("slots", (1,))):
            if key in self.model_fields_set and getattr(self, key) not in allowed:
                raise ConfigError(f"provider.{key}",
                                  "does not apply to a pool: its workers are the ones that "
                                  "joined it, each with its own slots (min_workers says how "
                                  "many to wait for)")
        if self.scaling not in (None, "static"):
            raise ConfigError("provider.scaling", f"is {self.scaling!r}, but a pool's cluster "
                                                  "is the workers that joined it (static)")
        _ = self.wait_for_workers_s   # (a bad duration is a ConfigError here)
        # Planned on the workers it waits for; billed at nothing unless a price is given.
        self.__dict__["workers"] = self.min_workers
        if "price_per_hour" not in self.model_fields_set:
            self.__dict__["price_per_hour"] = 0.0
        return self

    @model_validator(mode="after")
    def _cloud_keys_match_type(self) -> ProviderConfig:
        if self.type == "aws" and self.machine_types is not None:
            raise ConfigError(
                "provider.machine_types", "is for gcp; aws takes instance_types (e.g. [g5.xlarge])"
            )
        if self.type == "gcp" and self.instance_types is not None:
            raise ConfigError(
                "provider.instance_types",
                "is for aws; gcp takes machine_types (e.g. [g2-standard-4])",
            )
        aws_only = ("iam_instance_profile", "security_group_ids", "subnet_ids", "key_name")
        gcp_only = ("service_account", "network", "project")
        for name in (aws_only if self.type != "aws" else ()) + (
                gcp_only if self.type != "gcp" else ()):
            if getattr(self, name) is not None:
                raise ConfigError(f"provider.{name}",
                                  f"does not apply to provider type {self.type!r}")
        if self.type == "local" and self.workers > MAX_LOCAL_WORKERS:
            raise ConfigError("provider.workers",
                              f"is {self.workers}, but a local sweep runs at most "
                              f"{MAX_LOCAL_WORKERS} worker processes on this machine")
        if self.type in ("local", "pool"):
            for name in ("install", "image", "zones", "region", "zone", "spot") + (
                    ("instance_types", "machine_types") if self.type == "pool" else
                    ("storage",)):
                if getattr(self, name) not in (None, False):
                    raise ConfigError(f"provider.{name}",
                                      "is for aws and gcp; " + (
                                          "the local provider runs workers on this machine"
                                          if self.type == "local" else
                                          "a pool's workers keep checkpoints in the "
                                          "experiment directory (which they must reach) "
                                          "or in provider.storage"))
        elif isinstance(self.spot, str) and not self.follows_plan:
            # A static cluster is never re-bought: nothing would replace the spot VMs the
            # policy takes work from.
            raise ConfigError("provider.spot",
                              f"is {self.spot!r}, a policy that moves the cluster between "
                              "markets; it needs provider.scaling: plan (use spot: true for "
                              "a static spot cluster)")
        elif self.storage is not None and self.storage[:2] != ("s3" if self.type == "aws"
                                                              else "gs"):
            raise ConfigError("provider.storage",
                              f"is {self.storage!r}, but {self.type} keeps checkpoints in "
                              + ("s3://bucket/prefix" if self.type == "aws"
                                 else "gs://bucket/prefix"))
        return self


SPEEDUPS = ("linear", "resnet50_cifar10", "babi_lstm", "resnet101")
# Seconds from asking for a VM to its worker taking work, when the sweep does not say.
DEFAULT_BOOT_S = {"local": (2.0, 2.0), "aws": (60.0, 180.0), "gcp": (60.0, 180.0),
                  "pool": (1.0, 1.0)}


def _finite(v: Any) -> bool:
    """A finite int or float (not a bool)."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int too large for a float
        return False


MAX_STEP_COSTS = 100_000


class ProfileConfig(_Section):
    """How long the trainable takes, for the planner's predictions (``budgets.Profile``).

    ``seconds_per_step`` on one GPU; ``setup_s`` per segment, ``restore_s`` per resumed
    segment, ``checkpoint_s`` per saved one; ``boot_s`` a VM's boot latency, a number or
    ``[low, high]`` (default: 2 s locally, ``[60, 180]`` on a cloud); ``speedup`` the measured
    s(g) of one trial on g GPUs (HyperSched's tables) or ``linear``; ``step_costs`` what each
    of a trial's first steps costs relative to a later one (e.g. ``[3, 2, 1.5]``: a first
    epoch that warms caches), from an earlier run of the model, so the planner times each rung
    at what its steps cost and reads the first steps a sweep sees at that shape
    (``seconds_per_step`` is then a later step's); ``pace_quantiles`` how much slower than the
    mean trial an earlier run's trials trained, by quantile, so a stage is planned to end with
    its slowest trial before any is measured; ``promoted_pace_quantiles`` the same of the
    promoted trials, each resumed segment over its stage's mean, for the stages after the
    first. ``from``: an experiment directory whose
    measured profile (``elastune profile DIR``) fills every key the section does not set.
    """

    _key: ClassVar[str] = "profile"
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True,
                              populate_by_name=True)

    # an experiment directory (relative to the sweep file's folder) whose measured profile
    # (`elastune profile DIR`) fills every key this section does not set
    from_: str | None = Field(None, alias="from", min_length=1, strict=True)

    seconds_per_step: float = Field(1.0, gt=0, le=MAX_PROFILE_S, strict=True,
                                    allow_inf_nan=False)
    setup_s: float = Field(0.0, ge=0, le=MAX_PROFILE_S, strict=True, allow_inf_nan=False)
    checkpoint_s: float = Field(0.0, ge=0, le=MAX_PROFILE_S, strict=True, allow_inf_nan=False)
    restore_s: float = Field(0.0, ge=0, le=MAX_PROFILE_S, strict=True, allow_inf_nan=False)
    boot_s: tuple[float, float] | None = None
    # a named table, or s(g) measured on g GPUs: {1: 1.0, 2: 1.8, 4: 3.1}
    speedup: Literal["linear", "resnet50_cifar10", "babi_lstm", "resnet101"] | dict[
        int, float] = "linear"
    step_costs: tuple[float, ...] = ()
    # how much slower or faster than the mean trial an earlier run's trials trained, by
    # quantile: {0.5: 0.95, 0.9: 1.4, 0.99: 2.1}
    pace_quantiles: dict[float, float] = Field(default_factory=dict)
    # the same of promoted trials (a stage after the first), each over its stage's mean
    promoted_pace_quantiles: dict[float, float] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            names = ["from" if n == "from_" else n for n in cls.model_fields]
            _check_keys(data, names, "profile.", names)
        return data

    @field_validator("speedup", mode="before")
    @classmethod
    def _speedup_table(cls, value: Any) -> Any:
        names = ("linear", "resnet50_cifar10", "babi_lstm", "resnet101")
        if isinstance(value, str) and value in names:
            return value
        if not isinstance(value, Mapping):
            raise ConfigError("profile.speedup",
                              f"must be one of {', '.join(repr(n) for n in names[:-1])} or "
                              f"{names[-1]!r}, or a "
                              f"table {{gpus: speed-up}}, e.g. {{1: 1.0, 2: 1.8}}; got "
                              f"{_given(value)}")
        from budgets import Speedup

        try:
            table = {int(g): float(v) for g, v in value.items()}
            Speedup(table)
        except (TypeError, ValueError) as exc:
            raise ConfigError("profile.speedup",
                              "expected a named table or {gpus: speed-up} with 1: 1.0, "
                              f"non-decreasing, s(g) <= g; {exc}") from None
        return table

    @field_validator("pace_quantiles", "promoted_pace_quantiles", mode="before")
    @classmethod
    def _pace_quantiles(cls, value: Any, info: ValidationInfo) -> dict[float, float]:
        if value is None:
            return {}
        try:
            table = {float(q): float(p) for q, p in dict(value).items()}
        except (TypeError, ValueError):
            table = None
        if table is None or not all(0 < q < 1 and math.isfinite(p) and 0 < p <= MAX_PROFILE_S
                                    for q, p in table.items()):
            raise ConfigError(
                f"profile.{info.field_name}",
                "expected {quantile: pace}, each quantile in (0, 1) and each pace > 0 (a "
                "trial's seconds per step over the mean trial's), e.g. {0.5: 0.95, 0.9: 1.4}; "
                f"got {_given(value)}")
        return dict(sorted(table.items()))

    @field_validator("step_costs", mode="before")
    @classmethod
    def _step_costs(cls, value: Any) -> tuple[float, ...]:
        if value is None:
            return ()
        if not isinstance(value, list | tuple) or not all(
                _finite(v) and v > 0 for v in value):
            raise ConfigError(
                "profile.step_costs",
                "expected a list of numbers > 0, what each of a trial's first steps costs "
                f"relative to a later one (e.g. [3, 2, 1.5]); got {_given(value)}")
        if len(value) > MAX_STEP_COSTS or any(v > MAX_PROFILE_S for v in value):
            raise ConfigError(
                "profile.step_costs",
                f"expected at most {MAX_STEP_COSTS} entries, each <= {MAX_PROFILE_S:g}; "
                f"got {len(value)} entries, the largest {max(value):g}")
        return tuple(float(v) for v in value)

    @field_validator("boot_s", mode="before")
    @classmethod
    def _boot_range(cls, value: Any) -> tuple[float, float] | None:
        if value is None:
            return None
        if _finite(value):
            low = high = value
        elif (isinstance(value, list | tuple) and len(value) == 2
              and all(_finite(v) for v in value)):
            low, high = value
        else:
            raise ConfigError(
                "profile.boot_s",
                f"expected seconds (e.g. 90) or [low, high] (e.g. [60, 180]); got {_given(value)}",
            )
        if low < 0 or high < low:
            raise ConfigError(
                "profile.boot_s", f"must be 0 <= low <= high; got {_given(value)}"
            )
        if high > MAX_PROFILE_S:
            raise ConfigError(
                "profile.boot_s", f"must be <= {MAX_PROFILE_S:g} s; got {_given(value)}"
            )
        return (float(low), float(high))

    def boot_range(self, provider_type: str) -> tuple[float, float]:
        """``boot_s`` as ``(low, high)``, or the default for ``provider_type``."""
        return self.boot_s if self.boot_s is not None else DEFAULT_BOOT_S[provider_type]


def _callable_ref(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"<callable {module}:{qualname}>"


def _check_signature(fn: Callable[..., Any], label: str) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and some C callables: nothing to check
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise ConfigError(
            "trainable",
            f"{label} must accept two positional arguments (params, ctx); "
            f"its signature is {signature}",
        ) from None


def _default_name(trainable: object) -> str:
    parts: list[str] = []
    if isinstance(trainable, str) and ":" in trainable:
        module, _, attr = trainable.partition(":")
        parts = [module.rsplit(".", 1)[-1], attr.rsplit(".", 1)[-1]]
    elif callable(trainable):
        module = getattr(trainable, "__module__", None) or ""
        qualname = getattr(trainable, "__qualname__", None) or type(trainable).__name__
        if module not in ("__main__", "builtins"):
            parts.append(module.rsplit(".", 1)[-1])
        parts.append(qualname.rsplit(".", 1)[-1])
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(parts))
    name = re.sub(r"-{2,}", "-", name).strip("-.")[:64].strip("-.")
    return name or "sweep"


def resolve_trainable(
    spec: str | Callable[..., Any], search_path: Iterable[str | os.PathLike] | None = None
) -> Callable[..., Any]:
    """The trainable function named by ``spec`` (``"package.module:function"``), or ``spec`` itself.

    For the import attempt, the directories in ``search_path`` (e.g. the sweep YAML's directory;
    its parent too when it is the top package of the module, as for ``examples/digits.yaml``
    naming ``examples.digits:train``) and the current directory are put in front of
    ``sys.path``; they are taken out again after.
    The result must accept two positional arguments ``(params, ctx)``. Every failure is a
    :class:`ConfigError` with field ``trainable`` that says what failed.

    Example:
        >>> resolve_trainable("operator:add").__name__
        'add'
    """
    if callable(spec) and not isinstance(spec, str):
        _check_signature(spec, _callable_ref(spec))
        return spec
    if not isinstance(spec, str) or not _TRAINABLE.fullmatch(spec):
        raise ConfigError(
            "trainable",
            f"expected a callable or an import path 'package.module:function'; got {_given(spec)}",
        )
    module_name, _, attr = spec.partition(":")
    dirs: list[str] = []
    top_package = module_name.split(".")[0]
    for entry in search_path or ():
        folder = Path(entry).resolve()
        dirs.append(os.fspath(folder))
        if folder.name == top_package:  # the YAML sits inside the trainable's own package
            dirs.append(os.fspath(folder.parent))
    dirs.append(os.getcwd())
    added = [d for d in dict.fromkeys(dirs) if d not in sys.path]
    sys.path[:0] = added
    try:
        importlib.invalidate_caches()
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise ConfigError(
                "trainable",
                f"cannot import module {module_name!r} of {spec!r} ({exc}); looked in sys.path "
                f"and {', '.join(dict.fromkeys(dirs))}",
            ) from exc
        raise ConfigError(
            "trainable", f"importing module {module_name!r} of {spec!r} failed: {exc}"
        ) from exc
    except Exception as exc:  # the user's module raised while being imported
        raise ConfigError(
            "trainable",
            f"importing module {module_name!r} of {spec!r} raised {type(exc).__name__}: {exc}",
        ) from exc
    finally:
        for d in added:
            if d in sys.path:
                sys.path.remove(d)
    target: Any = module
    for i, part in enumerate(attr.split(".")):
        try:
            target = getattr(target, part)
        except AttributeError:
            owner = module_name if i == 0 else f"{module_name}:{'.'.join(attr.split('.')[:i])}"
            raise ConfigError(
                "trainable", f"{owner!r} has no attribute {part!r} (from {spec!r})"
            ) from None
    if not callable(target):
        raise ConfigError("trainable", f"{spec!r} is not callable; it is a {type(target).__name__}")
    _check_signature(target, repr(spec))
    return target


def _one_source(sources: list[tuple[str, Any]], what: str) -> tuple[str, Any] | None:
    if len(sources) > 1:
        raise ConfigError(
            sources[1][0], f"the {what} is given twice ({sources[0][0]} and {sources[1][0]})"
        )
    return sources[0] if sources else None


class SweepConfig(_Model):
    """A validated sweep: the same schema as sweep.yaml (see INTERFACES.md).

    Build it with :func:`load_sweep`; building it directly works too. ``space`` holds parsed
    dimensions (Optuna distributions, :class:`~tuner._space.Grid` markers, fixed values);
    the YAML ``budget: {time, cost}`` lands in ``time_budget_s``/``cost_budget_usd``.
    """

    name: str
    trainable: str | Callable[..., Any]
    metric: str = Field(min_length=1, strict=True)
    mode: Literal["min", "max"] = "max"
    space: dict[str, Any]
    scheduler: SchedulerConfig
    num_trials: int | None = Field(None, ge=1, le=MAX_TRIALS, strict=True)
    sampler: Literal["tpe", "random", "grid", "bohb"] | BaseSampler = "tpe"
    provider: ProviderConfig = Field(default_factory=ProviderConfig)
    profile: ProfileConfig = Field(default_factory=ProfileConfig)
    time_budget_s: float | None = None
    cost_budget_usd: float | None = None
    seed: int | None = Field(None, ge=0, lt=2**32, strict=True)
    gpus_per_trial: int = Field(1, ge=0, strict=True)
    max_failures: int = Field(3, ge=0, strict=True)
    # A segment running longer than this fails (counted against max_failures); None: no limit.
    segment_timeout_s: float | None = None
    # Experiment trackers that receive every trial's params, metrics by step and end, and
    # the sweep's budgets, spend and best trial: mlflow, wandb, tensorboard, csv, each by
    # name or with its options ({mlflow: {tracking_uri: ...}}). See the trackers guide.
    loggers: list[LoggerConfig] = Field(default_factory=list)
    # The sweep YAML's directory: relative imports and paths resolve from it. Not part of the
    # sweep's identity, so model_dump leaves it out.
    base_dir: Path | None = Field(None, exclude=True)
    _shown_keys: ClassVar[tuple[str, ...]] = TOP_LEVEL_KEYS

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        _check_keys(data, TOP_LEVEL_KEYS + _ALSO_ACCEPTED, "", TOP_LEVEL_KEYS)
        data = dict(data)
        times: list[tuple[str, Any]] = []
        costs: list[tuple[str, Any]] = []
        if "budget" in data:
            budget = data.pop("budget")
            budget = {} if budget is None else budget
            if not isinstance(budget, Mapping):
                raise ConfigError(
                    "budget", f"expected a mapping like {{time: 10m, cost: 2.0}}; got {budget!r}"
                )
            _check_keys(budget, ("time", "cost"), "budget.", ("time", "cost"))
            times += [("budget.time", budget["time"])] if "time" in budget else []
            costs += [("budget.cost", budget["cost"])] if "cost" in budget else []
        times += [(k, data.pop(k)) for k in ("time_budget", "time_budget_s") if k in data]
        costs += [(k, data.pop(k)) for k in ("cost_budget", "cost_budget_usd") if k in data]
        time_source = _one_source(times, "time budget")
        cost_source = _one_source(costs, "cost budget")
        data["time_budget_s"] = parse_duration(*time_source[::-1]) if time_source else None
        data["cost_budget_usd"] = parse_money(*cost_source[::-1]) if cost_source else None
        timeouts = [(k, data.pop(k)) for k in ("segment_timeout", "segment_timeout_s")
                    if k in data]
        timeout_source = _one_source(timeouts, "segment timeout")
        data["segment_timeout_s"] = (parse_duration(*timeout_source[::-1]) if timeout_source
                                     else None)
        if data.get("name") is None:
            data["name"] = _default_name(data.get("trainable"))
        if data.get("provider") is None:
            data.pop("provider", None)
        elif isinstance(data["provider"], str):
            data["provider"] = {"type": data["provider"]}
        if data.get("profile") is None:
            data.pop("profile", None)
        return data

    @field_validator("scheduler", "provider", "profile", mode="before")
    @classmethod
    def _section_string_keys(cls, value: Any, info: Any) -> Any:
        fields = {"scheduler": SchedulerConfig.model_fields,
                  "provider": ProviderConfig.model_fields,
                  "profile": ProfileConfig.model_fields}[info.field_name]
        _string_keys(value, f"{info.field_name}.", fields)
        return value

    @field_validator("loggers", mode="before")
    @classmethod
    def _parse_loggers(cls, value: Any) -> list[LoggerConfig]:
        return parse_loggers(value)

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value) or set(value) == {"."}:
            raise ConfigError(
                "name",
                f"must be 1 to 64 of the characters A-Z a-z 0-9 . _ - (not only dots); "
                f"got {_given(value)}",
            )
        return value

    @field_validator("trainable", mode="before")
    @classmethod
    def _trainable_shape(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not _TRAINABLE.fullmatch(value):
                raise ConfigError(
                    "trainable",
                    f"expected an import path 'package.module:function'; got {_given(value)}",
                )
            return value
        if callable(value):
            _check_signature(value, _callable_ref(value))
            return value
        raise ConfigError(
            "trainable",
            "expected a callable(params, ctx) or an import path 'package.module:function'; "
            f"got {_given(value)}",
        )

    @field_validator("space", mode="before")
    @classmethod
    def _parse_space(cls, value: Any) -> dict[str, Dimension]:
        return parse_space(value)

    @field_validator("sampler", mode="before")
    @classmethod
    def _sampler_kind(cls, value: Any) -> Any:
        if isinstance(value, BaseSampler):
            return value
        if isinstance(value, str) and value.lower() in SAMPLERS:
            return value.lower()
        raise ConfigError(
            "sampler",
            f"unknown sampler {_given(value)}; allowed: {', '.join(SAMPLERS)}, "
            "or an optuna.samplers.BaseSampler instance",
        )

    @model_validator(mode="after")
    def _consistent(self) -> SweepConfig:
        if self.time_budget_s is None and self.cost_budget_usd is None:
            raise ConfigError(
                "budget.time",
                "no budget given; give budget.time (a deadline, e.g. 30m), budget.cost "
                "(a cap in US dollars), or both",
            )
        if self.scheduler.deadline_policy is not None and (
                self.time_budget_s is None or self.provider.follows_plan):
            raise ConfigError(
                "scheduler.deadline_policy",
                "hypersched is for a fixed cluster racing a deadline: give budget.time and "
                "provider.scaling: static (or a local provider)")
        if self.provider.type == "local" and self.gpus_per_trial > self.provider.slots:
            raise ConfigError(
                "gpus_per_trial",
                f"is {self.gpus_per_trial}, but must be gpus_per_trial <= provider.slots "
                f"({self.provider.slots}): a trial runs on one worker",
            )
        grids = [n for n, d in self.space.items() if isinstance(d, Grid)]
        if not grids and "sampler" not in self.model_fields_set and self.scheduler.brackets > 1:
            # Trials entering at several rungs: BOHB's search, which the search benchmark
            # found ahead of TPE there (docs/benchmarks/search.md); not a user's choice either.
            object.__setattr__(self, "sampler", "bohb")
        if grids:
            if "sampler" not in self.model_fields_set:
                # Not a user's choice, so it stays out of model_fields_set.
                object.__setattr__(self, "sampler", "grid")
            elif self.sampler != "grid" and not isinstance(self.sampler, GridSampler):
                raise ConfigError(
                    "sampler",
                    f"the space has grid dimensions ({', '.join(grids)}), which need sampler "
                    f"'grid'; got {_given(self.sampler)}",
                )
        elif self.sampler == "grid":
            bad = [
                n for n, d in self.space.items()
                if not is_fixed(d) and not isinstance(d, CategoricalDistribution)
            ]  # fmt: skip
            if bad:
                raise ConfigError(
                    "sampler",
                    "'grid' needs every varying dimension to be a grid or a choice; "
                    f"not: {', '.join(bad)}",
                )
        if self.scheduler.early_promotion and self.num_trials is None \
                and self.sampler != "grid" and not isinstance(self.sampler, GridSampler):
            raise ConfigError(
                "scheduler.early_promotion",
                "needs num_trials: a sweep whose number of trials the planner chooses may cut "
                "a stage under way (to keep within its cost budget), which a trial promoted "
                "early would not allow; give num_trials or leave early_promotion out")
        return self

    # -- derived views ------------------------------------------------------------------------
    @property
    def trainable_ref(self) -> str:
        """The trainable's import path, or ``"<callable module:qualname>"`` for a callable."""
        return self.trainable if isinstance(self.trainable, str) else _callable_ref(self.trainable)

    def distributions(self) -> dict[str, BaseDistribution]:
        """The varying dimensions as Optuna distributions (a grid as a categorical one)."""
        return {
            n: CategoricalDistribution(d.values) if isinstance(d, Grid) else d
            for n, d in self.space.items()
            if not is_fixed(d)
        }

    def fixed_params(self) -> dict[str, Any]:
        """The fixed values of the space, passed to every trial unchanged."""
        return {n: d for n, d in self.space.items() if is_fixed(d)}

    def grid_search_space(self) -> dict[str, list[Any]]:
        """The ``search_space`` argument of ``optuna.samplers.GridSampler`` (sampler 'grid')."""
        return {
            n: list(d.choices)
            for n, d in self.distributions().items()
            if isinstance(d, CategoricalDistribution)
        }

    def resolve_trainable(self) -> Callable[..., Any]:
        """Import (or check) the trainable, searching the sweep YAML's directory first."""
        return resolve_trainable(self.trainable, [self.base_dir] if self.base_dir else None)

    def to_json_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form for the experiment store; :func:`load_sweep` reads it back.

        A callable trainable is written as ``"<callable module:qualname>"`` and an Optuna sampler
        instance as ``"<sampler module.Class>"``; those two cannot be read back from JSON.
        ``base_dir`` is kept (as a string) so that a resumed sweep imports the same trainable.
        """
        sampler: object = self.sampler
        if isinstance(sampler, BaseSampler):
            sampler = f"<sampler {type(sampler).__module__}.{type(sampler).__qualname__}>"
        return {
            "name": self.name,
            "trainable": self.trainable_ref,
            "metric": self.metric,
            "mode": self.mode,
            "space": {n: to_yaml_form(d) for n, d in self.space.items()},
            "scheduler": self.scheduler.model_dump(mode="json"),
            "num_trials": self.num_trials,
            "sampler": sampler,
            "provider": self.provider.model_dump(mode="json"),
            "budget": {"time": self.time_budget_s, "cost": self.cost_budget_usd},
            "seed": self.seed,
            "gpus_per_trial": self.gpus_per_trial,
            "max_failures": self.max_failures,
            "segment_timeout": self.segment_timeout_s,
            "profile": self.profile.model_dump(
                mode="json", by_alias=True,
                exclude={"from_"} if self.profile.from_ is None else None),
            "loggers": [entry.to_json() for entry in self.loggers],
            "base_dir": None if self.base_dir is None else str(self.base_dir),
        }


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: let PyYAML report it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark,
                )  # fmt: skip
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("config", f"no such file: {os.fspath(path)!r}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("config", f"cannot read {os.fspath(path)!r}: {exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise ConfigError("config", f"{os.fspath(path)!r} is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            "config", f"{os.fspath(path)!r} is not valid YAML{where}: {problem}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            "config",
            f"{os.fspath(path)!r} must hold a mapping of sweep keys "
            f"({', '.join(TOP_LEVEL_KEYS)}); got {type(data).__name__}",
        )
    size = _expanded_size(data, MAX_YAML_VALUES)
    if size is None:
        raise ConfigError("config", f"{os.fspath(path)!r} holds a node that contains itself "
                          "(an alias inside its own anchor)")
    if size > MAX_YAML_VALUES:
        raise ConfigError("config", f"{os.fspath(path)!r} expands to more than "
                          f"{MAX_YAML_VALUES} values (through its aliases)")
    return data


def _expanded_size(root: Any, limit: int) -> int | None:
    """How many values ``root`` holds, a node shared through YAML aliases counted each time it
    appears (capped just above ``limit``); None when a node contains itself. Iterative, so
    any depth is fine."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        children = ([*node.keys(), *node.values()] if isinstance(node, dict)
                    else node if isinstance(node, list) else None)
        if children is None:
            continue
        key = id(node)
        if closing:
            total = 1 + sum(sizes.get(id(c), 1) for c in children)
            sizes[key] = min(total, limit + 1)
            open_.discard(key)
            continue
        if key in sizes:
            continue
        if key in open_:
            return None
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if isinstance(c, dict | list))
    return sizes.get(id(root), 1)


def _provider_type(provider: Any) -> Any:
    if isinstance(provider, ProviderConfig):
        return provider.type
    if isinstance(provider, Mapping):
        return provider.get("type", "local")
    return provider


def _drop_budget(data: dict[str, Any], which: str) -> None:
    keys = (
        ("time_budget", "time_budget_s") if which == "time" else ("cost_budget", "cost_budget_usd")
    )
    for key in keys:
        data.pop(key, None)
    budget = data.get("budget")
    if isinstance(budget, Mapping):
        data["budget"] = {k: v for k, v in budget.items() if k != which}


def _apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    # ``budget`` first, so that time_budget/cost_budget given alongside it win over its entries.
    for key in sorted(overrides, key=lambda k: k != "budget"):
        value = overrides[key]
        if key in ("time_budget", "time_budget_s", "cost_budget", "cost_budget_usd"):
            # An explicit None removes that budget: no deadline, or no cost cap.
            _drop_budget(data, key.split("_")[0])
            if value is not None:
                data[key] = value
        elif value is None and key in ("provider", "budget"):
            continue
        elif key == "budget":
            _drop_budget(data, "time")
            _drop_budget(data, "cost")
            data["budget"] = value
        elif key == "provider":
            same_type = isinstance(value, str) and value == _provider_type(data.get("provider"))
            if not same_type:  # keep the file's provider block when only its type is repeated
                data["provider"] = value
        elif key in TOP_LEVEL_KEYS or key in _ALSO_ACCEPTED:
            data[key] = value
        else:
            _check_keys({key: value}, (), "", TOP_LEVEL_KEYS + ("time_budget", "cost_budget"))


def load_sweep(
    config: Mapping[str, Any] | str | os.PathLike | SweepConfig, /, **overrides: Any
) -> SweepConfig:
    """Validate a sweep given as a dict, a path to a YAML file, or a :class:`SweepConfig`.

    Keyword ``overrides`` replace top-level keys; ``time_budget``/``cost_budget`` replace
    ``budget.time``/``budget.cost``; ``provider="aws"`` means ``{type: aws}`` (the config's own
    provider block is kept if it already has that type). ``time_budget=None`` or
    ``cost_budget=None`` removes that budget (no deadline, no cost cap); ``provider=None`` and
    ``budget=None`` are ignored. Every problem raises :class:`ConfigError`.

    Example:
        >>> cfg = load_sweep({"trainable": "operator:add", "metric": "acc",
        ...                   "space": {"lr": {"loguniform": [1e-4, 0.1]}},
        ...                   "scheduler": {"max_resource": 9}}, time_budget="10m")
        >>> cfg.time_budget_s, cfg.name
        (600.0, 'operator-add')
    """
    if isinstance(config, SweepConfig):
        if not overrides:
            return config
        data = {k: getattr(config, k) for k in config.model_fields_set}
        data["base_dir"] = config.base_dir
    elif isinstance(config, str | os.PathLike):
        path = Path(config)
        data = _read_yaml(path)
        data.setdefault("base_dir", path.resolve().parent)
    elif isinstance(config, Mapping):
        data = dict(config)
    else:
        raise ConfigError(
            "config",
            "expected a mapping, a path to a sweep YAML file or a SweepConfig; "
            f"got {type(config).__name__}",
        )
    _apply_overrides(data, overrides)
    try:
        return SweepConfig.model_validate(data)
    except RecursionError:
        raise ConfigError("config", "is nested too deeply to be a sweep") from None
