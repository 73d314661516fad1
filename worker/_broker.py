"""Broker addresses: one URL form for users, the two spellings Celery and redis-py need."""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import quote, unquote, urlsplit

import redis

_SCHEMES = ("redis", "rediss", "unix", "redis+socket")


class BrokerURLError(ValueError):
    """The broker URL is not one elastune can use."""


@dataclass(frozen=True)
class BrokerAddress:
    """A Redis broker reached over TCP (``redis://``, ``rediss://``) or a unix socket."""

    scheme: str
    host: str | None
    port: int | None
    path: str | None
    password: str | None
    db: int = 0

    @classmethod
    def parse(cls, url: str) -> BrokerAddress:
        parts = urlsplit(url)
        if parts.scheme not in _SCHEMES:
            raise BrokerURLError(
                f"broker_url: scheme {parts.scheme!r} is not supported; allowed: "
                "redis://, rediss://, unix:// (or redis+socket://)"
            )
        password = unquote(parts.password) if parts.password else None
        if parts.scheme in ("unix", "redis+socket"):
            if not parts.path:
                raise BrokerURLError("broker_url: a unix socket URL needs a path")
            return cls("unix", None, None, parts.path, password)
        db = int(parts.path.strip("/") or 0)
        host = parts.hostname or "localhost"
        return cls(parts.scheme, host, parts.port or 6379, None, password, db)

    def with_password(self, password: str) -> BrokerAddress:
        """The same address with this password (read from a secret store on a VM)."""
        return replace(self, password=password)

    def _auth(self) -> str:
        return f":{quote(self.password, safe='')}@" if self.password else ""

    @property
    def url(self) -> str:
        """The redis-py spelling (``unix://:pw@/path`` for sockets)."""
        if self.scheme == "unix":
            return f"unix://{self._auth()}{self.path}"
        return f"{self.scheme}://{self._auth()}{self.host}:{self.port}/{self.db}"

    @property
    def celery_url(self) -> str:
        """The kombu spelling (``redis+socket://:pw@/path`` for sockets)."""
        if self.scheme == "unix":
            return f"redis+socket://{self._auth()}{self.path}"
        return self.url

    @property
    def redacted(self) -> str:
        """The URL with the password masked, for logs and the experiment store."""
        auth = ":***@" if self.password else ""
        if self.scheme == "unix":
            return f"unix://{auth}{self.path}"
        return f"{self.scheme}://{auth}{self.host}:{self.port}/{self.db}"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_connect_timeout=10, health_check_interval=30)
