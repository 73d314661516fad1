"""A local stand-in for the Google Cloud REST APIs that elastune's GCP code calls.

Hand-written because Compute Engine has no emulator (Google ships emulators for Pub/Sub,
Datastore, Firestore, Bigtable and Spanner only), and one small server that speaks the REST
subset we use lets the tests drive the *real* ``google-cloud-compute``,
``google-cloud-secret-manager`` and ``google-cloud-storage`` clients, with their own URL
building, JSON parsing, paging and error decoding, instead of mocking them.

What it serves (JSON shapes follow the public API reference closely enough for the clients):

* Compute Engine ``compute/v1``: zonal instances insert / get / list (with the ``filter``
  syntax ``field = "value"``, ``!=``, clauses in parentheses joined by spaces or ``AND``) /
  delete / setLabels, aggregated instance list, zone operations get / ``wait`` / list (with a
  filter such as ``operationType = "compute.instances.preempted"``).
* Secret Manager ``v1``: secrets create / get / list (by label) / delete, ``:addVersion``,
  ``versions/{v}:access`` (``latest`` or a number).
* Cloud Storage JSON API: bucket insert / get, object upload (``uploadType=media``,
  ``multipart`` and ``resumable``), download (``alt=media``, with ``x-goog-hash``), metadata
  get, list (``prefix``, paging) and delete.

Test controls: :meth:`FakeGoogleCloud.fail_inserts` makes the next N inserts (of a machine
type and/or zone) fail the way GCE reports stockouts, quota, throttling and permission errors,
either as an HTTP error on the insert call or inside the finished operation;
:meth:`FakeGoogleCloud.preempt` takes a spot VM back (status TERMINATED or deleted, plus a
``compute.instances.preempted`` system operation); ``boot_reads`` sets how many reads an
instance stays PROVISIONING before it turns RUNNING; ``insert_delay_s`` (settable while the
server runs) keeps each insert operation RUNNING, and its instance PROVISIONING, that long (an
operation ``wait`` blocks until then, as Compute Engine's does, up to two minutes). Every
request is recorded in :attr:`FakeGoogleCloud.requests`.

Accepted sockets get ``TCP_NODELAY``: without it the clients' small writes meet delayed ACKs
and every call costs about 40 ms.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

COMPUTE_BASE = "https://www.googleapis.com/compute/v1"

# -- the error shapes Compute Engine uses -----------------------------------------------------

#: ``kind`` -> (how it is delivered by default, operation error code, http status, reason)
INSERT_ERRORS: dict[str, tuple[str, str, int, str]] = {
    "stockout": ("operation", "ZONE_RESOURCE_POOL_EXHAUSTED", 503,
                 "ZONE_RESOURCE_POOL_EXHAUSTED"),
    "stockout_details": ("operation", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 503,
                         "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
    "quota": ("operation", "QUOTA_EXCEEDED", 403, "quotaExceeded"),
    "throttle": ("http", "RATE_LIMIT_EXCEEDED", 429, "rateLimitExceeded"),
    "forbidden": ("http", "PERMISSIONS_ERROR", 403, "forbidden"),
    "unauthenticated": ("http", "UNAUTHENTICATED", 401, "required"),
}

_HTTP_REASONS = {200: "OK", 400: "BAD REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN",
                 404: "NOT FOUND", 409: "CONFLICT", 429: "TOO MANY REQUESTS",
                 503: "SERVICE UNAVAILABLE"}


def _now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _region(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def _error_message(kind: str, code: str, project: str, zone: str, machine_type: str,
                   name: str) -> str:
    if kind.startswith("stockout"):
        detail = "  '(resource type:compute)'." if "DETAILS" in code else \
            "  Try a different zone, or try again later."
        return (f"The zone 'projects/{project}/zones/{zone}' does not have enough resources "
                f"available to fulfill the request.{detail}")
    if kind == "quota":
        return f"Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region {_region(zone)}."
    if kind == "throttle":
        return ("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of "
                f"service 'compute.googleapis.com' for consumer 'project_number:{project}'.")
    if kind == "forbidden":
        return (f"Required 'compute.instances.create' permission for "
                f"'projects/{project}/zones/{zone}/instances/{name}'")
    return ("Request is missing required authentication credential. Expected OAuth 2 access "
            "token, login cookie or other valid authentication credential.")


def http_error_body(status: int, message: str, reason: str, domain: str = "global",
                    rpc_status: str | None = None) -> dict[str, Any]:
    """The JSON body Google's REST APIs send with an HTTP error."""
    err: dict[str, Any] = {"code": status, "message": message,
                           "errors": [{"message": message, "domain": domain, "reason": reason}]}
    if rpc_status:
        err["status"] = rpc_status
    return {"error": err}


