"""The README as a new user reads it: every link resolves inside the repository, and its first
Python example runs as written (a script of its own, real workers on the embedded Redis)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_every_link_resolves_inside_the_repository():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link.split("#")[0] for link in links if "://" not in link and
             not link.startswith(("#", "mailto:"))]
    assert local, "the README links to nothing in the repository"
    for link in local:
        target = (ROOT / link).resolve()
        assert target.is_relative_to(ROOT), f"{link} points outside the repository"
        assert target.exists(), f"{link} does not exist"
    # Paths a user's clone does not have: nothing above the repository.
    assert not re.search(r"(^|[\s`(])\.\./", README), "the README names a path outside the repo"


@pytest.mark.slow
def test_the_first_python_example_runs_as_written(tmp_path):
    example = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    script = tmp_path / "example.py"
    script.write_text(example)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    first = out.stdout.splitlines()[0]
    params, value, spend = re.fullmatch(r"(\{.*\}) (\S+) (\S+)", first).groups()
    assert "'lr'" in params and "'batch'" in params
    assert 0.5 < float(value) <= 1.0 and 0 < float(spend) <= 1.0
    assert list((tmp_path / "experiments").iterdir()), "no experiment was written"


@pytest.mark.slow
def test_the_simulation_example_runs_as_written(tmp_path):
    # The block after "Simulation: the same controller on another clock": a sweep through
    # tuner.sim.simulate on the shipped sample curves.
    section = README[README.index("## Simulation: the same controller"):]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    script = tmp_path / "simulation.py"
    script.write_text(example)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    value, spend, wall = (float(x) for x in out.stdout.split())
    assert 0 < value <= 1.0 and 0 < spend <= 50.0 and wall > 0
