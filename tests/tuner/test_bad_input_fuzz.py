"""Bad input, generated: ``tune()`` arguments and sweep.yaml documents fed to the CLI.

Every case is either accepted, or refused with a :class:`ConfigError` (exit status 2 from the
CLI) whose field is the one that was broken: never a traceback, another exception or exit 1.
A refusal writes nothing and starts nothing, and an experiment never lands outside its root.

The documents are mostly valid: a valid sweep, varied within the schema, with one or two
fields broken (wrong types, out-of-range numbers, NaN/inf, bad durations, unknown keys, wrong
enum values, empty or huge spaces, bad distributions, scheduler and provider shapes), and for
the CLI also broken files (YAML syntax, not a mapping, not UTF-8, nested too deeply, alias
bombs).

Accepted cases stop where a sweep would start: ``elastune plan`` spends nothing by itself, and
for ``tune()`` / ``elastune run`` the one function that starts the broker and workers
(``tuner._tune._execute``) is replaced by one that records the experiment directory.

Generated cases: 300 (tune arguments) + 300 (plan documents) + 250 (run documents)
+ 200 (names and directories) = 1,050, plus the fixed regression cases below.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tuner._tune
from tests._strategies import budget_values, numbers, plausible_entries, spaces
from tests.trainables import quadratic
from tuner import tune
from tuner._config import _ALSO_ACCEPTED, TOP_LEVEL_KEYS, load_sweep
from tuner._errors import ConfigError
from tuner._store import Store
from tuner.cli import main

try:
    import psutil
except ImportError:  # then the directory checks alone stand for "nothing was started"
    psutil = None

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large,
                                                      HealthCheck.filter_too_much])
DELETE = object()
ANY = None  # expected fields unknown (random bytes, a truncated file): only the format counts

BASE = {
    "name": "fuzz",
    "trainable": "tests.trainables:quadratic",
    "metric": "score",
    "mode": "max",
    "space": {"x": {"uniform": [0.0, 1.0]}, "h": {"choice": [16, 32]}},
    "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 3, "reduction_factor": 3},
    "num_trials": 4,
    "budget": {"time": "2m", "cost": 1.0},
    "provider": {"type": "local", "workers": 2},
}
CLOUD = {
    "aws": {"type": "aws", "region": "us-east-1", "instance_types": ["g5.xlarge"],
            "storage": "s3://fuzz-bucket/sweeps"},
    "gcp": {"type": "gcp", "project": "fuzz-proj", "zone": "us-central1-a",
            "machine_types": ["g2-standard-4"], "storage": "gs://fuzz-bucket/sweeps"},
}
BAD_NAMES = ["../x", "/abs", "a/../../b", "..", ".", "...", "a\x00b", "x" * 65, "x" * 5000, "é",
             "名前", "a b", "a\nb", "", "-", ".hidden", "a/b", "a\\b", "~", "$HOME", "x\u202e",
             "con", "CON.txt", ".." + "/" * 3]
BAD_DURATIONS = ["-5s", "0s", "10x", "1h1h", "inf", "nan", "", " ", "1e3", "h", "m30", "-1",
                 "99999999999999999999999999d", "90s", "1h30m", "2 hours", "0.0000001s"]
BAD_MONEY = ["$", "-2", "lots", "0", "0.001", "$2.50", "1e999", "3 USD", "-0", "$-1", "∞"]

# -- what is broken, and which fields may then be named ------------------------------------------
# A mutation is (path, value, related): the document's entry at ``path`` becomes ``value`` (or
# is removed); a refusal must name ``path`` itself, something inside or above it, or one of
# the ``related`` fields it constrains (max_resource >= min_resource, gpus_per_trial <= slots,
# a cost budget covering one billing minimum, a grid space needing the grid sampler, ...).

_wrong_type = st.sampled_from([None, True, "3", [], {}, [1, 2], {"a": 1}, 1.5, "", -1])
_ints = numbers | st.sampled_from([0, -1, 1, 2, 3, 9, 27, 10**6, 10**6 + 1, 10**30, 2**63])
_safe_text = st.text(max_size=12)


def _m(path, values, *related):
    return st.tuples(st.just(path), values, st.just(frozenset(related)))


def _bad_space_entries():
    return st.sampled_from([
        {"loguniform": [0, 1]}, {"loguniform": [-1e-3, 1]}, {"uniform": [1, 0]},
        {"uniform": [math.nan, 1]}, {"uniform": [0, math.inf]}, {"randint": [5, 1]},
        {"randint": [1.5, 3]}, {"int": {"low": 0, "high": 8, "log": True}},
        {"int": {"low": 1, "high": 8, "step": 0}}, {"float": {"low": 0, "high": 1, "step": -1}},
        {"float": {"low": 1, "high": 2, "log": True, "step": 0.1}}, {"choice": []},
        {"choice": [[1]]}, {"choice": [1, 1]}, {"grid": []}, {"logunif": [1, 2]}, [1, 2, 3],
        None, math.nan, {"uniform": [0, 1], "choice": [1]}, {}, {"uniform": "0..1"},
        {"choice": list(range(5000))}, {"uniform": [-1e308, 1e308]},
        {"float": {"low": 0, "high": 1e300, "step": 1e-300}}, {"randint": [0, 10**30]},
        {"int": {"low": 1, "high": 5, "step": 10**25}}, {"grid": [1, 2]},
    ])


_space_values = (
    st.sampled_from([{}, None, "lr", [], {"": 1}, {"a": {"grid": [1, 2]}, "b": {"uniform": [0, 1]}},
                     {f"p{i}": {"uniform": [0, 1]} for i in range(500)},
                     {"g": {"grid": [1, 2]}, "k": 3}])
    | st.dictionaries(st.text(max_size=4), plausible_entries | _bad_space_entries(), max_size=4)
)
_scheduler_values = st.sampled_from(["asha", None, [], 3, {}, {"type": "asha"},
                                     {"max_resource": 3, "reduction_factor": 1}]) | \
    st.dictionaries(st.sampled_from(["type", "min_resource", "max_resource",
                                     "reduction_factor", "rungs"]), _ints, max_size=4)
_provider_values = st.sampled_from(["azure", "aws", "gcp", "local", None, [], 3, {},
                                    {"type": "local", "workers": 0}, CLOUD["aws"], CLOUD["gcp"],
                                    {"type": "aws", "storage": "gs://b-b/x"},
                                    {"type": "gcp", "instance_types": ["g5.xlarge"]},
                                    {"type": "aws", "region": "mars-1"},
                                    {"type": "aws", "instance_types": []},
                                    {"type": "aws", "instance_types": ["nope"]},
                                    {"type": "gcp", "zone": "x"}])
_profile_values = st.sampled_from(["fast", None, [], {}, {"s_per_step": 1}]) | \
    st.fixed_dictionaries({}, optional={
        "seconds_per_step": numbers, "setup_s": numbers, "checkpoint_s": numbers,
        "restore_s": numbers, "boot_s": numbers | st.lists(numbers, max_size=3),
        "speedup": st.sampled_from(["linear", "quadratic", "resnet101", "", None]),
        "step_costs": numbers | st.lists(numbers, max_size=3)})
_unknown_keys = (
    st.text(min_size=1, max_size=12).filter(
        lambda k: k not in TOP_LEVEL_KEYS and k not in _ALSO_ACCEPTED)
    | st.sampled_from(["colour", "num_trial", "schedular", "Budget", "timeout", None, 1, 1.5,
                       True, False])
)
_yaml_budget = (
    st.sampled_from([{}, None, "10m", [], {"time": None, "cost": None}, {"tim": "1m"}])
    | st.fixed_dictionaries({}, optional={
        "time": numbers | st.sampled_from(BAD_DURATIONS),
        "cost": numbers | st.sampled_from(BAD_MONEY)})
)


def _mutations(python: bool):
    """Single-field breakages; ``python`` adds values only a Python dict can hold."""
    space = _space_values | (spaces if python else st.nothing())
    budget = _yaml_budget | (budget_values if python else st.nothing())
    entry = plausible_entries | _bad_space_entries() | numbers
    return st.one_of(
        _m(("name",), st.sampled_from(BAD_NAMES) | _safe_text | _wrong_type),
        _m(("name",), st.just(DELETE)),
        _m(("trainable",), st.sampled_from([
            "train", "pkg.mod:fn()", "tests.trainables:nothing_here", "tests.nowhere:train",
            "os:getcwd", ":", "a:b:c", "", "tests.trainables:quadratic ", "tests.trainables",
            "tests.trainables:quadratic\n", "é:f"]) | _wrong_type | st.just(DELETE)),
        _m(("metric",), st.sampled_from(["", "ok", DELETE]) | _wrong_type | _safe_text),
        _m(("mode",), st.sampled_from(["maximize", "MAX", "min", "max", "", DELETE])
           | _wrong_type | _safe_text),
        _m(("space",), space | st.just(DELETE), "sampler"),
        _m(("space", "x"), entry, "sampler", "space"),  # grid next to sampled: either named
        _m(("space", "h"), entry | st.just(DELETE), "sampler", "space"),
        # (a first rung, or a profile, too long for the time budget is refused on it)
        _m(("scheduler",), _scheduler_values | st.just(DELETE), "budget"),
        _m(("scheduler", "type"), st.sampled_from(["sha", "hyperband", "ASHA", "pbt", "", DELETE])
           | _wrong_type),
        _m(("scheduler", "min_resource"), _ints | st.just(DELETE), "scheduler.max_resource",
           "budget"),
        _m(("scheduler", "max_resource"), _ints | st.just(DELETE)),
        _m(("scheduler", "reduction_factor"), _ints | st.just(DELETE)),
        _m(("num_trials",), _ints | _wrong_type | st.just(DELETE)),
        _m(("sampler",), st.sampled_from(["cmaes", "grid", "GRID", "random", "Random", "",
                                          DELETE]) | _wrong_type),
        _m(("seed",), _ints | st.sampled_from([2**32, 2**32 - 1, True, "1", DELETE])),
        _m(("gpus_per_trial",), _ints | _wrong_type, "provider"),
        _m(("max_failures",), _ints | _wrong_type),
        _m(("budget",), budget | st.just(DELETE)),
        _m(("budget", "time"), numbers | st.sampled_from(BAD_DURATIONS) | _wrong_type
           | st.just(DELETE), "budget"),
        _m(("budget", "cost"), numbers | st.sampled_from(BAD_MONEY) | _wrong_type
           | st.just(DELETE), "budget"),
        _m(("provider",), _provider_values | st.just(DELETE),
           "budget", "gpus_per_trial", "broker_url"),
        _m(("provider", "type"), st.sampled_from(["aws", "gcp", "azure", "LOCAL", "", DELETE])
           | _wrong_type, "budget", "gpus_per_trial", "broker_url", "provider"),
        _m(("provider", "workers"), _ints | _wrong_type),
        _m(("provider", "slots"), _ints | _wrong_type, "gpus_per_trial"),
        _m(("provider", "price_per_hour"), numbers | _wrong_type, "budget"),
        _m(("provider", "billing_minimum_s"), numbers | _wrong_type, "budget"),
        _m(("provider", "storage"), st.sampled_from(["s3://bkt/x", "s3://B/x", "file:///x",
                                                     "s3://bkt/x\n", ""]) | _wrong_type),
        _m(("provider", "spot"), st.sampled_from([True, False, "yes", 1, None])),
        _m(("provider", "region"), st.sampled_from(["us-east-1", "mars-1", ""]) | _wrong_type),
        _m(("provider", "instance_types"), st.sampled_from([["g5.xlarge"], [], [3], "g5"])),
        _m(("provider", "subnet_ids"), st.sampled_from([{"a": 1}, {"a": "s"}, [], {1: "s"}])),
        _m(("provider", "scaling"), st.sampled_from(["plan", "static", "auto", None, 1])),
        _m(("provider", "colour"), numbers),
        _m(("profile",), _profile_values, "gpus_per_trial", "provider", "budget"),
        _m(("segment_timeout",), numbers | st.sampled_from(BAD_DURATIONS) | _wrong_type),
        _unknown_keys.flatmap(lambda key: _m((key,), numbers | _safe_text)),
        _m(("scheduler",), _unknown_keys.flatmap(
            lambda key: st.just({"max_resource": 3, key: 1}))),
    )


def _apply(doc, path, value):
    target = doc
    for key in path[:-1]:
        if not isinstance(target, dict) or not isinstance(target.get(key), dict):
            return  # a mutation before this one replaced the section: nothing to reach
        child = target[key] = dict(target[key])
        target = child
    if not isinstance(target, dict):
        return
    if value is DELETE:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = copy.deepcopy(value)


@st.composite
def documents(draw, python=False):
    """(sweep dict, fields a refusal may name): a valid sweep, varied, then 0-2 breakages."""
    doc = copy.deepcopy(BASE)
    doc["scheduler"]["type"] = draw(st.sampled_from(["asha", "sha", "hyperband"]))
    doc["mode"] = draw(st.sampled_from(["min", "max"]))
    doc["num_trials"] = draw(st.sampled_from([None, 1, 4, 9, 30]))
    if draw(st.booleans()):
        doc["sampler"] = draw(st.sampled_from(["tpe", "random"]))
    expected = set()
    if draw(st.integers(0, 5)) == 0:
        doc["provider"] = dict(CLOUD[draw(st.sampled_from(["aws", "gcp"]))])
        expected.add("broker_url")  # a cloud sweep runs only with a broker its VMs reach
    if draw(st.booleans()):
        doc["profile"] = {"seconds_per_step": draw(st.sampled_from([0.5, 1, 30])),
                          "boot_s": draw(st.sampled_from([2, [60, 180]]))}
    if python and draw(st.booleans()):
        doc["trainable"] = quadratic
    for path, value, related in draw(st.lists(_mutations(python), max_size=2)):
        _apply(doc, path, value)
        expected |= {".".join(map(str, path)), *related}
    return doc, frozenset(expected)


def _names_field(field, expected):
    """Whether a refusal's field is one of the broken ones (or inside or above one)."""
    if expected is ANY:
        return True
    return any(field == p or field.startswith(p + ".") or p.startswith(field + ".")
               for p in expected)


