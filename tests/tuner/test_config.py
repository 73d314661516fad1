"""The sweep configuration at the edge: every mistake is a ConfigError naming its field."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import pickle
import sys
import textwrap
import uuid

import optuna
import pytest
import yaml
from hypothesis import given, settings
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from tests._strategies import budget_sections, budget_values, spaces
from tuner._config import (
    TOP_LEVEL_KEYS,
    ProfileConfig,
    ProviderConfig,
    SchedulerConfig,
    SweepConfig,
    load_sweep,
    resolve_trainable,
)
from tuner._duration import parse_duration, parse_money
from tuner._errors import ConfigError
from tuner._planning import profile_for
from tuner._space import (
    Grid,
    choice,
    grid,
    loguniform,
    parse_space,
    randint,
    to_yaml_form,
    uniform,
)

# The sweep.yaml example of INTERFACES.md, verbatim but for the trainable's module.
INTERFACES_YAML = """\
name: digits-mlp
trainable: {module}:train
metric: accuracy
mode: max
space:
  lr: {{loguniform: [1.0e-4, 1.0e-1]}}
  hidden: {{choice: [32, 64, 128]}}
  alpha: {{uniform: [0.0, 0.01]}}
scheduler: {{type: asha, min_resource: 1, max_resource: 27, reduction_factor: 3}}
num_trials: 27                 # optional
budget: {{time: 10m, cost: 2.0}}
provider: {{type: local, workers: 2, slots: 1, price_per_hour: 1.0}}
# provider: {{type: aws, region: us-east-1, instance_types: [g5.xlarge, g4dn.xlarge], spot: true}}
# provider: {{type: gcp, project: my-proj, zone: us-central1-a, machine_types: [g2-standard-4]}}
"""


def train(params, ctx):  # a trainable with the contract's signature
    return None


def base(**changes):
    """A valid sweep as a dict; ``changes`` replace its keys."""
    cfg = {
        "trainable": train,
        "metric": "accuracy",
        "space": {"lr": loguniform(1e-4, 1e-1), "hidden": choice([32, 64, 128])},
        "scheduler": {"max_resource": 27},
        "budget": {"time": "10m"},
    }
    cfg.update(changes)
    return cfg


@contextlib.contextmanager
def raises(field: str, *fragments: str):
    """Expect a ConfigError for ``field`` whose message holds every fragment."""
    with pytest.raises(ConfigError) as info:
        yield info
    err = info.value
    assert err.field == field, str(err)
    assert str(err).startswith(f"{field}: "), str(err)
    for fragment in fragments:
        assert fragment in str(err), str(err)


@pytest.fixture
def train_module(tmp_path, monkeypatch):
    """A uniquely named module in tmp_path (not on sys.path) holding several trainables."""
    name = f"sweep_train_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            def train(params, ctx):
                return None

            def one_arg(params):
                return None

            class Holder:
                @staticmethod
                def train(params, ctx, extra=None):
                    return None

            NOT_CALLABLE = 3
            """
        )
    )
    monkeypatch.chdir(tmp_path.parent)  # the CWD must not be what makes the import work
    yield name
    sys.modules.pop(name, None)


# -- ConfigError -------------------------------------------------------------------------------


def test_config_error_names_the_field_first_and_survives_pickle():
    err = ConfigError("space.lr", "unknown distribution 'logunif'")
    assert isinstance(err, ValueError)
    assert str(err) == "space.lr: unknown distribution 'logunif'"
    assert err.errors == [("space.lr", "unknown distribution 'logunif'")]
    back = pickle.loads(pickle.dumps(err))
    assert (back.field, back.message, str(back)) == (err.field, err.message, str(err))


# -- durations and money -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (90, 90.0),
        (1.5, 1.5),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        (" 1h 30m ", 5400.0),
        ("1.5h", 5400.0),
        ("45", 45.0),
        ("2.5", 2.5),
        ("1d", 86400.0),
        ("10 min", 600.0),
        ("2H", 7200.0),
        (dt.timedelta(minutes=2), 120.0),
    ],
)
def test_parse_duration_accepts(value, seconds):
    assert parse_duration(value, "budget.time") == seconds


@pytest.mark.parametrize(
    "value",
    [0, -1, 0.0, -0.5, math.nan, math.inf, -math.inf, True, False, "", "  ", "abc", "10x", "1h1h",
     "-5m", "0s", "inf", "nan", "1e3", "h", "m30", [], {}, 10**400, dt.timedelta(0), b"10s"],
)  # fmt: skip
def test_parse_duration_rejects(value):
    with raises("budget.time", repr(value)):
        parse_duration(value, "budget.time")


@pytest.mark.parametrize(
    ("value", "usd"),
    [(None, None), (2, 2.0), (2.5, 2.5), ("2.5", 2.5), ("$2.50", 2.5), ("3 USD", 3)],
)
def test_parse_money_accepts(value, usd):
    assert parse_money(value, "budget.cost") == usd


@pytest.mark.parametrize(
    "value", [0, 0.0, -1, math.nan, math.inf, True, "", "free", "$", "-2", [], 10**400]
)
def test_parse_money_rejects(value):
    with raises("budget.cost", repr(value)):
        parse_money(value, "budget.cost")


# -- space helpers -----------------------------------------------------------------------------


def test_helpers_return_optuna_distributions():
    assert uniform(0, 1) == FloatDistribution(0.0, 1.0)
    assert loguniform(1e-4, 1e-1) == FloatDistribution(1e-4, 1e-1, log=True)
    assert randint(1, 4) == IntDistribution(1, 4)  # high included
    assert choice([32, 64, "x", None, True]) == CategoricalDistribution([32, 64, "x", None, True])
    assert grid([1, 2, 3]) == Grid((1, 2, 3))
    assert len(grid(["a", "b"])) == 2


