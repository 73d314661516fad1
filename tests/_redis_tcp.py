"""A Redis server on a loopback TCP port, with or without a password, for the broker tests.

The password goes into a 0600 config file in a private directory of its own (not on the
command line, and not inside any experiment directory a test scans).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from worker._embedded import redis_server_binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_on_loopback(password: str | None = None) -> Iterator[int]:
    """Start ``redis-server`` on 127.0.0.1; yield its port; stop it."""
    folder = Path(tempfile.mkdtemp(prefix="elastune-tcp-redis-"))
    os.chmod(folder, 0o700)
    port = free_port()
    conf = folder / "redis.conf"
    conf.write_text(f"port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir {folder}\n"
                    + (f"requirepass {password}\n" if password else ""))
    os.chmod(conf, 0o600)
    proc = subprocess.Popen([redis_server_binary(), str(conf)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, password=password)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert proc.poll() is None, "redis-server exited at start"
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