# -- broken files ------------------------------------------------------------------------------

_SNIPPETS = ["a: [1, 2\n", "}{\n", "\t- x\n", "? [a]\n: 1\n", "*nowhere\n", "b: 'open\n",
             "- item\n", "c: &x [*x]\n", "%YAML 9.9\n", "'\n", "!!python/name:os.system x\n"]
_NON_MAPPINGS = ["- a\n- b\n", "just text\n", "null\n", "", "---\n...\n", "42\n",
                 "a: 1\n---\nb: 2\n", "[1, 2]\n", "!!binary aGVsbG8=\n"]
_BOMB = "".join(f"z{i}: &z{i} [{', '.join([f'*z{i - 1}' if i else 'x'] * 10)}]\n"
                for i in range(9))


def _as_read(field: str) -> str:
    """A field path as a sweep file names it once dumped and loaded again."""
    parts = []
    for part in field.split("."):
        try:
            parts.append(str(next(iter(yaml.safe_load(
                yaml.safe_dump({part: None}, allow_unicode=True))))))
        except (yaml.YAMLError, StopIteration, TypeError):
            parts.append(part)
    return ".".join(parts)


@st.composite
def sweep_files(draw):
    """(bytes of a sweep file, fields a refusal may name)."""
    doc, expected = draw(documents())
    text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
    kind = draw(st.sampled_from(["plain"] * 20 + ["bom", "bad-utf8", "utf16", "latin1",
                                                  "snippet", "snippet", "non-mapping", "deep",
                                                  "deep-doc", "bomb", "truncated", "random"]))
    # A key with a YAML line break in it (NEL, U+2028, ...) is dumped in a way that reads
    # back folded (NEL and the indentation after it become one space): the refusal names the
    # key as read.
    expected = expected | {_as_read(f) for f in expected}
    config = expected | {"config"}
    if kind == "plain":
        return text.encode(), expected
    if kind == "bom":
        return b"\xef\xbb\xbf" + text.encode(), expected
    if kind == "bad-utf8":
        raw = text.encode()
        at = draw(st.integers(0, len(raw)))
        bad = draw(st.sampled_from([b"\xff", b"\xfe", b"\xc3\x28", b"\x80", b"\xed\xa0\x80"]))
        return raw[:at] + bad + raw[at:], frozenset({"config"})
    if kind == "utf16":
        return text.encode("utf-16"), frozenset({"config"})
    if kind == "latin1":
        # A character latin-1 lacks becomes "?", in a key too: the refusal names it so.
        replaced = {f.encode("latin-1", errors="replace").decode("latin-1") for f in expected}
        return text.encode("latin-1", errors="replace"), config | replaced
    if kind == "snippet":
        lines = text.splitlines(keepends=True)
        at = draw(st.integers(0, len(lines)))
        return "".join([*lines[:at], draw(st.sampled_from(_SNIPPETS)), *lines[at:]]).encode(), \
            config
    if kind == "non-mapping":
        return draw(st.sampled_from(_NON_MAPPINGS)).encode(), frozenset({"config"})
    if kind == "deep":
        depth = draw(st.sampled_from([50, 900, 2000, 20000]))
        return (text + "deep_key: " + "[" * depth + "]" * depth + "\n").encode(), \
            config | {"deep_key"}
    if kind == "deep-doc":
        depth = draw(st.sampled_from([10, 5000]))
        return ("{a: " * depth + "1" + "}" * depth + "\n").encode(), frozenset({"config", "a"})
    if kind == "bomb":
        return (text + _BOMB).encode(), config | {f"z{i}" for i in range(9)}
    if kind == "truncated":
        raw = text.encode()
        return raw[:draw(st.integers(0, len(raw)))], ANY
    return draw(st.binary(max_size=200)), ANY