@pytest.mark.parametrize(
    ("call", "field", "fragment"),
    [
        (lambda: uniform(1, 0), "uniform.high", ">= low"),
        (lambda: uniform("a", 1), "uniform.low", "finite number"),
        (lambda: uniform(0, math.inf), "uniform.high", "finite number"),
        (lambda: loguniform(0, 1), "loguniform.low", "> 0"),
        (lambda: loguniform(-1, 1), "loguniform.low", "> 0"),
        (lambda: randint(1.5, 3), "randint.low", "integer"),
        (lambda: randint(5, 1), "randint.high", ">= low"),
        (lambda: randint(True, 3), "randint.low", "integer"),
        (lambda: choice([]), "choice.values", "non-empty"),
        (lambda: choice("abc"), "choice.values", "list"),
        (lambda: choice([[1]]), "choice.values", "JSON"),
        (lambda: choice([math.nan]), "choice.values", "JSON"),
        (lambda: choice([1, 1]), "choice.values", "twice"),
        (lambda: grid([]), "grid.values", "non-empty"),
        (lambda: grid({"a": 1}), "grid.values", "list"),
    ],
)
def test_helpers_reject_bad_arguments(call, field, fragment):
    with raises(field, fragment):
        call()


# -- parse_space -------------------------------------------------------------------------------


def test_parse_space_yaml_forms():
    space = parse_space(
        {
            "a": {"uniform": [0, 1]},
            "b": {"loguniform": ["1e-4", 0.1]},  # PyYAML reads 1e-4 as a string
            "c": {"randint": [1, 8]},
            "d": {"int": [2, 6]},
            "e": {"int": {"low": 1, "high": 64, "log": True}},
            "f": {"int": {"low": 0, "high": 10, "step": 2}},
            "g": {"float": {"low": 0.0, "high": 1.0, "step": 0.25}},
            "h": {"float": [0.5, 2.0]},
            "i": {"choice": ["relu", "tanh"]},
            "j": {"uniform": {"low": -1, "high": 1}},
            "k": 3,
            "l": "adam",
            "m": 0.5,
            "n": True,
        }
    )
    assert space == {
        "a": FloatDistribution(0, 1),
        "b": FloatDistribution(1e-4, 0.1, log=True),
        "c": IntDistribution(1, 8),
        "d": IntDistribution(2, 6),
        "e": IntDistribution(1, 64, log=True),
        "f": IntDistribution(0, 10, step=2),
        "g": FloatDistribution(0, 1, step=0.25),
        "h": FloatDistribution(0.5, 2.0),
        "i": CategoricalDistribution(["relu", "tanh"]),
        "j": FloatDistribution(-1, 1),
        "k": 3,
        "l": "adam",
        "m": 0.5,
        "n": True,
    }


def test_parse_space_accepts_optuna_distributions_and_helpers():
    dists = {
        "x": optuna.distributions.FloatDistribution(0.1, 1.0, log=True),
        "y": optuna.distributions.IntDistribution(1, 9, step=2),
        "z": optuna.distributions.CategoricalDistribution(["a", "b"]),
        "w": randint(0, 3),
    }
    assert parse_space(dists) == dists


@pytest.mark.parametrize(
    ("space", "field", "fragments"),
    [
        (
            {"lr": {"logunif": [1e-4, 1e-1]}},
            "space.lr",
            ("unknown distribution 'logunif'",
             "allowed: uniform, loguniform, randint, choice, grid, int, float"),
        ),
        ({"lr": {"uniform": [1, 0]}}, "space.lr", ("uniform high", ">= low")),
        ({"lr": {"loguniform": [0, 1]}}, "space.lr", ("loguniform low", "> 0")),
        ({"lr": {"loguniform": [-1e-3, 1]}}, "space.lr", ("loguniform low",)),
        ({"n": {"randint": [1.5, 3]}}, "space.n", ("randint low", "integer")),
        ({"n": {"randint": [1, 2, 3]}}, "space.n", ("[low, high]",)),
        ({"n": {"int": {"low": 0, "high": 8, "log": True}}}, "space.n", ("int low", ">= 1")),
        ({"n": {"int": {"low": 1, "high": 8, "log": True, "step": 2}}}, "space.n", ("int step",)),
        ({"n": {"int": {"low": 1, "high": 8, "step": 0}}}, "space.n", ("int step", ">= 1")),
        ({"n": {"int": {"low": 1}}}, "space.n", ("int high", "missing")),
        ({"n": {"int": {"low": 1, "high": 2, "by": 1}}}, "space.n", ("unknown key 'by'",)),
        ({"n": {"uniform": {"low": 1, "high": 2, "log": True}}}, "space.n", ("unknown key",)),
        ({"x": {"float": {"low": 0, "high": 1, "step": -1}}}, "space.x", ("float step", "> 0")),
        ({"x": {"float": {"low": 0, "high": 1, "log": "yes"}}}, "space.x", ("true or false",)),
        ({"x": {"float": {"low": 1, "high": 2, "log": True, "step": 0.1}}}, "space.x", ("log",)),
        ({"h": {"choice": []}}, "space.h", ("choice values", "non-empty")),
        ({"h": {"choice": [{"a": 1}]}}, "space.h", ("JSON",)),
        ({"h": {"choice": "abc"}}, "space.h", ("list",)),
        ({"h": {"grid": []}}, "space.h", ("grid values",)),
        ({"h": [1, 2, 3]}, "space.h", ("{choice: [...]}",)),
        ({"h": None}, "space.h", ("expected a distribution",)),
        ({"h": math.nan}, "space.h", ("finite",)),
        ({"h": {"uniform": [0, 1], "choice": [1]}}, "space.h", ("exactly one key",)),
        ({"h": {}}, "space.h", ("exactly one key",)),
        ({1: {"uniform": [0, 1]}}, "space.1", ("non-empty strings",)),
        ({"": 3}, "space.''", ("non-empty strings",)),
        ([("lr", 1)], "space", ("mapping",)),
        ("lr", "space", ("mapping",)),
        ({}, "space", ("empty",)),
    ],
)  # fmt: skip
def test_parse_space_errors(space, field, fragments):
    with raises(field, *fragments):
        parse_space(space)


