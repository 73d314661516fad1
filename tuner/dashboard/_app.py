"""The dashboard's web app: HTML pages and a JSON API over the experiment stores under a root.

``make_app(root_or_dir, token=None)`` returns a FastAPI app; ``elastune dashboard`` serves it
(see :func:`tuner.dashboard.serve`). ``root_or_dir`` is one experiment directory or a folder
holding several (searched three levels deep); an experiment's *name* is its directory's path
relative to the root, and a name never leaves the root. With a ``token``, every request must
carry it. The pages, every endpoint, its arguments and errors, and how the token is passed:
docs/dashboard-api.md.
"""

from __future__ import annotations

import gzip
import hmac
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from tuner._errors import ConfigError
from tuner._store import STORE_NAME, Store
from tuner.dashboard import _data
from tuner.dashboard._pages import experiment_page, index_page, plotly_js_path, static_text

TOKEN_COOKIE = "elastune_token"
TOKEN_HEADER = "x-elastune-token"
_STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


def _json(obj: Any) -> Response:
    return Response(json.dumps(obj, separators=(",", ":"), allow_nan=False),
                    media_type="application/json", headers={"Cache-Control": "no-store"})


class _Experiments:
    """Name to directory, never outside the root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.resolved = root.resolve()
        self.single = (root / STORE_NAME).is_file()

    def path(self, name: str) -> Path:
        if not _data.valid_name(name):
            raise HTTPException(400, f"experiment: invalid name {name[:80]!r}")
        if self.single:
            found = _data.discover(self.root)
            if name not in found:
                raise HTTPException(404, f"experiment: no experiment named {name!r}")
            return found[name]
        path = self.root / name
        if not (path / STORE_NAME).is_file():
            raise HTTPException(404, f"experiment: no experiment named {name!r}")
        if not path.resolve().is_relative_to(self.resolved):
            raise HTTPException(400, f"experiment: {name!r} lies outside the dashboard's root")
        return path


class _Static:
    """The page's script, style sheet and plotly.js, read once, gzipped once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[bytes, bytes | None]] = {}

    def get(self, name: str) -> tuple[bytes, bytes | None]:
        with self._lock:
            if name not in self._files:
                if name == "plotly.min.js":
                    raw = plotly_js_path().read_bytes()
                else:
                    raw = static_text(name).encode("utf-8")
                # Compressed once here rather than by a middleware on every request:
                # plotly.js is 4.8 MB.
                self._files[name] = (raw, gzip.compress(raw, 6) if len(raw) > 4096 else None)
            return self._files[name]


