"""Every test under tests/e2e/ starts real processes (workers, Redis, the CLI, a browser, a
notebook kernel, emulated cloud VMs): all of them are ``slow``, out of the quick tier."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.slow)