def test_optuna_categorical_choices_must_be_json_scalars():
    with pytest.warns(UserWarning):  # Optuna only warns
        odd = optuna.distributions.CategoricalDistribution([[1, 2]])
    with raises("space.o", "choice values", "JSON"):
        parse_space({"o": odd})


def test_grid_dimensions_may_hold_fixed_values_but_not_sampled_ones():
    assert parse_space({"a": grid([1, 2]), "b": {"grid": ["x", "y"]}, "c": 5}) == {
        "a": Grid((1, 2)),
        "b": Grid(("x", "y")),
        "c": 5,
    }
    with raises("space.lr", "cannot mix grid", "(a)", "(lr, h)"):
        parse_space({"a": {"grid": [1, 2]}, "lr": uniform(0, 1), "h": choice([1, 2])})


def test_yaml_form_reads_back_to_the_same_dimension():
    dims = {
        "a": uniform(0, 1),
        "b": loguniform(1e-4, 1e-1),
        "c": randint(1, 8),
        "d": IntDistribution(1, 64, log=True),
        "e": IntDistribution(0, 10, step=2),
        "f": FloatDistribution(0, 1, step=0.25),
        "g": choice([None, True, 1, 1.5, "x"]),
        "h": 7,
    }
    forms = {n: to_yaml_form(d) for n, d in dims.items()}
    assert parse_space(json.loads(json.dumps(forms))) == dims
    assert to_yaml_form(grid([1, 2])) == {"grid": [1, 2]}


# -- the sweep ---------------------------------------------------------------------------------


def test_interfaces_yaml_round_trip(tmp_path, train_module):
    path = tmp_path / "sweep.yaml"
    path.write_text(INTERFACES_YAML.format(module=train_module))
    cfg = load_sweep(path)

    assert cfg.name == "digits-mlp"
    assert cfg.trainable == f"{train_module}:train"
    assert (cfg.metric, cfg.mode) == ("accuracy", "max")
    assert cfg.space == {
        "lr": loguniform(1e-4, 1e-1),
        "hidden": choice([32, 64, 128]),
        "alpha": uniform(0.0, 0.01),
    }
    assert cfg.scheduler == SchedulerConfig(
        type="asha", min_resource=1, max_resource=27, reduction_factor=3
    )
    assert cfg.num_trials == 27
    assert (cfg.time_budget_s, cfg.cost_budget_usd) == (600.0, 2.0)
    assert cfg.provider == ProviderConfig(type="local", workers=2, slots=1, price_per_hour=1.0)
    assert cfg.sampler == "tpe" and cfg.seed is None
    assert (cfg.gpus_per_trial, cfg.max_failures) == (1, 3)
    assert cfg.base_dir == tmp_path.resolve()
    assert "base_dir" not in cfg.model_dump()

    path_before = list(sys.path)
    fn = cfg.resolve_trainable()  # found through base_dir: tmp_path is neither on sys.path nor CWD
    assert fn.__name__ == "train" and fn.__module__ == train_module
    assert sys.path == path_before

    stored = json.loads(json.dumps(cfg.to_json_dict(), allow_nan=False))
    assert stored["budget"] == {"time": 600.0, "cost": 2.0}
    assert stored["space"]["lr"] == {"loguniform": [1e-4, 1e-1]}
    assert load_sweep(stored) == cfg
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(stored))
    assert load_sweep(again) == cfg


def test_python_dict_with_callable_helpers_and_keyword_budgets():
    cfg = load_sweep(
        {
            "trainable": train,
            "metric": "accuracy",
            "mode": "max",
            "space": {"lr": loguniform(1e-4, 1e-1), "hidden": choice([32, 64, 128])},
            "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 27,
                          "reduction_factor": 3},
            "num_trials": None,
            "sampler": "tpe",
            "provider": {"type": "local", "workers": 2},
        },
        time_budget="30m",
        cost_budget=25.0,
    )  # fmt: skip
    assert cfg.trainable is train
    assert (cfg.time_budget_s, cfg.cost_budget_usd) == (1800.0, 25.0)
    assert cfg.name == "test_config-train"
    assert cfg.resolve_trainable() is train
    stored = cfg.to_json_dict()
    assert stored["trainable"] == f"<callable {__name__}:train>"
    json.dumps(stored, allow_nan=False)
    assert cfg.distributions() == {"lr": loguniform(1e-4, 1e-1), "hidden": choice([32, 64, 128])}


def test_sweep_config_built_directly_validates_too():
    cfg = SweepConfig(**base())
    assert cfg.time_budget_s == 600.0
    with raises("scheduler.max_resource"):
        SweepConfig(**base(scheduler={"max_resource": 0}))
    with raises("scheduler.reduction_factor", ">= 2", "got 1"):
        SchedulerConfig(max_resource=9, reduction_factor=1)
    with raises("provider.workers", ">= 1"):
        ProviderConfig(workers=0)
    # A first cut of its own is synchronous halving's alone, and at least a halving.
    assert SchedulerConfig(type="sha", max_resource=9, first_reduction=2).first_reduction == 2
    with raises("scheduler.first_reduction", "type: sha", "'asha'"):
        SchedulerConfig(type="asha", max_resource=9, first_reduction=2)
    with raises("scheduler.first_reduction", ">= 2"):
        SchedulerConfig(type="sha", max_resource=9, first_reduction=1)
    with raises("metric", "is required"):
        SweepConfig.model_validate({k: v for k, v in base().items() if k != "metric"})
    # Early promotion: synchronous halving's, for a sweep whose number of trials is given.
    sha = {"type": "sha", "max_resource": 27, "early_promotion": True}
    assert SweepConfig(**base(scheduler=sha, num_trials=27)).scheduler.early_promotion
    assert not SweepConfig(**base()).scheduler.early_promotion
    with raises("scheduler.early_promotion", "type: sha", "'asha'"):
        SchedulerConfig(type="asha", max_resource=9, early_promotion=True)
    with raises("scheduler.early_promotion", "needs num_trials"):
        SweepConfig(**base(scheduler=sha))
    with raises("scheduler.early_promotion"):
        SchedulerConfig(type="sha", max_resource=9, early_promotion="yes")