def make_app(root_or_dir: str | Path, token: str | None = None, *,
             poll_s: float = 2.0) -> FastAPI:
    """The dashboard app over ``root_or_dir`` (an experiment directory or a folder of them).

    ``token``: when set, every request must carry it (see the module docstring). ``poll_s``:
    how often an open page asks whether its experiment changed.

    Example::

        >>> from fastapi.testclient import TestClient
        >>> import tempfile
        >>> client = TestClient(make_app(tempfile.mkdtemp()))
        >>> client.get("/api/experiments").json()["experiments"]
        []
    """
    root = Path(root_or_dir)
    if not root.is_dir():
        raise ConfigError("DIR", f"{root} is not a directory (an experiment directory or a "
                                 "folder of experiments)")
    if token is not None and not token:
        raise ConfigError("--token", "must not be empty")
    if poll_s <= 0:
        raise ConfigError("poll_s", f"must be > 0; got {poll_s}")
    experiments = _Experiments(root)
    static = _Static()
    cache: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
    cache_lock = threading.Lock()
    app = FastAPI(title="elastune dashboard", docs_url=None, redoc_url=None, openapi_url=None)

    if token is not None:
        expected = token.encode("utf-8")

        @app.middleware("http")
        async def require_token(request: Request,
                                call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            from_query = request.query_params.get("token")
            auth = request.headers.get("authorization", "")
            given = (from_query or (auth[7:] if auth.lower().startswith("bearer ") else None)
                     or request.headers.get(TOKEN_HEADER) or request.cookies.get(TOKEN_COOKIE))
            if not given:
                return JSONResponse({"detail": "token required: ?token=, an Authorization: "
                                     "Bearer header, or the elastune_token cookie"},
                                    status_code=401, headers={"WWW-Authenticate": "Bearer"})
            if not hmac.compare_digest(given.encode("utf-8"), expected):
                return JSONResponse({"detail": "wrong token"}, status_code=403)
            response = await call_next(request)
            if from_query:
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response

    def open_store(name: str) -> tuple[Path, Store]:
        path = experiments.path(name)
        try:
            return path, Store(path, readonly=True)
        except Exception as exc:
            raise HTTPException(404, f"experiment: cannot open {name!r}: {exc}") from None

    def answer(name: str, fn: Callable[[Store, Path], Any]) -> Response:
        path, store = open_store(name)
        try:
            return _json(fn(store, path))
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        except LookupError as exc:   # a store created, its experiment not yet written
            raise HTTPException(404, f"experiment: {exc}") from None
        finally:
            store.close()

    @app.get("/", response_class=HTMLResponse)
    def index_html() -> HTMLResponse:
        return HTMLResponse(index_page(str(experiments.resolved),
                                       {"page": "index", "mode": "live", "poll_s": poll_s}))

    @app.get("/e/{name:path}", response_class=HTMLResponse)
    def experiment_html(name: str) -> HTMLResponse:
        experiments.path(name)
        api = "/api/e/" + "/".join(_quote(p) for p in name.split("/"))
        return HTMLResponse(experiment_page(
            name, {"page": "experiment", "mode": "live", "api": api, "poll_s": poll_s}))

    @app.get("/api/experiments")
    def api_experiments() -> Response:
        return _json(_data.experiments_index(experiments.root))

    @app.get("/api/e/{name:path}/summary")
    def api_summary(name: str) -> Response:
        return answer(name, _data.summary)

    @app.get("/api/e/{name:path}/version")
    def api_version(name: str) -> Response:
        return answer(name, lambda s, p: {"version": _data.version(s),
                                          "state": s.experiment()["state"]})

    @app.get("/api/e/{name:path}/best")
    def api_best(name: str) -> Response:
        return answer(name, lambda s, p: _data.best_series(s))

    @app.get("/api/e/{name:path}/spend")
    def api_spend(name: str) -> Response:
        return answer(name, lambda s, p: _data.spend_series(s))

    @app.get("/api/e/{name:path}/workers")
    def api_workers(name: str) -> Response:
        return answer(name, lambda s, p: _data.workers_series(s))

    @app.get("/api/e/{name:path}/curves")
    def api_curves(name: str, top: int = _data.CURVE_TOP, sample: int = _data.CURVE_SAMPLE,
                   points: int = _data.CURVE_POINTS) -> Response:
        if not 2 <= points <= 5000:
            raise HTTPException(400, f"points: {points}; must be 2..5000")
        return answer(name, lambda s, p: _data.learning_curves(s, top, sample, points))

    @app.get("/api/e/{name:path}/parallel")
    def api_parallel(name: str, limit: int = _data.PARALLEL_MAX) -> Response:
        return answer(name, lambda s, p: _data.parallel(s, limit))

    @app.get("/api/e/{name:path}/trials")
    def api_trials(name: str, sort: str = "value", order: str | None = None,
                   state: str | None = None, q: str | None = None, offset: int = 0,
                   limit: int = 50) -> Response:
        return answer(name, lambda s, p: _data.trials_page(s, sort, order, state, q, offset,
                                                           limit))

    @app.get("/api/e/{name:path}/timeline")
    def api_timeline(name: str, workers: int = _data.TIMELINE_WORKERS,
                     segments: int = _data.TIMELINE_SEGMENTS) -> Response:
        return answer(name, lambda s, p: _data.timeline(s, workers, segments))

    @app.get("/api/e/{name:path}/bundle")
    def api_bundle(name: str) -> Response:
        path, store = open_store(name)
        try:
            current = _data.version(store)
            with cache_lock:
                hit = cache.get(name)
            if hit is not None and hit[0] == current:
                body = hit[1]
            else:
                body = json.dumps(_data.bundle(store, path), separators=(",", ":"),
                                  allow_nan=False).encode("utf-8")
                with cache_lock:
                    cache[name] = (current, body)
                    cache.move_to_end(name)
                    while len(cache) > 8:
                        cache.popitem(last=False)
        except LookupError as exc:
            raise HTTPException(404, f"experiment: {exc}") from None
        finally:
            store.close()
        return Response(body, media_type="application/json",
                        headers={"Cache-Control": "no-store"})

    @app.get("/static/{name}")
    def static_file(name: str, request: Request) -> Response:
        if name not in ("plotly.min.js", "dashboard.js", "dashboard.css"):
            raise HTTPException(404, f"no static file {name!r}")
        raw, packed = static.get(name)
        headers = {"Cache-Control": "max-age=3600" if name == "plotly.min.js" else "no-cache",
                   "Vary": "Accept-Encoding"}
        media = _STATIC_TYPES[Path(name).suffix]
        if packed is not None and "gzip" in request.headers.get("accept-encoding", ""):
            return Response(packed, media_type=media,
                            headers={**headers, "Content-Encoding": "gzip"})
        return Response(raw, media_type=media, headers=headers)

    return app


def _quote(part: str) -> str:
    from urllib.parse import quote

    return quote(part, safe="")
