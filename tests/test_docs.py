"""The documentation: a short README inside the repository, a sweep.yaml JSON Schema that is
current and that every example follows, and a site that builds strict (a broken link or a
missing reference fails)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _generator(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "_gen" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _yaml_blocks() -> list[tuple[str, str]]:
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    return [(str(page.relative_to(ROOT)), block) for page in pages
            for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S)]


def test_the_readme_is_short_and_names_nothing_outside_the_repository():
    text = README.read_text()
    assert len(text.splitlines()) <= 220
    assert "../" not in text


def test_the_published_sweep_schema_is_current():
    schema = _generator("sweep_schema")
    assert schema.SCHEMA_PATH.read_text() == schema.schema_text(), (
        "docs/sweep.schema.json is stale: run python docs/_gen/sweep_schema.py")


def test_every_sweep_example_follows_the_schema_and_loads():
    jsonschema = pytest.importorskip("jsonschema")
    from tuner import load_sweep

    schema = _generator("sweep_schema").sweep_schema()
    full = jsonschema.Draft202012Validator(schema)
    # A block may be part of a sweep (a provider block alone): every key it has is checked.
    partial = jsonschema.Draft202012Validator({**schema, "required": []})
    sweeps = [p for p in sorted((ROOT / "examples").glob("*.yaml"))
              if "trainable:" in p.read_text()]
    assert len(sweeps) >= 5
    examples = [*((str(p.relative_to(ROOT)), p.read_text()) for p in sweeps), *_yaml_blocks()]
    assert len(examples) >= 4
    for where, text in examples:
        data = yaml.safe_load(text)
        errors = [e.message for e in partial.iter_errors(data)]
        assert not errors, f"{where}: {errors}"
        if "trainable" in data:   # a whole sweep: the schema and the models agree on it
            assert not list(full.iter_errors(data)), where
            load_sweep(data)
    # ... and the schema refuses what the models refuse.
    bad = yaml.safe_load((ROOT / "examples" / "digits.yaml").read_text())
    bad["scheduler"]["reduction_factor"] = 1
    assert list(full.iter_errors(bad))


def test_the_site_builds_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", DISABLE_MKDOCS_2_WARNING="true")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                          "-d", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    site = tmp_path / "site"
    assert (site / "sweep.schema.json").exists()
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for command in ("run", "plan", "status", "resume", "ls", "stop", "worker", "dashboard",
                    "report", "cloud ls", "cloud cleanup"):
        assert f"elastune {command}" in cli, command
    api = (site / "reference" / "python" / "index.html").read_text()
    for name in ("tuner.tune", "tuner.resume", "tuner.TuneResult", "tuner.sim.simulate",
                 "budgets.Replanner", "budgets.plan_cost_min"):
        assert name in api, name
