"""Find this test's own processes by command line.

A machine-wide ``pgrep -f`` would also match the processes of tests running beside this one
(pytest-xdist workers, another checkout's run), so a test that kills or freezes a worker by name
looks only among the descendants of its own process.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command name may hold spaces and parentheses: the fields start after the last ')'.
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(pattern: str, root: int | None = None) -> list[int]:
    """The pids under ``root`` (this process by default) whose command line, its arguments
    joined by spaces (as ``pgrep -f`` reads it), contains ``pattern``."""
    children = _children()
    found: list[int] = []
    stack = [os.getpid() if root is None else root]
    while stack:
        for pid in children.get(stack.pop(), []):
            stack.append(pid)
            try:
                cmdline = (PROC / str(pid) / "cmdline").read_bytes()
            except OSError:
                continue
            if pattern in cmdline.replace(b"\0", b" ").decode(errors="replace"):
                found.append(pid)
    return found