# -- the sandbox: a fresh directory per case, its listing compared --------------------------------


class Sandbox:
    """``base/docs`` holds the sweep files; the command runs in ``base/w/a/b``; everything
    else under ``base`` is what a case may have written."""

    def __init__(self, parent: Path) -> None:
        self.base = Path(tempfile.mkdtemp(dir=parent))
        self.docs = self.base / "docs"
        self.cwd = self.base / "w" / "a" / "b"
        self.docs.mkdir()
        self.cwd.mkdir(parents=True)
        self.root = self.cwd / tuner._tune.DEFAULT_ROOT

    def listing(self) -> set[Path]:
        found = set()
        for folder, dirs, files in os.walk(self.base):
            if Path(folder) == self.base:
                dirs[:] = [d for d in dirs if d != "docs"]
            found.update(Path(folder, n) for n in dirs + files)
        return found

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _children() -> set[int]:
    if psutil is None:
        return set()
    return {p.pid for p in psutil.Process().children(recursive=True)}


class _Accepted(BaseException):  # not an Exception: nothing on the way may swallow it
    def __init__(self, exp_dir: Path) -> None:
        super().__init__(exp_dir)
        self.exp_dir = exp_dir


def _start_nothing(*args, **kwargs):
    """Stands in for ``tuner._tune._execute``: the input passed validation, the experiment
    directory and store exist, and the broker and workers would start now."""
    for arg in args:
        if isinstance(arg, Store):
            arg.close()
    raise _Accepted(next(a for a in args if isinstance(a, Path)))