def test_overrides_replace_top_level_keys(tmp_path, train_module):
    path = tmp_path / "sweep.yaml"
    path.write_text(INTERFACES_YAML.format(module=train_module).replace("workers: 2", "workers: 5"))

    cfg = load_sweep(path, time_budget="1h")
    assert (cfg.time_budget_s, cfg.cost_budget_usd) == (3600.0, 2.0)
    cfg = load_sweep(path, cost_budget="$5", time_budget=None)  # None: no deadline
    assert (cfg.time_budget_s, cfg.cost_budget_usd) == (None, 5.0)
    cfg = load_sweep(path, cost_budget=None)  # None: no cost cap (the deadline stays)
    assert (cfg.time_budget_s, cfg.cost_budget_usd) == (600.0, None)
    with pytest.raises(ConfigError, match="budget.time"):  # one of the two is needed
        load_sweep(path, cost_budget=None, time_budget=None)
    cfg = load_sweep(path, budget={"time": "5m"})  # the whole budget block is replaced
    assert (cfg.time_budget_s, cfg.cost_budget_usd) == (300.0, None)
    cfg = load_sweep(path, budget={"time": "5m", "cost": 1}, time_budget=60)
    assert (cfg.time_budget_s, cfg.cost_budget_usd) == (60.0, 1.0)

    cfg = load_sweep(path, seed=7, num_trials=9, name="other", mode="min")
    assert (cfg.seed, cfg.num_trials, cfg.name, cfg.mode) == (7, 9, "other", "min")
    assert load_sweep(path, provider="local").provider.workers == 5  # same type: block kept
    aws = load_sweep(path, provider="aws").provider
    assert (aws.type, aws.workers) == ("aws", 2)
    assert load_sweep(path, provider={"workers": 3}).provider == ProviderConfig(workers=3)
    assert load_sweep(path, provider=ProviderConfig(slots=4)).provider.slots == 4
    assert load_sweep(path, trainable=train).trainable is train

    # Overrides apply to a SweepConfig too; without any, the same object comes back.
    cfg = load_sweep(path)
    assert load_sweep(cfg) is cfg
    cheaper = load_sweep(cfg, cost_budget=1.0, seed=3)
    assert (cheaper.cost_budget_usd, cheaper.time_budget_s, cheaper.seed) == (1.0, 600.0, 3)
    assert cheaper.base_dir == cfg.base_dir and cheaper.space == cfg.space

    with raises("time_budget", "'soon'"):
        load_sweep(path, time_budget="soon")
    with raises("cost_budget", "-1"):
        load_sweep(path, cost_budget=-1)
    with raises("num_trial", "unknown key", "did you mean 'num_trials'", "allowed: name"):
        load_sweep(path, num_trial=3)
    with raises("provider.type", "'azure'"):
        load_sweep(path, provider="azure")


def test_config_file_errors(tmp_path):
    with raises("config", "no such file"):
        load_sweep(tmp_path / "missing.yaml")
    with raises("config", "no such file"):
        load_sweep(str(tmp_path / "missing.yaml"))
    with raises("config", "cannot read"):
        load_sweep(tmp_path)  # a directory

    bad = tmp_path / "bad.yaml"
    bad.write_text("metric: accuracy\nspace: {lr: [1, 2\nmode: max\n")
    with raises("config", "not valid YAML", "line "):
        load_sweep(bad)
    bad.write_text("metric: a\nmode: max\nmetric: b\n")
    with raises("config", "duplicate key 'metric'", "line 3"):
        load_sweep(bad)
    for text, kind in (("- a\n- b\n", "list"), ("just text\n", "str"), ("", "NoneType")):
        bad.write_text(text)
        with raises("config", "mapping", kind):
            load_sweep(bad)
    with raises("config", "got int"):
        load_sweep(42)


