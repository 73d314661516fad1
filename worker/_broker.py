"""Broker addresses: one URL form for users, the two spellings Celery and redis-py need, and
the one policy every entry point applies to a broker it is given (:func:`check_broker`)."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass, replace
from urllib.parse import quote, unquote, urlsplit

import redis

_SCHEMES = ("redis", "rediss", "unix", "redis+socket")
# How long workers and the controller wait out a broker that went away (a restart) before a
# call fails: longer than a Redis restart, shorter than a segment lease.
RIDE_OUT_S = 60.0
_log = logging.getLogger(__name__)


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
        if parts.username and password is None:
            # redis://SECRET@host: most likely a password without its leading colon. Refuse
            # rather than drop it silently; the message does not repeat it.
            raise BrokerURLError("broker_url: give the password after a colon, "
                                 "redis://:PASSWORD@host:port/db (Redis ACL user names are "
                                 "not supported)")
        if parts.scheme in ("unix", "redis+socket"):
            if not parts.path:
                raise BrokerURLError("broker_url: a unix socket URL needs a path")
            return cls("unix", None, None, parts.path, password)
        try:
            db = int(parts.path.strip("/") or 0)
            port = parts.port or 6379
        except ValueError:
            raise BrokerURLError("broker_url: the port and the database must be numbers, "
                                 "redis://:PASSWORD@host:6379/0") from None
        host = parts.hostname or "localhost"
        return cls(parts.scheme, host, port, None, password, db)

    def with_password(self, password: str) -> BrokerAddress:
        """The same address with this password (read from a secret store on a VM)."""
        return replace(self, password=password)

    def _auth(self) -> str:
        return f":{quote(self.password, safe='')}@" if self.password else ""

    def _netloc(self) -> str:
        host = self.host or "localhost"
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """The redis-py spelling (``unix://:pw@/path`` for sockets)."""
        if self.scheme == "unix":
            return f"unix://{self._auth()}{self.path}"
        return f"{self.scheme}://{self._auth()}{self._netloc()}/{self.db}"

    @property
    def tls(self) -> bool:
        return self.scheme == "rediss"

    @property
    def local(self) -> bool:
        """Whether traffic to the broker stays on this machine: a unix socket, or TCP to a
        loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
        if self.scheme == "unix":
            return True
        host = (self.host or "").strip("[]").lower()
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False   # a host name: it may resolve anywhere

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
        return f"{self.scheme}://{auth}{self._netloc()}/{self.db}"

    def client(self, *, ride_out_s: float = 0.0) -> redis.Redis:
        """A redis-py client. With ``ride_out_s`` > 0 a call that finds the broker away
        (restarting, a network blip) is retried with backoff for about that long before it
        raises: workers and the controller use this, so a restarted Redis costs a pause,
        not a segment."""
        kwargs: dict[str, object] = {}
        if ride_out_s > 0:
            from redis.backoff import ExponentialBackoff

            cap = 0.5
            kwargs = {"retry": _patience()(ExponentialBackoff(cap=cap, base=0.02),
                                           max(1, int(ride_out_s / cap))),
                      "retry_on_error": [redis.ConnectionError, redis.TimeoutError]}
        return redis.Redis.from_url(self.url, socket_connect_timeout=10, health_check_interval=30,
                                    **kwargs)


INSECURE_HINT = "--insecure (insecure_broker=True in Python)"


def check_broker(address: BrokerAddress, *, insecure: bool = False) -> None:
    """The broker policy, the same for ``tune()``, ``elastune run|resume`` and
    ``elastune worker``: raise :class:`BrokerURLError` for a broker elastune refuses.

    * A unix socket (the embedded broker's kind) is accepted: only this machine reaches it,
      and its file mode decides who may.
    * TCP to a loopback address needs a password (any local user can open a TCP port); TLS is
      not required, the traffic never leaves the machine.
    * TCP to any other host needs a password *and* TLS (``rediss://``): the password and every
      message cross a network.

    ``insecure=True`` accepts what the TCP rules would refuse, with a warning in the log. The
    messages name the broker by its redacted URL only.
    """
    if address.scheme == "unix":
        return
    problems = []
    if not address.password:
        problems.append("a password")
    if not address.local and not address.tls:
        problems.append("TLS (rediss://)")
    if not problems:
        return
    where = "on this machine" if address.local else "reached over the network"
    need = " and ".join(problems)
    if insecure:
        _log.warning("broker %s (%s) has no %s; accepted because insecure was asked for",
                     address.redacted, where, need)
        return
    example = ("redis://:PASSWORD@127.0.0.1:6379/0" if address.local
               else "rediss://:PASSWORD@broker.example.com:6380/0")
    raise BrokerURLError(
        f"broker_url: {address.redacted} is {where} and needs {need}, e.g. {example}; "
        f"pass {INSECURE_HINT} to accept it anyway")


_patient = True


def stop_waiting() -> None:
    """From now on a call that finds the broker away fails at once: this process is shutting
    down (its controller, and the broker with it, may be gone for good)."""
    global _patient
    _patient = False


def _patience() -> type:
    from redis.retry import Retry

    class Patience(Retry):
        """redis-py's retry, given up at once after :func:`stop_waiting`."""

        def call_with_retry(self, do, fail, is_retryable=None,  # type: ignore[no-untyped-def]
                            with_failure_count=False):
            def retryable(error: Exception) -> bool:
                return _patient and (is_retryable is None or is_retryable(error))

            return super().call_with_retry(do, fail, retryable, with_failure_count)

    return Patience