@contextlib.contextmanager
def _case(sandboxes):
    """Run one case in a fresh sandbox: cwd inside it, ``_execute`` replaced, and on the way
    out the new processes and new paths are handed to the checks."""
    box = Sandbox(sandboxes)
    before_paths, before_procs = box.listing(), _children()
    outcome = {}
    old = os.getcwd()
    os.chdir(box.cwd)
    try:
        with mock.patch.object(tuner._tune, "_execute", _start_nothing):
            yield box, outcome
    finally:
        os.chdir(old)
        outcome["new_paths"] = box.listing() - before_paths
        outcome["new_procs"] = _children() - before_procs
        box.remove()
    assert not outcome["new_procs"], f"processes were started: {outcome['new_procs']}"


def _check_placement(box: Sandbox, exp_dir: Path, given_dir, new_paths: set[Path]) -> None:
    """Property 3: the experiment lands strictly inside the root (no directory given) or
    exactly at the given directory, and nothing is written anywhere else."""
    event("accepted")
    exp = (box.cwd / exp_dir).resolve()
    if given_dir is None:
        root = box.root.resolve()
        assert root in exp.parents, (exp, root)
    else:
        assert exp == (box.cwd / Path(given_dir)).resolve(), (exp, given_dir)
    for path in new_paths:
        resolved = path.resolve()
        assert resolved == exp or exp in resolved.parents or resolved in exp.parents, (
            f"{path} written outside the experiment directory {exp}")