def test_every_key_error_names_it():
    allowed = "allowed: " + ", ".join(TOP_LEVEL_KEYS)
    with raises("metrc", "unknown key", "did you mean 'metric'", allowed):
        load_sweep(base(metrc="x"))
    with raises("scheduler.eta", "unknown key", "allowed: type, min_resource"):
        load_sweep(base(scheduler={"max_resource": 9, "eta": 3}))
    with raises("provider.gpus", "unknown key", "allowed: type, workers"):
        load_sweep(base(provider={"gpus": 3}))
    with raises("budget.money", "unknown key", "allowed: time, cost"):
        load_sweep(base(budget={"time": 60, "money": 3}))
    with raises("metric", "is required"):
        load_sweep({k: v for k, v in base().items() if k != "metric"})
    with raises("scheduler", "is required"):
        load_sweep({k: v for k, v in base().items() if k != "scheduler"})
    with raises("scheduler.max_resource", "is required"):
        load_sweep(base(scheduler={"type": "sha"}))
    # All errors are listed; the first one names the field.
    with raises("mode", "'min' or 'max'", "got 'best'", "also num_trials: must be >= 1; got 0"):
        load_sweep(base(mode="best", num_trials=0))  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "field", "fragments"),
    [
        (
            {"scheduler": {"type": "pbt", "max_resource": 9}},
            "scheduler.type",
            ("'asha', 'sha' or 'hyperband'", "'pbt'"),
        ),
        (
            {"scheduler": {"max_resource": 9, "reduction_factor": 1}},
            "scheduler.reduction_factor",
            (">= 2", "got 1"),
        ),
        (
            {"scheduler": {"max_resource": 9, "reduction_factor": 2.5}},
            "scheduler.reduction_factor",
            ("integer",),
        ),
        (
            {"scheduler": {"max_resource": 2, "min_resource": 3}},
            "scheduler.max_resource",
            ("max_resource >= min_resource (3)",),
        ),
        (
            {"scheduler": {"max_resource": 9, "min_resource": 0}},
            "scheduler.min_resource",
            (">= 1",),
        ),
        ({"scheduler": "asha"}, "scheduler", ("'asha'",)),
        ({"provider": {"type": "azure"}}, "provider.type", ("'local', 'aws', 'gcp' or 'pool'",)),
        ({"provider": {"workers": 0}}, "provider.workers", (">= 1",)),
        ({"provider": {"slots": True}}, "provider.slots", ("integer",)),
        ({"provider": {"price_per_hour": -1}}, "provider.price_per_hour", (">= 0",)),
        ({"provider": {"price_per_hour": math.inf}}, "provider.price_per_hour", ("finite",)),
        ({"provider": {"billing_minimum_s": -1}}, "provider.billing_minimum_s", (">= 0",)),
        (
            {"provider": {"type": "aws", "machine_types": ["g2-standard-4"]}},
            "provider.machine_types",
            ("instance_types",),
        ),
        (
            {"provider": {"type": "gcp", "instance_types": ["g5.xlarge"]}},
            "provider.instance_types",
            ("machine_types",),
        ),
        (
            {"provider": {"type": "aws", "instance_types": []}},
            "provider.instance_types",
            ("at least 1",),
        ),
        ({"budget": {}}, "budget.time", ("no budget given",)),
        ({"budget": None}, "budget.time", ("no budget given",)),
        ({"budget": {"time": None, "cost": None}}, "budget.time", ("no budget given",)),
        ({"budget": {"time": "-10m"}}, "budget.time", ("'-10m'",)),
        ({"budget": {"time": 0}}, "budget.time", ("> 0",)),
        ({"budget": {"time": "10m", "cost": 0}}, "budget.cost", ("> 0",)),
        ({"budget": {"time": "10m", "cost": "lots"}}, "budget.cost", ("'lots'",)),
        ({"budget": "10m"}, "budget", ("mapping",)),
        ({"time_budget": 60}, "time_budget", ("given twice", "budget.time")),
        ({"gpus_per_trial": 2}, "gpus_per_trial", ("provider.slots (1)",)),
        ({"gpus_per_trial": -1}, "gpus_per_trial", (">= 0",)),
        ({"max_failures": -1}, "max_failures", (">= 0",)),
        ({"num_trials": 0}, "num_trials", (">= 1",)),
        ({"num_trials": "5"}, "num_trials", ("integer",)),
        ({"seed": True}, "seed", ("integer",)),
        ({"seed": -1}, "seed", (">= 0",)),
        ({"seed": 2**32}, "seed", ("< 4294967296",)),
        ({"mode": "maximize"}, "mode", ("'min' or 'max'",)),
        ({"metric": ""}, "metric", ("at least 1 character",)),
        ({"metric": 3}, "metric", ("string",)),
        ({"name": "../up"}, "name", ("A-Z a-z 0-9 . _ -", "'../up'")),
        ({"name": ".."}, "name", ("not only dots",)),
        ({"name": "x" * 65}, "name", ("1 to 64",)),
        (
            {"sampler": "cmaes"},
            "sampler",
            ("unknown sampler 'cmaes'", "allowed: tpe, random, grid"),
        ),
        ({"sampler": "grid"}, "sampler", ("grid or a choice", "lr")),
        ({"trainable": "train"}, "trainable", ("'package.module:function'", "'train'")),
        ({"trainable": "pkg.mod:fn()"}, "trainable", ("'package.module:function'",)),
        ({"trainable": 3}, "trainable", ("callable",)),
        ({"trainable": lambda params: None}, "trainable", ("two positional arguments", "(params)")),
        (
            {"space": {"lr": {"logunif": [1e-4, 1e-1]}}},
            "space.lr",
            ("unknown distribution 'logunif'",),
        ),
        (
            {"space": {"g": {"grid": [1, 2]}}, "sampler": "tpe"},
            "sampler",
            ("grid dimensions (g)", "'grid'"),
        ),
        (
            {"space": {"g": {"grid": [1, 2]}}, "sampler": optuna.samplers.RandomSampler()},
            "sampler",
            ("grid dimensions",),
        ),
        ({"space": None}, "space", ("mapping",)),
        ({"profile": {"seconds_per_step": 0}}, "profile.seconds_per_step", ("> 0", "got 0")),
        ({"profile": {"seconds_per_step": True}}, "profile.seconds_per_step", ("number",)),
        ({"profile": {"setup_s": -1}}, "profile.setup_s", (">= 0",)),
        ({"profile": {"checkpoint_s": math.inf}}, "profile.checkpoint_s", ("finite",)),
        ({"profile": {"restore_s": "1s"}}, "profile.restore_s", ("number",)),
        ({"profile": {"boot_s": [180, 60]}}, "profile.boot_s", ("0 <= low <= high",)),
        ({"profile": {"boot_s": -5}}, "profile.boot_s", ("0 <= low <= high",)),
        ({"profile": {"boot_s": [1, 2, 3]}}, "profile.boot_s", ("[low, high]",)),
        ({"profile": {"boot_s": "2m"}}, "profile.boot_s", ("[low, high]",)),
        (
            {"profile": {"speedup": "quadratic"}},
            "profile.speedup",
            ("'linear', 'resnet50_cifar10', 'babi_lstm' or 'resnet101'", "'quadratic'"),
        ),
        ({"profile": {"speedup": {1: 1.0, 2: 2.5}}}, "profile.speedup", ("<= 2",)),
        ({"profile": {"speedup": {2: 1.5}}}, "profile.speedup", ("s(1)",)),
        ({"profile": {"frm": "x"}}, "profile.frm", ("did you mean 'from'",)),
        ({"profile": {"from": ""}}, "profile.from", ()),
        ({"profile": {"step_costs": [3, 0]}}, "profile.step_costs", ("numbers > 0", "[3, 0]")),
        ({"profile": {"step_costs": "3,2"}}, "profile.step_costs", ("a list of numbers",)),
        ({"profile": {"step_costs": [True]}}, "profile.step_costs", ("numbers > 0",)),
        ({"profile": {"step_costs": [math.nan]}}, "profile.step_costs", ("numbers > 0",)),
        ({"profile": {"s_per_step": 1}}, "profile.s_per_step", ("unknown key", "seconds_per_step")),
        ({"profile": "fast"}, "profile", ("dictionary",)),
    ],
)
def test_sweep_errors(changes, field, fragments):
    with raises(field, *fragments):
        load_sweep(base(**changes))