@dataclass
class Injection:
    kind: str
    remaining: int
    machine_type: str | None
    zone: str | None
    delivery: str
    after: int = 0


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any  # parsed JSON, raw bytes, or None


@dataclass
class _Upload:
    bucket: str
    name: str
    meta: dict[str, Any]
    data: bytearray = field(default_factory=bytearray)


class _Reply(Exception):
    """Raised inside a route to answer with this status and body."""

    def __init__(self, status: int, body: Any = None, headers: dict[str, str] | None = None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def _not_found(message: str, reason: str = "notFound") -> _Reply:
    return _Reply(404, http_error_body(404, message, reason))


# -- filters ----------------------------------------------------------------------------------

_CLAUSE = re.compile(
    r'\s*(?:AND\s+)?\(?\s*([A-Za-z][\w.\-]*)\s*(=|!=|eq|ne)\s*("(?:[^"\\]|\\.)*"|[^\s()"]+)\s*\)?')


def parse_filter(text: str) -> list[tuple[str, str, str]]:
    """``labels.a = "x" AND (status != RUNNING)`` -> [(path, op, value), ...]; ValueError when
    the text is outside the subset this server understands."""
    clauses, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _CLAUSE.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"Invalid value for field 'filter': '{text}'. Invalid list filter "
                             "expression.")
        path, op, value = m.groups()
        if value.startswith('"'):
            value = json.loads(value)
        clauses.append((path, {"eq": "=", "ne": "!="}.get(op, op), value))
        pos = m.end()
    return clauses


def matches(resource: dict[str, Any], clauses: list[tuple[str, str, str]]) -> bool:
    for path, op, want in clauses:
        value: Any = resource
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, bool):
            value = str(value).lower()
        equal = value is not None and str(value) == want
        if equal != (op == "="):
            return False
    return True


# -- the fake ---------------------------------------------------------------------------------