def _check_refusal(err: ConfigError, expected, new_paths) -> None:
    assert isinstance(err, ConfigError)
    event(f"refused: {err.field.split('.')[0][:20]}")
    assert str(err).startswith(f"{err.field}: "), str(err)
    assert _names_field(err.field, expected), f"expected one of {sorted(expected)}: {err}"
    assert not new_paths, f"a refusal wrote {sorted(map(str, new_paths))}"


def _run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    accepted = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except _Accepted as exc:
            code, accepted = 0, exc.exp_dir
    return code, out.getvalue(), err.getvalue(), accepted


def _check_cli(code, out, err, expected, json_out, new_paths) -> None:
    assert "Traceback" not in err and "Traceback" not in out, err
    assert code in (0, 2), f"exit {code}: {err}"
    event("accepted" if code == 0 else f"refused: {err[7:].split(':')[0].split('.')[0][:20]}")
    if code == 2:
        assert err.startswith("error: ") or "Usage:" in err, err
        if err.startswith("error: "):
            field = err[len("error: "):].split(": ", 1)[0]
            ok = _names_field(field, expected) or any(
                err.startswith(f"error: {p}{sep}") for p in expected or () for sep in ".:")
            assert ok, f"expected one of {sorted(expected)}: {err}"
        if json_out:
            assert out == "", out
        assert not new_paths, f"a refusal wrote {sorted(map(str, new_paths))}"


# -- (a) tune() arguments ------------------------------------------------------------------------

_UNSET = tuner._tune._UNSET
_ABSENT = object()


def _sometimes(values, otherwise=_ABSENT, one_in=4):
    """``values`` one time in ``one_in``, else ``otherwise``: a broken argument per case is
    plenty, or the sweep's own breakages would never get their turn."""
    return st.integers(1, one_in).flatmap(lambda n: values if n == 1 else st.just(otherwise))


_brokers = st.sampled_from([
    "", "redis://", "http://x", "redis://:pw@[::1/0", "redis://:p\x00w@localhost/0",
    "rediss://:pw@broker.example.com:6380/0", "redis://:pw@127.0.0.1:6379/0",
    "redis://broker.example.com/0", "unix:///tmp/x.sock", "redis://:pw@host:99999/0",
    "redis://:pw@localhost/db", "redis://user@localhost/0", 5, b"redis://x", ["x"],
]) | st.text(max_size=30)
_configs = st.sampled_from([None, 3, [], "no/such/sweep.yaml", ".", b"x.yaml", {"a": 1}, ()])