def test_profile_section_defaults_forms_and_round_trip():
    cfg = load_sweep(base())
    assert cfg.profile == ProfileConfig()
    assert (cfg.profile.seconds_per_step, cfg.profile.setup_s, cfg.profile.speedup) == (
        1.0, 0.0, "linear")  # fmt: skip
    assert cfg.profile.boot_range("local") == (2.0, 2.0)
    assert cfg.profile.boot_range("aws") == cfg.profile.boot_range("gcp") == (60.0, 180.0)
    assert load_sweep(base(profile=None)).profile == ProfileConfig()
    cfg = load_sweep(base(profile={"seconds_per_step": 2, "setup_s": 30, "checkpoint_s": 1.5,
                                   "restore_s": 4, "boot_s": 90, "speedup": "resnet101"}))
    assert cfg.profile.boot_s == (90.0, 90.0) and cfg.profile.boot_range("aws") == (90.0, 90.0)
    assert load_sweep(base(profile={"boot_s": [30, 120]})).profile.boot_s == (30.0, 120.0)
    stored = json.loads(json.dumps(cfg.to_json_dict(), allow_nan=False))
    assert stored["profile"] == {"seconds_per_step": 2.0, "setup_s": 30.0, "checkpoint_s": 1.5,
                                 "restore_s": 4.0, "boot_s": [90.0, 90.0],
                                 "speedup": "resnet101", "step_costs": [],
                                 "pace_quantiles": {}, "promoted_pace_quantiles": {}}
    assert load_sweep(stored | {"trainable": train}) == cfg
    assert load_sweep(base()).to_json_dict()["profile"]["boot_s"] is None
    warm = load_sweep(base(profile={"seconds_per_step": 2, "step_costs": [3, 1.5]}))
    assert warm.profile.step_costs == (3.0, 1.5)
    stored = json.loads(json.dumps(warm.to_json_dict(), allow_nan=False))
    assert stored["profile"]["step_costs"] == [3.0, 1.5]
    assert load_sweep(stored | {"trainable": train}) == warm
    spread = load_sweep(base(profile={"pace_quantiles": {0.9: 1.4, 0.5: 0.95}}))
    assert spread.profile.pace_quantiles == {0.5: 0.95, 0.9: 1.4}     # sorted by quantile
    stored = json.loads(json.dumps(spread.to_json_dict(), allow_nan=False))
    assert load_sweep(stored | {"trainable": train}) == spread
    for bad in ({1.0: 2.0}, {0.5: 0}, [1.4], {"x": 1.0}):
        with pytest.raises(ConfigError, match="profile.pace_quantiles"):
            load_sweep(base(profile={"pace_quantiles": bad}))
        with pytest.raises(ConfigError, match="profile.promoted_pace_quantiles"):
            load_sweep(base(profile={"promoted_pace_quantiles": bad}))
    promoted = load_sweep(base(profile={"promoted_pace_quantiles": {0.9: 2.1, 0.5: 0.8}}))
    assert promoted.profile.promoted_pace_quantiles == {0.5: 0.8, 0.9: 2.1}
    assert profile_for(promoted).promoted_pace_quantiles == ((0.5, 0.8), (0.9, 2.1))
    stored = json.loads(json.dumps(promoted.to_json_dict(), allow_nan=False))
    assert load_sweep(stored | {"trainable": train}) == promoted


def test_sampler_choices_and_grid_handling():
    assert load_sweep(base(sampler="Random")).sampler == "random"
    tpe = optuna.samplers.TPESampler(seed=1)
    cfg = load_sweep(base(sampler=tpe))
    assert cfg.sampler is tpe
    assert cfg.to_json_dict()["sampler"].startswith("<sampler optuna.samplers")

    cfg = load_sweep(base(space={"a": grid([1, 2]), "b": {"grid": ["x", "y"]}, "c": 0.5}))
    assert cfg.sampler == "grid"  # chosen for the user, not recorded as their choice
    assert "sampler" not in cfg.model_fields_set
    assert cfg.grid_search_space() == {"a": [1, 2], "b": ["x", "y"]}
    assert cfg.fixed_params() == {"c": 0.5}
    assert cfg.distributions()["a"] == CategoricalDistribution([1, 2])
    assert load_sweep(cfg.to_json_dict() | {"trainable": train}) == cfg
    gs = optuna.samplers.GridSampler({"a": [1, 2], "b": ["x", "y"]})
    assert (
        load_sweep(base(space={"a": grid([1, 2]), "b": grid(["x", "y"])}, sampler=gs)).sampler is gs
    )

    # sampler 'grid' also runs over choice dimensions
    cfg = load_sweep(base(space={"h": choice([1, 2]), "k": 3}, sampler="grid"))
    assert cfg.grid_search_space() == {"h": [1, 2]}