class FakeGoogleCloud:
    """Compute Engine + Secret Manager + Cloud Storage on ``http://127.0.0.1:<port>``.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, project: str = "test-project", *, boot_reads: int = 1,
                 insert_delay_s: float = 0.0) -> None:
        self.project = project
        self.boot_reads = boot_reads
        self.insert_delay_s = insert_delay_s
        self.requests: list[Recorded] = []
        self.lock = threading.RLock()
        # compute: (zone, name) -> instance JSON; operations: (zone, name) -> operation JSON
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self.operations: dict[tuple[str, str], dict[str, Any]] = {}
        self._reads_left: dict[tuple[str, str], int] = {}
        self._pending_ops: dict[tuple[str, str], Any] = {}  # op -> what finishing it does
        self._op_born: dict[tuple[str, str], int] = {}  # op -> the request that started it
        self._op_ready_at: dict[tuple[str, str], float] = {}  # a slow op -> when it may end
        self._creating: dict[tuple[str, str], tuple[str, str]] = {}  # instance -> insert op
        self._request_no = 0
        self._injections: list[Injection] = []
        self._ids = itertools.count(int(time.time() * 1000) % 10**9 * 1000)
        # secret manager: full secret name -> (secret JSON, [payload bytes])
        self.secrets: dict[str, tuple[dict[str, Any], list[bytes]]] = {}
        # storage
        self.buckets: dict[str, dict[str, Any]] = {}
        self.objects: dict[tuple[str, str], tuple[dict[str, Any], bytes]] = {}
        self._uploads: dict[str, _Upload] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeGoogleCloud:
        fake = self

        class Handler(_Handler):
            cloud = fake

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGoogleCloud:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def host(self) -> str:
        """``127.0.0.1:port``, for ``STORAGE_EMULATOR_HOST``-style settings."""
        return self.url.removeprefix("http://")

    # -- controls -------------------------------------------------------------------------
    def fail_inserts(self, kind: str, times: int = 1, *, machine_type: str | None = None,
                     zone: str | None = None, delivery: str | None = None,
                     after: int = 0) -> None:
        """Make the next ``times`` instance inserts matching ``machine_type`` (the catalog's
        machine type, e.g. ``n1-standard-8``) and ``zone`` fail with ``kind`` (a key of
        :data:`INSERT_ERRORS`), delivered as ``"http"`` (an error answer to the insert) or
        ``"operation"`` (an accepted insert whose operation finishes with the error).
        ``after`` lets that many matching inserts through first."""
        if kind not in INSERT_ERRORS:
            raise ValueError(f"unknown error kind {kind!r}; known: {sorted(INSERT_ERRORS)}")
        delivery = delivery or INSERT_ERRORS[kind][0]
        if delivery not in ("http", "operation"):
            raise ValueError("delivery must be 'http' or 'operation'")
        with self.lock:
            self._injections.append(Injection(kind, times, machine_type, zone, delivery,
                                              after))

    def preempt(self, name: str, *, delete: bool = False) -> None:
        """Take instance ``name`` back as Compute Engine does a spot VM: a
        ``compute.instances.preempted`` operation, then status TERMINATED (``delete=False``)
        or the instance gone (``delete=True``, what ``instanceTerminationAction=DELETE``
        does)."""
        with self.lock:
            zone, inst = self._find_instance(name)
            inst["status"] = "TERMINATED"
            inst["lastStopTimestamp"] = _now_rfc3339()
            op = self._new_operation(zone, "compute.instances.preempted", inst, user="system",
                                     prefix="systemevent")
            op.update(status="DONE", progress=100, endTime=_now_rfc3339(),
                      statusMessage="Instance was preempted.")
            if delete:
                self.instances.pop((zone, name))

    def set_status(self, name: str, status: str) -> None:
        """Set an instance's status by hand (e.g. ``TERMINATED``: stopped, not preempted)."""
        with self.lock:
            zone, inst = self._find_instance(name)
            inst["status"] = status
            self._reads_left.pop((zone, name), None)

    def read_instances(self) -> dict[str, dict[str, Any]]:
        """Every instance by name, as a read through the API would see it now (and counted as
        one read, as for ``boot_reads``)."""
        with self.lock:
            return {name: json.loads(json.dumps(self._read_instance(zone, name)))
                    for zone, name in list(self.instances)}

    def inserted(self) -> list[dict[str, Any]]:
        """The instance bodies of every insert request received, in order."""
        return [r.body for r in self.requests
                if r.method == "POST" and re.fullmatch(
                    r"/compute/v1/projects/[^/]+/zones/[^/]+/instances", r.path)]

    def _find_instance(self, name: str) -> tuple[str, dict[str, Any]]:
        for (zone, n), inst in self.instances.items():
            if n == name:
                return zone, inst
        raise KeyError(f"no instance {name!r}")

    # -- compute ---------------------------------------------------------------------------
    def _new_operation(self, zone: str, op_type: str, inst: dict[str, Any], *,
                       user: str = "test@example.com", prefix: str = "operation"
                       ) -> dict[str, Any]:
        op_id = next(self._ids)
        name = f"{prefix}-{int(time.time() * 1000)}-{op_id:x}"
        zone_url = f"{COMPUTE_BASE}/projects/{self.project}/zones/{zone}"
        op = {
            "kind": "compute#operation", "id": str(op_id), "name": name, "zone": zone_url,
            "operationType": op_type,
            "targetLink": f"{zone_url}/instances/{inst['name']}",
            "targetId": inst.get("id", str(op_id)), "status": "RUNNING", "user": user,
            "progress": 0, "insertTime": _now_rfc3339(), "startTime": _now_rfc3339(),
            "selfLink": f"{zone_url}/operations/{name}",
        }
        self.operations[(zone, name)] = op
        self._op_born[(zone, name)] = self._request_no
        return op

    def _settle(self) -> None:
        """Operations run in the background: each is DONE by the request after the one that
        started it (so a delete the caller does not wait for still completes)."""
        for key, born in list(self._op_born.items()):
            if born < self._request_no and not self._running_still(key):
                del self._op_born[key]
                self._finish(*key)

    def _finish(self, zone: str, name: str) -> dict[str, Any]:
        op = self.operations.get((zone, name))
        if op is None:
            raise _not_found(f"The resource 'projects/{self.project}/zones/{zone}/operations/"
                             f"{name}' was not found")
        if self._running_still((zone, name)):
            return op
        action = self._pending_ops.pop((zone, name), None)
        if op["status"] != "DONE":
            if callable(action):
                action(op)
            op.update(status="DONE", progress=100, endTime=_now_rfc3339())
        return op

    def _running_still(self, key: tuple[str, str]) -> bool:
        """Whether a slow insert operation (``insert_delay_s``) has yet to end."""
        ready_at = self._op_ready_at.get(key)
        if ready_at is None:
            return False
        if time.monotonic() < ready_at:
            return True
        del self._op_ready_at[key]
        return False

    def _slow(self, zone: str, op: dict[str, Any]) -> dict[str, Any]:
        if self.insert_delay_s > 0:
            self._op_ready_at[(zone, op["name"])] = time.monotonic() + self.insert_delay_s
        return op

    def wait_time(self, path: str) -> float:
        """How long an operation ``wait`` on ``path`` blocks: until a slow insert ends, at
        most two minutes (Compute Engine's limit), else not at all."""
        m = re.fullmatch(r"/compute/v1/projects/[^/]+/zones/([^/]+)/operations/([^/]+)/wait",
                         path)
        if not m:
            return 0.0
        with self.lock:
            ready_at = self._op_ready_at.get((unquote(m.group(1)), unquote(m.group(2))))
        return 0.0 if ready_at is None else min(120.0, max(0.0, ready_at - time.monotonic()))

    def _take_injection(self, machine_type: str, zone: str) -> Injection | None:
        for inj in self._injections:
            if inj.remaining > 0 and inj.machine_type in (None, machine_type) \
                    and inj.zone in (None, zone):
                if inj.after > 0:
                    inj.after -= 1
                    continue
                inj.remaining -= 1
                return inj
        return None

    def _insert(self, project: str, zone: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("name", "")
        if not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name):
            raise _Reply(400, http_error_body(
                400, f"Invalid value for field 'resource.name': '{name}'. Must be a match of "
                "regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'", "invalid"))
        for key, value in (body.get("labels") or {}).items():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key) or \
                    not re.fullmatch(r"[a-z0-9_-]{0,63}", value):
                raise _Reply(400, http_error_body(
                    400, f"Invalid value for field 'resource.labels': '{key}={value}'",
                    "invalid"))
        machine_type = str(body.get("machineType", "")).rsplit("/", 1)[-1]
        if (zone, name) in self.instances:
            raise _Reply(409, http_error_body(
                409, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' "
                "already exists", "alreadyExists"))
        inj = self._take_injection(machine_type, zone)
        if inj is not None:
            _, code, status, reason = INSERT_ERRORS[inj.kind]
            message = _error_message(inj.kind, code, project, zone, machine_type, name)
            if inj.delivery == "http":
                domain = "usageLimits" if inj.kind in ("quota", "throttle") else "global"
                rpc = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}.get(status)
                raise _Reply(status, http_error_body(status, message, reason, domain, rpc))
            op = self._new_operation(zone, "insert", {"name": name})
            error: dict[str, Any] = {"code": code, "message": message}
            if inj.kind == "quota":
                error["errorDetails"] = [{"quotaInfo": {
                    "metricName": "compute.googleapis.com/nvidia_t4_gpus",
                    "limitName": "NVIDIA-T4-GPUS-per-project-region",
                    "dimensions": {"region": _region(zone)}, "limit": 0}}]

            def fail(op: dict[str, Any], error: dict[str, Any] = error,
                     status: int = status) -> None:
                op.update(error={"errors": [error]}, httpErrorStatusCode=status,
                          httpErrorMessage=_HTTP_REASONS.get(status, "ERROR"))

            self._pending_ops[(zone, op["name"])] = fail
            return self._slow(zone, op)
        zone_url = f"{COMPUTE_BASE}/projects/{project}/zones/{zone}"
        inst = json.loads(json.dumps(body))
        inst.update(
            kind="compute#instance", id=str(next(self._ids)), status="PROVISIONING",
            creationTimestamp=_now_rfc3339(), zone=zone_url,
            selfLink=f"{zone_url}/instances/{name}",
            machineType=f"{zone_url}/machineTypes/{machine_type}",
            labelFingerprint=base64.b64encode(name.encode()[:8]).decode(),
        )
        if "metadata" in inst:
            inst["metadata"].setdefault("kind", "compute#metadata")
            inst["metadata"]["fingerprint"] = "Zm9vYmFy"
        self.instances[(zone, name)] = inst
        self._reads_left[(zone, name)] = self.boot_reads
        op = self._slow(zone, self._new_operation(zone, "insert", inst))
        self._creating[(zone, name)] = (zone, op["name"])
        return op

    def _read_instance(self, zone: str, name: str) -> dict[str, Any]:
        inst = self.instances[(zone, name)]
        creating = self._creating.get((zone, name))
        if creating is not None:
            if self.operations[creating]["status"] != "DONE":
                return inst   # PROVISIONING until its insert operation is done
            del self._creating[(zone, name)]
        left = self._reads_left.get((zone, name))
        if left is not None:
            if left <= 0 and inst["status"] in ("PROVISIONING", "STAGING"):
                inst["status"] = "RUNNING"
                inst["lastStartTimestamp"] = _now_rfc3339()
                self._reads_left.pop((zone, name))
            else:
                self._reads_left[(zone, name)] = left - 1
        return inst

    def _route_compute(self, method: str, parts: list[str], query: dict[str, list[str]],
                       body: Any) -> Any:
        # parts: ["projects", P, "zones", Z, "instances", ...] or ["projects", P, "aggregated",
        # "instances"]
        if len(parts) < 4 or parts[0] != "projects":
            raise _not_found("Not Found")
        project = parts[1]
        if parts[2:4] == ["aggregated", "instances"] and method == "GET":
            clauses = self._filter(query)
            items: dict[str, Any] = {}
            for (zone, name) in sorted(self.instances):
                inst = self._read_instance(zone, name)
                if matches(inst, clauses):
                    items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(inst)
            return {"kind": "compute#instanceAggregatedList",
                    "id": f"projects/{project}/aggregated/instances", "items": items,
                    "selfLink": f"{COMPUTE_BASE}/projects/{project}/aggregated/instances"}
        if parts[2] != "zones" or len(parts) < 5:
            raise _not_found("Not Found")
        zone, collection, rest = parts[3], parts[4], parts[5:]
        if collection == "instances":
            if not rest and method == "POST":
                return self._insert(project, zone, body or {})
            if not rest and method == "GET":
                clauses = self._filter(query)
                found = [self._read_instance(z, n) for (z, n) in sorted(self.instances)
                         if z == zone]
                return self._page("compute#instanceList",
                                  f"projects/{project}/zones/{zone}/instances",
                                  [i for i in found if matches(i, clauses)], query)
            name = rest[0]
            if (zone, name) not in self.instances:
                raise _not_found(f"The resource 'projects/{project}/zones/{zone}/instances/"
                                 f"{name}' was not found")
            if len(rest) == 1 and method == "GET":
                return self._read_instance(zone, name)
            if len(rest) == 1 and method == "DELETE":
                inst = self.instances[(zone, name)]
                inst["status"] = "STOPPING"
                op = self._new_operation(zone, "delete", inst)

                def gone(op: dict[str, Any], key: tuple[str, str] = (zone, name)) -> None:
                    self.instances.pop(key, None)

                self._pending_ops[(zone, op["name"])] = gone
                return op
            if rest[1:] == ["setLabels"] and method == "POST":
                inst = self.instances[(zone, name)]
                inst["labels"] = dict((body or {}).get("labels") or {})
                op = self._new_operation(zone, "setLabels", inst)
                return op
        if collection == "operations":
            if not rest and method == "GET":
                clauses = self._filter(query)
                ops = [op for (z, _), op in self.operations.items()
                       if z == zone and matches(op, clauses)]
                return self._page("compute#operationList",
                                  f"projects/{project}/zones/{zone}/operations", ops, query)
            # An operation is seen RUNNING by the insert, then DONE on the next look.
            if (len(rest) == 1 and method == "GET") or (rest[1:] == ["wait"]
                                                         and method == "POST"):
                return self._finish(zone, rest[0])
        raise _not_found("Not Found")

    @staticmethod
    def _filter(query: dict[str, list[str]]) -> list[tuple[str, str, str]]:
        text = query.get("filter", [""])[0]
        try:
            return parse_filter(text)
        except ValueError as exc:
            raise _Reply(400, http_error_body(400, str(exc), "invalid")) from None

    @staticmethod
    def _page(kind: str, rid: str, items: list[dict[str, Any]],
              query: dict[str, list[str]]) -> dict[str, Any]:
        size = int(query.get("maxResults", ["500"])[0] or 500)
        start = int(query.get("pageToken", ["0"])[0] or 0)
        out: dict[str, Any] = {"kind": kind, "id": rid,
                               "selfLink": f"{COMPUTE_BASE}/{rid}"}
        if items[start:start + size]:
            out["items"] = items[start:start + size]
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    # -- secret manager ---------------------------------------------------------------------
    def _route_secrets(self, method: str, path: str, query: dict[str, list[str]],
                       body: Any) -> Any:
        m = re.fullmatch(r"projects/([^/]+)/secrets", path)
        if m and method == "GET":
            # list, with the one filter form the client sends: labels.KEY=VALUE
            prefix = f"projects/{m.group(1)}/secrets/"
            wanted = query.get("filter", [""])[0]
            key, _, value = wanted.removeprefix("labels.").partition("=")
            secrets = [sec for name, (sec, _) in sorted(self.secrets.items())
                       if name.startswith(prefix)
                       and (not wanted or sec.get("labels", {}).get(key) == value)]
            return {"secrets": secrets, "totalSize": len(secrets)}
        if m and method == "POST":
            secret_id = query.get("secretId", [""])[0]
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,255}", secret_id):
                raise _Reply(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                             "message": f"Invalid secret id {secret_id!r}."}})
            name = f"projects/{m.group(1)}/secrets/{secret_id}"
            if name in self.secrets:
                raise _Reply(409, {"error": {"code": 409, "status": "ALREADY_EXISTS",
                                             "message": f"Secret [{name}] already exists."}})
            secret = {"name": name, "replication": (body or {}).get("replication")
                      or {"automatic": {}}, "createTime": _now_rfc3339(),
                      "etag": f"\"{next(self._ids):x}\"", "labels": (body or {}).get("labels", {})}
            self.secrets[name] = (secret, [])
            return secret
        m = re.fullmatch(r"(projects/[^/]+/secrets/[^/:]+)(?::addVersion)?", path)
        if m:
            name = m.group(1)
            if name not in self.secrets:
                raise _Reply(404, {"error": {"code": 404, "status": "NOT_FOUND",
                                             "message": f"Secret [{name}] not found."}})
            secret, versions = self.secrets[name]
            if path.endswith(":addVersion") and method == "POST":
                data = base64.b64decode(((body or {}).get("payload") or {}).get("data", ""))
                versions.append(data)
                return {"name": f"{name}/versions/{len(versions)}",
                        "createTime": _now_rfc3339(), "state": "ENABLED",
                        "etag": f"\"{next(self._ids):x}\""}
            if method == "GET":
                return secret
            if method == "DELETE":
                del self.secrets[name]
                return {}
        m = re.fullmatch(r"(projects/[^/]+/secrets/[^/]+)/versions/([^/:]+):access", path)
        if m and method == "GET":
            name, version = m.groups()
            versions = self.secrets.get(name, ({}, []))[1]
            index = len(versions) if version == "latest" else int(version) \
                if version.isdigit() else 0
            if not 1 <= index <= len(versions):
                what = f"Secret [{name}] not found or has no versions." if version == "latest" \
                    else f"Secret Version [{name}/versions/{version}] not found."
                raise _Reply(404, {"error": {"code": 404, "status": "NOT_FOUND",
                                             "message": what}})
            data = versions[index - 1]
            return {"name": f"{name}/versions/{index}",
                    "payload": {"data": base64.b64encode(data).decode(),
                                "dataCrc32c": str(_crc32c(data))}}
        raise _Reply(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": "Not Found"}})

    # -- cloud storage -----------------------------------------------------------------------
    def _object_resource(self, bucket: str, name: str, data: bytes,
                         meta: dict[str, Any]) -> dict[str, Any]:
        generation = str(next(self._ids))
        now = _now_rfc3339()
        return {
            "kind": "storage#object", "id": f"{bucket}/{name}/{generation}", "name": name,
            "bucket": bucket, "generation": generation, "metageneration": "1",
            "contentType": meta.get("contentType") or "application/octet-stream",
            "storageClass": "STANDARD", "size": str(len(data)),
            "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
            "crc32c": base64.b64encode(struct.pack(">I", _crc32c(data))).decode(),
            "etag": base64.b64encode(generation.encode()).decode(),
            "timeCreated": now, "updated": now, "timeStorageClassUpdated": now,
            "selfLink": f"https://www.googleapis.com/storage/v1/b/{bucket}/o/{quote(name, '')}",
            "mediaLink": (f"https://storage.googleapis.com/download/storage/v1/b/{bucket}/o/"
                          f"{quote(name, '')}?generation={generation}&alt=media"),
            **({"metadata": meta["metadata"]} if meta.get("metadata") else {}),
        }

    def _store(self, bucket: str, name: str, data: bytes, meta: dict[str, Any]) -> Any:
        if not name:
            raise _Reply(400, http_error_body(400, "Required", "required"))
        for key, want in (("crc32c", struct.pack(">I", _crc32c(data))),
                          ("md5Hash", hashlib.md5(data).digest())):
            if meta.get(key) and base64.b64decode(meta[key]) != want:
                raise _Reply(400, http_error_body(
                    400, f"Provided {key} \"{meta[key]}\" doesn't match calculated {key}.",
                    "invalid"))
        resource = self._object_resource(bucket, name, data, meta)
        self.objects[(bucket, name)] = (resource, bytes(data))
        return resource

    def _need_bucket(self, bucket: str) -> None:
        if bucket not in self.buckets:
            raise _not_found("The specified bucket does not exist.")

    def _route_storage(self, method: str, kind: str, parts: list[str],
                       query: dict[str, list[str]], body: Any, raw: bytes,
                       headers: Any) -> Any:
        # kind: "json" (/storage/v1), "upload" (/upload/storage/v1), "download"
        if kind == "json" and parts == ["b"]:
            if method == "POST":
                name = (body or {}).get("name", "")
                if name in self.buckets:
                    raise _Reply(409, http_error_body(
                        409, "Your previous request to create the named bucket succeeded "
                        "and you already own it.", "conflict"))
                now = _now_rfc3339()
                self.buckets[name] = {
                    "kind": "storage#bucket", "id": name, "name": name,
                    "projectNumber": "123456789012", "metageneration": "1",
                    "location": (body or {}).get("location", "US"), "storageClass": "STANDARD",
                    "etag": "CAE=", "timeCreated": now, "updated": now,
                    "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}"}
                return self.buckets[name]
            if method == "GET":
                return {"kind": "storage#buckets", "items": list(self.buckets.values())}
        if len(parts) < 2 or parts[0] != "b":
            raise _not_found("Not Found")
        bucket = parts[1]
        if kind == "json" and len(parts) == 2:
            self._need_bucket(bucket)
            if method == "GET":
                return self.buckets[bucket]
            if method == "DELETE":
                if any(b == bucket for b, _ in self.objects):
                    raise _Reply(409, http_error_body(
                        409, "The bucket you tried to delete is not empty.", "conflict"))
                del self.buckets[bucket]
                return None
        if len(parts) < 3 or parts[2] != "o":
            raise _not_found("Not Found")
        self._need_bucket(bucket)
        if kind == "upload" and len(parts) == 3:
            return self._upload(method, bucket, query, body, raw, headers)
        if kind == "json" and len(parts) == 3 and method == "GET":
            prefix = query.get("prefix", [""])[0]
            names = sorted(n for b, n in self.objects if b == bucket and n.startswith(prefix))
            size = int(query.get("maxResults", ["1000"])[0] or 1000)
            start = int(query.get("pageToken", ["0"])[0] or 0)
            out: dict[str, Any] = {"kind": "storage#objects"}
            if names[start:start + size]:
                out["items"] = [self.objects[(bucket, n)][0] for n in names[start:start + size]]
            if start + size < len(names):
                out["nextPageToken"] = str(start + size)
            return out
        if len(parts) != 4:
            raise _not_found("Not Found")
        name = parts[3]
        if (bucket, name) not in self.objects:
            raise _not_found(f"No such object: {bucket}/{name}")
        resource, data = self.objects[(bucket, name)]
        if method == "GET" and (kind == "download" or query.get("alt") == ["media"]):
            crc = base64.b64encode(struct.pack(">I", _crc32c(data))).decode()
            md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
            raise _Reply(200, bytes(data), {
                "Content-Type": resource["contentType"],
                "x-goog-hash": f"crc32c={crc},md5={md5}",
                "x-goog-generation": resource["generation"],
                "x-goog-metageneration": "1", "x-goog-stored-content-length": str(len(data)),
                "x-goog-storage-class": "STANDARD", "ETag": resource["etag"]})
        if method == "GET":
            return resource
        if method == "DELETE":
            del self.objects[(bucket, name)]
            return None
        raise _not_found("Not Found")

    def _upload(self, method: str, bucket: str, query: dict[str, list[str]], body: Any,
                raw: bytes, headers: Any) -> Any:
        upload_type = query.get("uploadType", [""])[0]
        if upload_type == "media" and method == "POST":
            return self._store(bucket, query.get("name", [""])[0], raw,
                               {"contentType": headers.get("Content-Type")})
        if upload_type == "multipart" and method == "POST":
            meta, data = _parse_multipart(raw, headers.get("Content-Type", ""))
            return self._store(bucket, meta.get("name") or query.get("name", [""])[0], data,
                               meta)
        if upload_type == "resumable" and method == "POST":
            meta = body if isinstance(body, dict) else {}
            name = meta.get("name") or query.get("name", [""])[0]
            upload_id = f"{next(self._ids):x}"
            self._uploads[upload_id] = _Upload(bucket, name, meta)
            location = (f"{self._base_url}/upload/storage/v1/b/{bucket}/o?"
                        f"uploadType=resumable&upload_id={upload_id}")
            raise _Reply(200, b"", {"Location": location, "X-GUploader-UploadID": upload_id})
        if upload_type == "resumable" and method == "PUT":
            upload_id = query.get("upload_id", [""])[0]
            up = self._uploads.get(upload_id)
            if up is None:
                raise _not_found("No such upload session.")
            span = headers.get("Content-Range", "")
            m = re.fullmatch(r"bytes (\*|(\d+)-(\d+))/(\*|\d+)", span.strip())
            if not m:
                raise _Reply(400, http_error_body(400, f"bad Content-Range {span!r}", "invalid"))
            if m.group(2) is not None:
                first = int(m.group(2))
                if first != len(up.data):
                    raise _Reply(400, http_error_body(400, "chunk out of order", "invalid"))
                up.data += raw
            total = m.group(4)
            if total != "*" and int(total) == len(up.data):
                del self._uploads[upload_id]
                return self._store(up.bucket, up.name, bytes(up.data), up.meta)
            extra = {"Range": f"bytes=0-{len(up.data) - 1}"} if up.data else {}
            raise _Reply(308, b"", extra)
        raise _Reply(400, http_error_body(400, f"unsupported upload {upload_type!r}", "invalid"))

    _base_url = ""

    # -- dispatch -------------------------------------------------------------------------
    def handle(self, method: str, target: str, raw: bytes, headers: Any
               ) -> tuple[int, Any, dict[str, str]]:
        split = urlsplit(target)
        query = parse_qs(split.query, keep_blank_values=True)
        body: Any = None
        ctype = headers.get("Content-Type", "")
        if raw and "json" in ctype:
            try:
                body = json.loads(raw)
            except ValueError:
                return 400, http_error_body(400, "Invalid JSON payload received.", "parseError"), {}
        if method == "POST" and (blocked := self.wait_time(split.path)):
            time.sleep(blocked)   # outside the lock: other calls go on meanwhile
        with self.lock:
            self._request_no += 1
            self._settle()
            self.requests.append(Recorded(method, split.path, query,
                                          body if body is not None else (raw or None)))
            self._base_url = f"http://{headers.get('Host', self.host)}"
            segments = [unquote(s) for s in split.path.split("/")[1:]]
            try:
                if segments[:2] == ["compute", "v1"]:
                    result = self._route_compute(method, segments[2:], query, body)
                elif segments[:1] == ["v1"] and segments[1:2] == ["projects"]:
                    result = self._route_secrets(method, unquote(split.path[len("/v1/"):]),
                                                 query, body)
                elif segments[:2] == ["storage", "v1"]:
                    result = self._route_storage(method, "json", segments[2:], query, body,
                                                 raw, headers)
                elif segments[:3] == ["upload", "storage", "v1"]:
                    result = self._route_storage(method, "upload", segments[3:], query, body,
                                                 raw, headers)
                elif segments[:3] == ["download", "storage", "v1"]:
                    result = self._route_storage(method, "download", segments[3:], query, body,
                                                 raw, headers)
                else:
                    raise _not_found(f"no route for {method} {split.path}")
            except _Reply as reply:
                return reply.status, reply.body, reply.headers
            if result is None:
                return 204, b"", {}
            return 200, result, {}


def _parse_multipart(raw: bytes, content_type: str) -> tuple[dict[str, Any], bytes]:
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if not m:
        raise _Reply(400, http_error_body(400, "missing multipart boundary", "invalid"))
    delimiter = b"--" + m.group(1).encode()
    parts = []
    for chunk in raw.split(delimiter)[1:]:
        if chunk.startswith(b"--"):
            break
        chunk = chunk.removeprefix(b"\r\n")
        _, _, content = chunk.partition(b"\r\n\r\n")
        parts.append(content.removesuffix(b"\r\n"))
    if len(parts) != 2:
        raise _Reply(400, http_error_body(400, "multipart body needs 2 parts", "invalid"))
    return json.loads(parts[0]), parts[1]


def _crc32c(data: bytes) -> int:
    import google_crc32c

    return int(google_crc32c.value(bytes(data)))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cloud: FakeGoogleCloud

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        raw = self._read_body()
        status, body, headers = self.cloud.handle(self.command, self.path, raw, self.headers)
        if isinstance(body, bytes | bytearray):
            payload = bytes(body)
        else:
            payload = json.dumps(body).encode()
            headers = {"Content-Type": "application/json; charset=UTF-8", **headers}
        self.send_response(status, _HTTP_REASONS.get(status))
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle
