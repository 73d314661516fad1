"""Test fixtures for the AWS side: moto's server over real HTTP, behind a proxy that answers
chosen requests with the errors AWS really sends.

moto serves EC2, SSM and S3 in a thread of the test process (so a test can also reach into its
state, e.g. to have EC2 interrupt a spot instance). In front of it a small HTTP proxy:

* answers requests that match a :class:`Fault` with AWS's error body and status (capacity
  shortage, quota, throttling, auth failure), as often as the fault says;
* records every request's action and parameters, so a test can see what was tried;
* gives ``RunInstances`` AWS's meaning of ``MinCount``/``MaxCount`` (moto launches
  ``MinCount`` instances; AWS launches as many as it can up to ``MaxCount``), optionally
  capped by ``launch_limit`` to play a partial launch;
* sets the ``spotPrice`` of moto's ``DescribeSpotPriceHistory`` answer per zone from
  ``spot_prices`` (moto reports one fixed price everywhere; EC2's differ by zone).

Clients are real boto3 clients over HTTP with fake credentials; nothing stands in for boto3.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import threading
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode
from xml.sax.saxutils import escape

import pytest

# AWS's status and message for the error codes the tests play. EC2 answers a capacity
# shortage with HTTP 500 (botocore would retry it as a transient failure), throttling with 503.
ERRORS: dict[str, tuple[int, str]] = {
    "InsufficientInstanceCapacity": (
        500, "We currently do not have sufficient {InstanceType} capacity in the Availability "
             "Zone you requested ({Placement.AvailabilityZone}). Our system will be working on "
             "provisioning additional capacity."),
    "Unsupported": (400, "Your requested instance type ({InstanceType}) is not supported in "
                         "your requested Availability Zone ({Placement.AvailabilityZone})."),
    "VcpuLimitExceeded": (400, "You have requested more vCPU capacity than your current vCPU "
                               "limit of 0 allows for the instance bucket that the specified "
                               "instance type belongs to."),
    "MaxSpotInstanceCountExceeded": (400, "Max spot instance count exceeded"),
    "InstanceLimitExceeded": (400, "You have requested more instances than your current "
                                   "instance limit allows for the specified instance type."),
    "RequestLimitExceeded": (503, "Request limit exceeded."),
    "AuthFailure": (401, "AWS was not able to validate the provided access credentials"),
    "UnauthorizedOperation": (403, "You are not authorized to perform this operation."),
    "AccessDeniedException": (400, "User is not authorized to perform this operation"),
    "ValidationException": (400, "Invalid request"),
}
REGION = "us-east-1"


@dataclass
class Fault:
    """Answer requests of ``action`` whose parameters include ``match`` with error ``code``;
    ``times`` requests (every one when None)."""

    action: str
    code: str
    match: Mapping[str, str] = field(default_factory=dict)
    times: int | None = None
    status: int | None = None
    message: str | None = None
    hits: int = 0

    def matches(self, action: str, params: Mapping[str, str]) -> bool:
        if action != self.action or (self.times is not None and self.hits >= self.times):
            return False
        return all(params.get(k) == v for k, v in self.match.items())

    def reply(self, params: Mapping[str, str]) -> tuple[int, str]:
        status, message = ERRORS.get(self.code, (400, self.code))
        text = self.message if self.message is not None else message
        for key, value in params.items():
            text = text.replace("{" + key + "}", value)
        return self.status or status, text


@dataclass
class Call:
    action: str
    params: dict[str, str]


def _protocol(headers: Any, body: bytes) -> tuple[str, str, dict[str, str]]:
    """(protocol, action, parameters) of a request: EC2's query protocol, JSON (SSM) or REST
    (S3)."""
    target = headers.get("X-Amz-Target")
    if target:
        try:
            params = {k: str(v) for k, v in json.loads(body or b"{}").items()}
        except (ValueError, AttributeError):
            params = {}
        return "json", target.rpartition(".")[2], params
    if "x-www-form-urlencoded" in (headers.get("Content-Type") or ""):
        params = dict(parse_qsl(body.decode(), keep_blank_values=True))
        return "query", params.get("Action", ""), params
    return "rest", "", {}


def _error_body(protocol: str, code: str, message: str) -> tuple[bytes, str]:
    request_id = str(uuid.uuid4())
    if protocol == "json":
        return (json.dumps({"__type": code, "message": message}).encode(),
                "application/x-amz-json-1.1")
    if protocol == "query":
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
                f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error>"
                f"</Errors><RequestID>{request_id}</RequestID></Response>").encode(), "text/xml"
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{escape(code)}</Code>'
            f"<Message>{escape(message)}</Message><RequestId>{request_id}</RequestId>"
            "</Error>").encode(), "application/xml"


_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer",
        "upgrade", "content-length"}


class _Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _relay(self) -> None:
        fake = self.server.fake
        body = self._body()
        protocol, action, params = _protocol(self.headers, body)
        fault = fake._observe(action, params)
        if fault is not None:
            status, message = fault.reply(params)
            payload, ctype = _error_body(protocol, fault.code, message)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        if protocol == "query" and action == "RunInstances":
            body = fake._run_instances_body(params)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(*fake.moto_address, timeout=60)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for key, value in resp.getheaders():
                if key.lower() not in _HOP:
                    self.send_header(key, value)
            if self.command == "HEAD":
                self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
                self.end_headers()
            else:
                if protocol == "query" and action == "DescribeSpotPriceHistory":
                    data = fake._spot_price_body(data)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
        finally:
            conn.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeAws


class FakeAws:
    """moto's server and the fault-injecting proxy in front of it (``url``)."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        self.moto_address: tuple[str, int] = self._moto.get_host_and_port()
        self.moto_url = "http://{}:{}".format(*self.moto_address)
        self._proxy = _ProxyServer(("127.0.0.1", 0), _Proxy)
        self._proxy.fake = self
        self._thread = threading.Thread(target=self._proxy.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._proxy.server_address[1]}"
        self._lock = threading.Lock()
        self.faults: list[Fault] = []
        self.calls: list[Call] = []
        self.launch_limit: int | None = None
        self.spot_prices: dict[str, str] = {}     # zone -> the spot price EC2 reports there
        self._image_id: str | None = None

    # -- what the proxy does ----------------------------------------------------------------
    def _observe(self, action: str, params: Mapping[str, str]) -> Fault | None:
        with self._lock:
            self.calls.append(Call(action, dict(params)))
            for fault in self.faults:
                if fault.matches(action, params):
                    fault.hits += 1
                    return fault
        return None

    def _run_instances_body(self, params: Mapping[str, str]) -> bytes:
        out = dict(params)
        wanted = int(out.get("MaxCount") or out.get("MinCount") or 1)
        if self.launch_limit is not None:
            wanted = min(wanted, self.launch_limit)
        out["MinCount"] = out["MaxCount"] = str(wanted)
        return urlencode(out).encode()

    def _spot_price_body(self, data: bytes) -> bytes:
        with self._lock:
            prices = dict(self.spot_prices)

        def item(m: re.Match[bytes]) -> bytes:
            zone = re.search(rb"<availabilityZone>([^<]*)</availabilityZone>", m.group(0))
            price = prices.get(zone.group(1).decode()) if zone else None
            if price is None:
                return m.group(0)
            return re.sub(rb"<spotPrice>[^<]*</spotPrice>",
                          f"<spotPrice>{price}</spotPrice>".encode(), m.group(0))

        return re.sub(rb"<item>.*?</item>", item, data, flags=re.S) if prices else data

    # -- what tests use ---------------------------------------------------------------------
    def fail(self, action: str, code: str, *, match: Mapping[str, str] | None = None,
             times: int | None = None, status: int | None = None,
             message: str | None = None) -> Fault:
        fault = Fault(action, code, dict(match or {}), times, status, message)
        with self._lock:
            self.faults.append(fault)
        return fault

    def requests(self, action: str) -> list[dict[str, str]]:
        """Parameters of every request of ``action`` the proxy saw, faulted ones included."""
        with self._lock:
            return [c.params for c in self.calls if c.action == action]

    def reset(self) -> None:
        """Forget every resource, fault and recorded call."""
        req = urllib.request.Request(f"{self.moto_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - local server
            resp.read()
        with self._lock:
            self.faults.clear()
            self.calls.clear()
            self.launch_limit = None
            self.spot_prices.clear()

    def client(self, service: str, region: str = REGION) -> Any:
        import boto3

        return boto3.client(service, region_name=region, endpoint_url=self.moto_url)

    def image_id(self) -> str:
        """A Linux AMI id among moto's built-in images."""
        if self._image_id is None:
            images = self.client("ec2").describe_images(
                Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])
            linux = [i for i in images["Images"] if i.get("Platform") != "windows"]
            self._image_id = sorted(i["ImageId"] for i in linux)[0]
        return self._image_id

    def ec2_backend(self, region: str = REGION) -> Any:
        from moto.backends import get_backend
        from moto.core import DEFAULT_ACCOUNT_ID

        return get_backend("ec2")[DEFAULT_ACCOUNT_ID][region]

    def interrupt_spot(self, instance_id: str, region: str = REGION, *,
                       request_status: str | None = None) -> None:
        """What EC2 does when it takes a spot instance back: terminate it, with the spot
        termination as the state reason; or, with ``request_status``, an inconclusive state
        reason and the status on the instance's spot request (one made with
        ``RequestSpotInstances``)."""
        from moto.ec2.models.instances import StateReason

        backend = self.ec2_backend(region)
        instance = backend.get_instance(instance_id)
        instance.terminate()
        if request_status is None:
            instance.state_reason = StateReason(
                "Server.SpotInstanceTermination: Spot instance termination",
                "Server.SpotInstanceTermination")
            return
        instance.state_reason = StateReason()
        request = next(r for r in backend.spot_instance_requests.values()
                       if r.instance is instance)
        request.state = "closed"
        request._status_code = request_status
        # moto does not link a request's instance back to it; EC2 does.
        instance.spot_instance_request_id = request.id

    def close(self) -> None:
        self._proxy.shutdown()
        self._proxy.server_close()
        self._moto.stop()


# Fixtures under their pytest names; a test module imports the *_fixture functions.
@pytest.fixture(scope="session", name="aws_server")
def aws_server_fixture() -> Iterator[FakeAws]:
    server = FakeAws()
    yield server
    server.close()


@pytest.fixture(name="aws_env")
def aws_env_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials for this test only; no profile, config file or endpoint leaks in."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN",
                "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(name="aws")
def aws_fixture(aws_server: FakeAws, aws_env: None) -> Iterator[FakeAws]:
    """The fake AWS, empty, with no faults."""
    aws_server.reset()
    yield aws_server
    aws_server.reset()
