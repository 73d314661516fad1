"""``serve``: the dashboard on uvicorn, refusing to listen beyond loopback without a token."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

from tuner._errors import ConfigError
from tuner.dashboard._app import make_app

DEFAULT_PORT = 8265


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False   # a host name: it may resolve to any interface


def check_bind(host: str, port: int, token: str | None) -> None:
    """Raise :class:`~tuner.ConfigError` for a bind the dashboard refuses."""
    if not 0 < port < 65536:
        raise ConfigError("--port", f"must be 1..65535; got {port}")
    if not is_loopback(host) and not token:
        raise ConfigError("--host", f"{host} is not a loopback address: anyone who can reach "
                          "it could read the experiments; pass --token T (or set "
                          "ELASTUNE_DASHBOARD_TOKEN) to serve beyond this machine")


def serve(path: str | Path, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
          token: str | None = None, *, poll_s: float = 2.0, log_level: str = "warning") -> None:
    """Serve the dashboard over ``path`` (an experiment directory or a folder of them) until
    interrupted. A host other than loopback needs a ``token``."""
    import uvicorn

    check_bind(host, port, token)
    app = make_app(path, token, poll_s=poll_s)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"elastune dashboard on {url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