@st.composite
def _relative_dirs(draw):
    """Directory arguments that, resolved from the sandbox's cwd (three levels down), stay
    inside the sandbox; some of them can name no directory at all."""
    parts = draw(st.lists(st.sampled_from(["..", ".", "exp", "a", "é", " ", "x" * 300,
                                           "d\x00", "run-1", "名前"]), max_size=4))
    depth = 3
    for part in parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 1:
            parts = [p for p in parts if p != ".."]
            break
    return "/".join(parts)


_dirs = st.one_of(
    st.none(), _relative_dirs(), _relative_dirs().map(lambda d: ("abs", d)),
    _relative_dirs().map(lambda d: ("path", d)), st.sampled_from([5, b"exp", ["exp"], ""]),
)


def _dir_argument(value, box: Sandbox):
    if isinstance(value, tuple):
        kind, rel = value
        return str(box.cwd.parent / rel) if kind == "abs" else Path(rel or ".")
    return value


@settings(FUZZ, max_examples=300)
@given(data=st.data())
@pytest.mark.slow
def test_tune_arguments_are_accepted_or_refused_naming_the_field(sandboxes, data):
    if data.draw(st.integers(0, 9)) == 0:
        config, expected = data.draw(_configs), frozenset({"config", "a"})
    else:
        config, expected = data.draw(documents(python=True))
    args = []
    time_budget = data.draw(_sometimes(budget_values | st.sampled_from(["10m", 60, None]),
                                       otherwise=_UNSET))
    cost_budget = data.draw(_sometimes(budget_values | st.sampled_from([2.5, "$3", None]),
                                       otherwise=_UNSET))
    if time_budget is not _UNSET:
        expected |= {"time_budget", "budget"}
    if cost_budget is not _UNSET:
        expected |= {"cost_budget", "budget"}
    kwargs = {}
    for key, values in [("experiment_dir", _dirs), ("seed", _ints | st.none()),
                        ("broker_url", _brokers),
                        ("name", st.sampled_from(BAD_NAMES) | _safe_text)]:
        kwargs[key] = data.draw(_sometimes(values))
    key, values = data.draw(st.sampled_from([
        ("observer", st.sampled_from([5, None, print])),
        ("insecure_broker", st.sampled_from([True, False, "yes"])),
        ("colour", st.just("blue")), ("time_budgets", st.just(60)), ("budget", _yaml_budget),
        ("provider", st.sampled_from(["aws", "local", "gcp", "azure", None, 3])),
    ]))
    kwargs[key] = data.draw(_sometimes(values))
    kwargs = {k: v for k, v in kwargs.items() if v is not _ABSENT}
    expected |= set(kwargs)
    if "provider" in kwargs:
        expected |= {"broker_url", "budget", "gpus_per_trial"}
    with _case(sandboxes) as (box, outcome):
        if "experiment_dir" in kwargs:
            kwargs["experiment_dir"] = _dir_argument(kwargs["experiment_dir"], box)
        if time_budget is not _UNSET:
            args.append(time_budget)
        if cost_budget is not _UNSET:
            args += [_UNSET] * (1 - len(args)) + [cost_budget]
        try:
            tune(config, *args, **kwargs)
        except _Accepted as exc:
            outcome["accepted"] = exc.exp_dir
        except ConfigError as exc:
            outcome["refused"] = exc
    if "refused" in outcome:
        _check_refusal(outcome["refused"], expected, outcome["new_paths"])
    else:
        _check_placement(box, outcome["accepted"], kwargs.get("experiment_dir"),
                         outcome["new_paths"])


# -- (b) sweep files through the CLI -------------------------------------------------------------


@settings(FUZZ, max_examples=300)
@given(case=sweep_files(), time_budget=_sometimes(st.sampled_from(BAD_DURATIONS), None, 5),
       cost_budget=_sometimes(st.sampled_from(BAD_MONEY), None, 5))
@pytest.mark.slow
def test_plan_json_accepts_or_exits_2_naming_the_field(sandboxes, case, time_budget, cost_budget):
    raw, expected = case
    argv_extra = []
    if time_budget is not None:
        argv_extra += ["--time-budget", time_budget]
        expected = ANY if expected is ANY else expected | {"time_budget", "budget"}
    if cost_budget is not None:
        argv_extra += ["--cost-budget", cost_budget]
        expected = ANY if expected is ANY else expected | {"cost_budget", "budget"}
    with _case(sandboxes) as (box, outcome):
        sweep = box.docs / "sweep.yaml"
        sweep.write_bytes(raw)
        outcome["result"] = _run_cli(["plan", str(sweep), "--json", *argv_extra])
    code, out, err, accepted = outcome["result"]
    assert accepted is None, "plan must not get as far as starting a sweep"
    _check_cli(code, out, err, expected, True, outcome["new_paths"])
    assert not outcome["new_paths"], "plan wrote files"
    if code == 0:
        doc = json.loads(out)
        assert isinstance(doc, dict) and "feasible" in doc and out.count("\n") == 1, out