def test_default_name_comes_from_the_trainable():
    assert load_sweep(base(trainable="examples.digits:train")).name == "digits-train"
    assert load_sweep(base(trainable="mod:Cls.run")).name == "mod-run"
    assert load_sweep(base(trainable=lambda params, ctx: None)).name == "test_config-lambda"


# -- resolving the trainable -------------------------------------------------------------------


def test_resolve_trainable_imports_from_the_search_path(tmp_path, train_module):
    before = list(sys.path)
    fn = resolve_trainable(f"{train_module}:train", [tmp_path])
    assert fn.__name__ == "train"
    assert resolve_trainable(f"{train_module}:Holder.train", [str(tmp_path)]).__qualname__ == (
        "Holder.train"
    )
    assert sys.path == before
    assert resolve_trainable(train) is train


def test_resolve_trainable_finds_the_package_a_sweep_file_sits_in(tmp_path, monkeypatch):
    package = f"pkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "model.py").write_text("def train(params, ctx):\n    return None\n")
    sweep = tmp_path / package / "sweep.yaml"
    sweep.write_text(INTERFACES_YAML.format(module=f"{package}.model"))
    monkeypatch.chdir(tmp_path.parent)
    try:
        assert load_sweep(sweep).resolve_trainable().__module__ == f"{package}.model"
    finally:
        for name in (package, f"{package}.model"):
            sys.modules.pop(name, None)


def test_resolve_trainable_imports_from_the_cwd(tmp_path, train_module, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_trainable(f"{train_module}:train").__name__ == "train"


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ("no_such_module_xyz:train", ("cannot import module 'no_such_module_xyz'",)),
        ("{mod}:missing", ("has no attribute 'missing'",)),
        ("{mod}:Holder.missing", ("has no attribute 'missing'", "Holder")),
        ("{mod}:NOT_CALLABLE", ("is not callable", "int")),
        ("{mod}:one_arg", ("two positional arguments", "(params)")),
        ("not a path", ("'package.module:function'",)),
        (42, ("callable",)),
    ],
)
def test_resolve_trainable_errors(tmp_path, train_module, spec, fragments):
    if isinstance(spec, str):
        spec = spec.format(mod=train_module)
    before = list(sys.path)
    with raises("trainable", *fragments):
        resolve_trainable(spec, [tmp_path])
    assert sys.path == before


