"""The package layout the architecture asks for: import directions and lazy cloud SDKs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"tuner", "budgets", "cloud", "worker"}
ALLOWED = {
    "tuner": {"budgets", "cloud", "worker"},
    "cloud": {"budgets", "worker"},       # (worker.records only: see below)
    "worker": set(),
    "budgets": set(),
}


def _modules(package: str) -> set[str]:
    """The modules of ours that ``package`` imports (absolute imports, dotted names)."""
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found |= {n for n in names if n.split(".")[0] in OURS}
    return found


def _imports(package: str) -> set[str]:
    return {m.split(".")[0] for m in _modules(package)} - {package}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_import_direction(package):
    assert _imports(package) <= ALLOWED[package]


def test_the_records_are_the_only_part_of_worker_that_cloud_imports():
    assert {m for m in _modules("cloud") if m.startswith("worker")} <= {
        m for m in _modules("cloud") if m.startswith("worker.records")}
    assert not {m for m in _modules("worker/records") if not m.startswith("worker.records")}


def test_init_files_only_export():
    for package in OURS | {"tuner/schedulers", "worker/records", "tuner/integrations"}:
        tree = ast.parse((ROOT / package / "__init__.py").read_text())
        for node in tree.body:
            assert isinstance(node, (ast.Expr, ast.ImportFrom, ast.Import, ast.Assign)), (
                f"{package}/__init__.py holds {type(node).__name__}")


@pytest.mark.slow
def test_importing_the_api_loads_no_cloud_sdk():
    code = ("import sys, tuner, cloud, worker, budgets\n"
            "bad = [m for m in ('boto3', 'botocore', 'google.cloud.compute') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.slow
def test_the_cli_starts_without_the_controller_and_every_api_name_resolves():
    code = ("import sys, tuner.cli, tuner._status, cloud, worker.records\n"
            "heavy = [m for m in ('optuna', 'pandas', 'celery') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "import tuner\n"
            "for name in tuner.__all__:\n"
            "    assert getattr(tuner, name).__name__ == name, name\n"
            "assert set(tuner.__all__) <= set(dir(tuner))\n"
            "from tuner import tune, TrialContext\n"
            "assert TrialContext.__module__.startswith('worker')\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    stub = ast.parse((ROOT / "tuner" / "__init__.pyi").read_text())
    stubbed = {a.asname or a.name for node in stub.body if isinstance(node, ast.ImportFrom)
               for a in node.names}
    import tuner
    assert stubbed == set(tuner.__all__)


# Benchmarks measure what a user runs: sweeps through tuner.sim.simulate, no parts wired by hand.
SWEEP_BENCHMARKS = ("faults", "spot", "hypersched", "scale", "load", "pool", "search",
                    "_search_elastune")
HAND_WIRED = re.compile(
    r"simulate_wired|\b(?:Replanner|FollowPlan|Controller|ReleaseIdle|Static)\(")


@pytest.mark.parametrize("name", SWEEP_BENCHMARKS)
def test_benchmarks_simulate_sweeps_as_a_user_writes_them(name):
    text = (ROOT / "benchmarks" / f"{name}.py").read_text()
    assert not HAND_WIRED.findall(text), f"benchmarks/{name}.py wires the controller by hand"