@settings(FUZZ, max_examples=250)
@given(case=sweep_files(), json_out=st.sampled_from([True, True, True, False]),
       directory=_sometimes(_relative_dirs().filter(lambda d: "\x00" not in d), None, 3),
       provider=_sometimes(st.sampled_from(["local", "aws", "gcp", "azure", ""]), None, 5),
       broker=_sometimes(st.sampled_from(["rediss://:pw@broker.example.com:6380/0",
                                          "redis://broker.example.com/0", "http://x", ""]),
                         None, 4))
@pytest.mark.slow
def test_run_accepts_or_exits_2_writes_and_starts_nothing(sandboxes, case, json_out, directory,
                                                          provider, broker):
    raw, expected = case
    argv_extra = ["--json"] if json_out else []
    if directory is not None:
        argv_extra += ["--dir", directory]
    if provider is not None:
        argv_extra += ["--provider", provider]
    if broker is not None:
        argv_extra += ["--broker", broker]
    if expected is not ANY:
        # a cloud sweep needs a reachable broker with a password and object storage
        expected = expected | {"broker_url", "provider.storage"} | (
            {"experiment_dir"} if directory is not None else set()) | (
            {"provider", "budget", "gpus_per_trial"} if provider is not None else set())
    with _case(sandboxes) as (box, outcome):
        sweep = box.docs / "sweep.yaml"
        sweep.write_bytes(raw)
        outcome["result"] = _run_cli(["run", str(sweep), *argv_extra])
    code, out, err, accepted = outcome["result"]
    _check_cli(code, out, err, expected, json_out, outcome["new_paths"])
    if accepted is not None:
        _check_placement(box, accepted, directory, outcome["new_paths"])
    else:
        assert code == 2, (code, err)


# -- (c) experiment names and directories ------------------------------------------------------


_names = (
    st.sampled_from(BAD_NAMES)
    | st.lists(st.sampled_from(["..", ".", "a", "", "/", "b", "\x00", "é"]), max_size=5).map(
        "/".join)
    | st.from_regex(r"[A-Za-z0-9._-]{1,70}", fullmatch=True)
    | st.text(max_size=80)
)


@settings(FUZZ, max_examples=200)
@given(name=_names, directory=_dirs, via_cli=st.booleans())
@pytest.mark.slow
def test_names_and_directories_stay_inside_their_root(sandboxes, name, directory, via_cli):
    with _case(sandboxes) as (box, outcome):
        given_dir = _dir_argument(directory, box)
        if via_cli and (given_dir is None or (isinstance(given_dir, str | Path)
                                              and "\x00" not in str(given_dir)
                                              and str(given_dir))):
            sweep = box.docs / "sweep.yaml"
            sweep.write_text(yaml.safe_dump({**BASE, "name": name}, allow_unicode=True))
            argv = ["run", str(sweep), "--json"]
            if given_dir is not None:
                argv += ["--dir", str(given_dir)]
            code, out, err, accepted = _run_cli(argv)
            outcome["cli"] = (code, out, err)
            if accepted is not None:
                outcome["accepted"] = accepted
        else:
            try:
                tune(dict(BASE), name=name, experiment_dir=given_dir)
            except _Accepted as exc:
                outcome["accepted"] = exc.exp_dir
            except ConfigError as exc:
                outcome["refused"] = exc
    expected = frozenset({"name", "experiment_dir"})
    if "cli" in outcome and "accepted" not in outcome:
        _check_cli(*outcome["cli"], expected, True, outcome["new_paths"])
        assert outcome["cli"][0] == 2, outcome["cli"]
    elif "refused" in outcome:
        _check_refusal(outcome["refused"], expected, outcome["new_paths"])
    else:
        _check_placement(box, outcome["accepted"],
                         None if given_dir is None else str(given_dir), outcome["new_paths"])
        if given_dir is None:  # the name is the directory's: it must be a plain one
            folder = outcome["accepted"].name
            assert "/" not in name and "\x00" not in name and name not in ("", ".", "..")
            assert folder.startswith(f"{name}-"), (folder, name)


# -- fixed regression cases (each was a traceback, an exit 1 or a hang before) -------------------


def _yaml(**changes):
    doc = copy.deepcopy(BASE)
    for key, value in changes.items():
        _apply(doc, tuple(key.split("__")), value)
    return yaml.safe_dump(doc, sort_keys=False)


