from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import settings

from worker import REGISTRY_KEY, EmbeddedRedis

# CI replays the same examples every run (a red build always means a change did it); local
# runs explore new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts) runs a worker per core, but tests named by node id
    (``pytest tests/tuner/test_config.py::test_x``) in this one process: no workers to start."""
    if config.args and all("::" in arg for arg in config.args):
        return 0
    return None


@pytest.fixture
def redis_server():
    server = EmbeddedRedis()
    address = server.start()
    yield address
    server.stop()


class Workers:
    """Real ``python -m worker`` processes on the embedded Redis."""

    def __init__(self, address, tmp: Path) -> None:
        self.address = address
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, slots: int = 1, timeout: float = 60.0) -> str:
        env = dict(os.environ, ELASTUNE_BROKER_URL=self.address.url,
                   PYTHONPATH=str(ROOT))
        log = open(self.tmp / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "worker", "--name", name, "--slots", str(slots)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        client = self.address.client()
        deadline = time.monotonic() + timeout
        while not client.hexists(REGISTRY_KEY, name):
            assert self.procs[name].poll() is None, (self.tmp / f"{name}.log").read_text()
            assert time.monotonic() < deadline, "worker did not register"
            time.sleep(0.02)
        return name

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def workers(redis_server, tmp_path):
    pool = Workers(redis_server, tmp_path)
    yield pool
    pool.stop_all()