def test_resolve_trainable_reports_failures_inside_the_module(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    broken, needy = (f"m_{uuid.uuid4().hex[:8]}" for _ in range(2))
    (tmp_path / f"{broken}.py").write_text("raise RuntimeError('boom')\n")
    (tmp_path / f"{needy}.py").write_text("import no_such_dependency_xyz\n")
    try:
        with raises("trainable", "raised RuntimeError: boom"):
            resolve_trainable(f"{broken}:train")
        with raises("trainable", f"importing module '{needy}'", "no_such_dependency_xyz"):
            resolve_trainable(f"{needy}:train")
    finally:
        for name in (broken, needy):
            sys.modules.pop(name, None)


# -- property-based: anything goes in, only ConfigError comes out ------------------------------

def _check_space_outcome(space):
    try:
        parsed = parse_space(space)
    except ConfigError as err:
        assert err.field.startswith("space"), str(err)
        return None
    for dim in parsed.values():
        assert isinstance(
            dim, optuna.distributions.BaseDistribution | Grid | bool | int | float | str
        )
    return parsed


@settings(max_examples=300, deadline=None)
@given(spaces)
def test_any_space_is_parsed_or_refused_with_a_space_error(space):
    _check_space_outcome(space)


@settings(max_examples=200, deadline=None)
@given(spaces)
def test_any_space_in_a_sweep_is_accepted_or_refused_with_a_space_error(space):
    try:
        cfg = load_sweep(base(space=space))
    except ConfigError as err:
        assert err.field.startswith("space"), str(err)
    else:
        json.dumps(cfg.to_json_dict(), allow_nan=False)
        again = load_sweep(cfg.to_json_dict() | {"trainable": "m:train"}).space
        assert again.keys() == cfg.space.keys()
        for name, dim in cfg.space.items():
            assert _same_dimension(again[name], dim), (name, again[name], dim)


def _same_dimension(a, b):
    # Optuna moves a stepped float's ``high`` down onto the step grid; doing that twice may
    # differ in the last bit, so the round trip of ``high`` is compared with a tolerance.
    if isinstance(a, optuna.distributions.FloatDistribution) and type(a) is type(b):
        return (a.low, a.step, a.log) == (b.low, b.step, b.log) and math.isclose(
            a.high, b.high, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


@settings(max_examples=300, deadline=None)
@given(budget_sections)
def test_any_budget_is_accepted_or_refused_with_a_budget_error(budget):
    try:
        cfg = load_sweep(base(budget=budget))
    except ConfigError as err:
        assert err.field.startswith("budget"), str(err)
    else:
        for value in (cfg.time_budget_s, cfg.cost_budget_usd):
            assert value is None or (math.isfinite(value) and value > 0)
        assert cfg.time_budget_s is not None or cfg.cost_budget_usd is not None


@settings(max_examples=200, deadline=None)
@given(budget_values, budget_values)
def test_any_duration_or_amount_is_parsed_or_refused(time_value, cost_value):
    for parse, value, field in ((parse_duration, time_value, "t"), (parse_money, cost_value, "c")):
        try:
            out = parse(value, field)
        except ConfigError as err:
            assert err.field == field
        else:
            assert out is None or (math.isfinite(out) and out > 0)


def test_a_stepped_float_range_loads_again_as_it_was_saved():
    # Optuna puts high on the step grid in decimal arithmetic; 3 steps of this size have no
    # float that stays on the grid, so a saved sweep used to load a step shorter.
    step = 1.3658625910310418
    cfg = load_sweep(base(space={"a": {"float": {"low": 0.0, "high": 4.1, "step": step}}}))
    again = load_sweep(cfg.to_json_dict() | {"trainable": "m:train"}).space
    assert again["a"].high == cfg.space["a"].high == 2 * step


def test_a_none_budget_override_removes_the_budget_whatever_the_sweep_is_given_as():
    from tuner import load_sweep

    base = {"trainable": "operator:add", "metric": "acc",
            "space": {"lr": {"loguniform": [1e-4, 0.1]}}, "scheduler": {"max_resource": 9},
            "budget": {"time": "10m", "cost": 2.0}}
    for sweep in (base, load_sweep(base)):
        cfg = load_sweep(sweep, time_budget=None)
        assert cfg.time_budget_s is None and cfg.cost_budget_usd == 2.0
        assert load_sweep(sweep, provider=None).time_budget_s == 600.0


@pytest.mark.parametrize(("provider", "field"), [
    ({"type": "pool"}, "provider.name"),
    ({"type": "pool", "name": "gpu a"}, "provider.name"),
    ({"type": "pool", "name": "a", "workers": 4}, "provider.workers"),
    ({"type": "pool", "name": "a", "slots": 2}, "provider.slots"),
    ({"type": "pool", "name": "a", "scaling": "plan"}, "provider.scaling"),
    ({"type": "pool", "name": "a", "wait_for_workers": "soon"}, "provider.wait_for_workers"),
    ({"type": "pool", "name": "a", "storage": "/mnt/shared"}, "provider.storage"),
    ({"type": "pool", "name": "a", "zone": "us-central1-a"}, "provider.zone"),
    ({"type": "local", "name": "a"}, "provider.name"),
    ({"type": "aws", "min_workers": 2}, "provider.min_workers"),
])
def test_pool_keys_are_checked(provider, field):
    from tuner import load_sweep

    base = {"trainable": "operator:add", "metric": "acc",
            "space": {"lr": {"loguniform": [1e-4, 0.1]}}, "scheduler": {"max_resource": 9}}
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_sweep({**base, "provider": provider})


def test_a_pool_sweep_plans_on_its_min_workers_at_no_price_unless_given():
    from tuner import load_sweep

    base = {"trainable": "operator:add", "metric": "acc",
            "space": {"lr": {"loguniform": [1e-4, 0.1]}}, "scheduler": {"max_resource": 9},
            "budget": {"time": "10m"}}
    p = load_sweep({**base, "provider": {"type": "pool", "name": "gpu-a", "min_workers": 3,
                                         "wait_for_workers": "90s"}}).provider
    assert (p.workers, p.price_per_hour, p.wait_for_workers_s, p.follows_plan) == (
        3, 0.0, 90.0, False)
    again = load_sweep({**base, "provider": p.model_dump(mode="json")}).provider
    assert again == p                          # a stored pool sweep loads back the same
    assert load_sweep({**base, "provider": {"type": "pool", "name": "a",
                                            "price_per_hour": 2.5}}).provider.price_per_hour == 2.5


def test_a_profile_from_an_experiment_and_a_measured_speedup_table_round_trip():
    from tuner import load_sweep

    base = {"trainable": "operator:add", "metric": "acc",
            "space": {"lr": {"loguniform": [1e-4, 0.1]}}, "scheduler": {"max_resource": 9},
            "budget": {"time": "10m"}}
    cfg = load_sweep({**base, "profile": {"from": "experiments/first", "restore_s": 2.0,
                                          "speedup": {1: 1.0, 2: 1.8, 4: 3.1}}})
    assert cfg.profile.from_ == "experiments/first"
    assert cfg.profile.model_fields_set == {"from_", "restore_s", "speedup"}
    stored = json.loads(json.dumps(cfg.to_json_dict()))
    assert stored["profile"]["from"] == "experiments/first"
    assert stored["profile"]["speedup"] == {"1": 1.0, "2": 1.8, "4": 3.1}
    again = load_sweep({**base, "profile": stored["profile"]})
    assert again.profile == cfg.profile
    assert "from" not in load_sweep(base).to_json_dict()["profile"]


def test_keep_warm_is_a_duration_for_cloud_vms_only():
    from tuner import load_sweep

    sweep = {"trainable": "operator:add", "metric": "acc",
             "space": {"lr": {"loguniform": [1e-4, 0.1]}}, "scheduler": {"max_resource": 9},
             "budget": {"time": "10m"}}
    aws = {"type": "aws", "storage": "s3://bucket-a/runs"}
    assert load_sweep({**sweep, "provider": aws}).provider.keep_warm_s == 0.0
    assert load_sweep({**sweep, "provider": {**aws, "keep_warm": 0}}).provider.keep_warm_s == 0
    assert load_sweep({**sweep, "provider": {**aws, "keep_warm": "10m"}}
                      ).provider.keep_warm_s == 600.0
    for bad in ("soon", -5, True):
        with pytest.raises(ConfigError, match=r"provider\.keep_warm"):
            load_sweep({**sweep, "provider": {**aws, "keep_warm": bad}})
    with pytest.raises(ConfigError, match=r"provider\.keep_warm.*cloud VMs"):
        load_sweep({**sweep, "provider": {"type": "local", "keep_warm": "10m"}})