REGRESSIONS = {
    "a key that is not a string": (_yaml() + "1: x\n", "1"),
    "a null key in a section": (_yaml().replace("type: asha", "null: asha"), "scheduler.None"),
    "a provider key that is not a string": (_yaml(provider={"type": "local", 7: 1}),
                                            "provider.7"),
    "a profile key that is not a string": (_yaml(profile={1.5: 1}), "profile.1.5"),
    "nested too deeply": (_yaml() + "deep: " + "[" * 5000 + "]" * 5000 + "\n", "config"),
    "a document nested too deeply": ("{a: " * 3000 + "1" + "}" * 3000, "config"),
    "an alias bomb": (_yaml() + _BOMB, "config"),
    "an alias inside its own anchor": (_yaml() + "loop: &l [*l]\n", "config"),
    "ten to the twentieth trials": (_yaml(num_trials=10**20), "num_trials"),
    "one trial too many": (_yaml(num_trials=1_000_001), "num_trials"),
    "steps past a float's whole numbers": (_yaml(scheduler__max_resource=10**27),
                                           "scheduler.max_resource"),
    "a step of 1e300 seconds": (_yaml(profile={"seconds_per_step": 1e300}),
                                "profile.seconds_per_step"),
    "a boot of 1.7e308 seconds": (_yaml(profile={"boot_s": 1.7e308}), "profile.boot_s"),
    "a boot of ten to the four hundredth": (_yaml(profile={"boot_s": 10**400}),
                                            "profile.boot_s"),
}


@pytest.mark.parametrize("case", sorted(REGRESSIONS))
def test_known_bad_documents(case, tmp_path, capsys, monkeypatch):
    text, field = REGRESSIONS[case]
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text)
    monkeypatch.chdir(tmp_path)
    for command in (["plan", str(sweep), "--json"], ["run", str(sweep), "--json"]):
        assert main(command) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"error: {field}: "), err
    assert sorted(os.listdir(tmp_path)) == ["sweep.yaml"]


@pytest.mark.parametrize("changes", [
    # the fastest plan takes more than 2**53 seconds: its wall was lost to float rounding
    {"scheduler__max_resource": 10**9, "scheduler__reduction_factor": 2, "num_trials": 100,
     "profile": {"seconds_per_step": 365 * 86400}},
    {"scheduler__max_resource": 10**9, "num_trials": None,
     "profile": {"seconds_per_step": 365 * 86400, "boot_s": 365 * 86400}},
])
def test_plans_of_absurd_sizes_are_planned(changes, tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(_yaml(**changes))
    assert main(["plan", str(sweep), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["feasible"] in (True, False)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"experiment_dir": "a\x00b"}, "experiment_dir"),
    ({"experiment_dir": 5}, "experiment_dir"),
    ({"experiment_dir": b"exp"}, "experiment_dir"),
    ({"experiment_dir": ""}, "experiment_dir"),
    ({"experiment_dir": "x" * 300}, "experiment_dir"),
    ({"experiment_dir": "deep/" + "y" * 300 + "/z"}, "experiment_dir"),
    ({"experiment_dir": "sweep.yaml/exp"}, "experiment_dir"),
    ({"experiment_dir": "."}, "experiment_dir"),           # not empty: sweep.yaml
    ({"experiment_dir": "/"}, "experiment_dir"),
    ({"experiment_dir": "a\x00b", "resume": True}, "experiment_dir"),
    ({"broker_url": 5}, "broker_url"),
    ({"broker_url": "redis://:pw@[::1/0"}, "broker_url"),
    ({"broker_url": "redis://:p\x00w@localhost/0"}, "broker_url"),
    ({"observer": 5}, "observer"),
    ({"verbose": 3}, "verbose"),
    ({"verbose": "yes", "resume": True, "experiment_dir": "exp"}, "verbose"),
    ({"insecure_broker": "yes"}, "insecure_broker"),
    ({"name": "../x"}, "name"),
    ({"config": {**BASE, "provider": {"type": "local", "workers": 1025}}}, "provider.workers"),
    ({"config": {**BASE, "provider": {"type": "aws", "workers": 100_001}}}, "provider.workers"),
])
def test_known_bad_tune_arguments(kwargs, field, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text(_yaml())
    with mock.patch.object(tuner._tune, "_execute", _start_nothing), \
            pytest.raises(ConfigError) as info:
        config = kwargs.pop("config", dict(BASE))
        tune(config, **kwargs)
    assert info.value.field == field, str(info.value)
    assert sorted(os.listdir(tmp_path)) == ["sweep.yaml"]


def test_a_directory_under_a_file_is_refused_and_nothing_is_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    with mock.patch.object(tuner._tune, "_execute", _start_nothing), \
            pytest.raises(ConfigError) as info:
        tune(dict(BASE), experiment_dir="file/exp")
    assert info.value.field == "experiment_dir"
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_load_sweep_refuses_a_python_config_nested_too_deeply():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ConfigError) as info:
        load_sweep({**BASE, "metric": deep})
    assert info.value.field in ("config", "metric"), str(info.value)
