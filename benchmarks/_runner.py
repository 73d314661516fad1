"""What the benchmarks that run real sweeps share: a scratch folder and a quiet stdout.

Their stdout holds one table or one JSON object and nothing else, so everything a sweep starts
writes to stderr while it runs; their experiment folders go to a temporary folder (deleted
after) or, with ``--out DIR``, under DIR (kept).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr, so that libraries (and their child processes)
    cannot write into the table or the JSON object."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run_quietly(name: str, out: str | None, run: Callable[[Path], dict[str, Any]],
                say: Callable[[str], None]) -> dict[str, Any]:
    """``run(folder)`` with stdout on stderr, in a scratch folder kept only under ``out``."""
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=out))
    else:
        folder = Path(tempfile.mkdtemp(prefix=f"elastune-{name}-"))
    say(f"experiment dirs under {folder}")
    try:
        with stdout_to_stderr():
            return run(folder)
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)


def emit(doc: dict[str, Any], as_json: bool, print_table: Callable[[dict[str, Any]], None]) -> None:
    """The result on stdout: one JSON object, or the human table."""
    if as_json:
        sys.stdout.write(json.dumps(doc, allow_nan=False, default=str) + "\n")
    else:
        print_table(doc)
