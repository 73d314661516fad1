"""Plays the VMs of a cloud sweep on this machine, for the end-to-end tests (EC2 in moto:
:class:`Vms`; Compute Engine in :mod:`tests.gce_server`: :class:`GceVms`).

For every instance the autoscaler launched in the fake cloud (moto's EC2), it does what the VM
would after booting: it runs the instance's own user data (the real startup script, read back
from EC2) as a local process, with an instance-metadata endpoint that names the instance. The
script is run as written, except for three paths a test cannot touch: the install prefix
(``/opt/elastune``, here the test's virtual environment, so the install step is skipped as on
a VM that already has it), the log file, and ``shutdown`` (here a command that records the
power-off; the harness then does what EC2 does for an instance launched with
``InstanceInitiatedShutdownBehavior=terminate``: terminates it). When the cloud terminates or
takes back an instance, the harness kills its process group, as losing the VM would.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GONE = {"shutting-down", "terminated", "stopping", "stopped"}
GCE_GONE = {"STOPPING", "STOPPED", "SUSPENDING", "SUSPENDED", "TERMINATED"}


class _Metadata(BaseHTTPRequestHandler):
    """IMDSv2 for many instances: ``/<instance-id>/latest/...``; ``spot/instance-action`` is
    404 until the test gives the instance its interruption notice (as EC2 does)."""

    notices: dict[str, str] = {}

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass

    def _reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:  # noqa: N802 - stdlib's name
        if self.path.endswith("/latest/api/token"):
            self._reply(200, "token-" + self.path.split("/")[1])
        else:
            self._reply(404, "")

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        iid, _, rest = self.path.lstrip("/").partition("/")
        if self.headers.get("X-aws-ec2-metadata-token") != f"token-{iid}":
            self._reply(401, "")
        elif rest == "latest/meta-data/instance-id":
            self._reply(200, iid)
        elif rest == "latest/meta-data/spot/instance-action" and iid in self.notices:
            self._reply(200, self.notices[iid])
        else:
            self._reply(404, "")


@dataclass
class Vm:
    instance_id: str
    dir: Path
    script: str
    process: subprocess.Popen[bytes]
    killed: bool = False          # by the harness, because the cloud took the instance
    powered_off: bool = False     # by its own startup script

    @property
    def log(self) -> str:
        path = self.dir / "worker.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class Vms:
    """Watches EC2 (moto, directly: the fault proxy is the controller's view) and runs VMs."""

    moto_url: str
    workdir: Path
    region: str = "us-east-1"
    boot_s: float = 0.5
    poll_s: float = 0.2
    vms: dict[str, Vm] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        import boto3

        self._ec2 = boto3.client("ec2", region_name=self.region, endpoint_url=self.moto_url)
        self._handler = type("Metadata", (_Metadata,), {"notices": {}})
        self._meta = ThreadingHTTPServer(("127.0.0.1", 0), self._handler)
        self._meta.daemon_threads = True
        threading.Thread(target=self._meta.serve_forever, daemon=True).start()
        self.metadata_url = f"http://127.0.0.1:{self._meta.server_address[1]}"
        self._prefix, self._sbin = _vm_tools(self.workdir)
        self._first_seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vms", daemon=True)
        self._thread.start()

    # -- the loop -----------------------------------------------------------------------------
    def _instances(self) -> Iterator[dict[str, Any]]:
        reply = self._ec2.describe_instances(
            Filters=[{"Name": "tag-key", "Values": ["elastune-managed"]}])
        for reservation in reply["Reservations"]:
            yield from reservation["Instances"]

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self._tick()
            except Exception as exc:  # keep playing; the test reads the errors
                self.errors.append(repr(exc))

    def _tick(self) -> None:
        now = time.monotonic()
        for raw in self._instances():
            iid, state = raw["InstanceId"], raw["State"]["Name"]
            vm = self.vms.get(iid)
            if state in GONE:
                if vm is not None and vm.process.poll() is None:
                    vm.killed = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(vm.process.pid, signal.SIGKILL)
                continue
            if vm is None:
                first = self._first_seen.setdefault(iid, now)
                if state == "running" and now - first >= self.boot_s:
                    self.vms[iid] = self._boot(iid)
            elif vm.process.poll() is not None and (vm.dir / "powered-off").exists():
                vm.powered_off = True
                self._ec2.terminate_instances(InstanceIds=[iid])

    def _boot(self, iid: str) -> Vm:
        attr = self._ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")
        script = base64.b64decode(attr["UserData"]["Value"]).decode()
        return _run_script(iid, script, self.workdir, self._prefix, self._sbin,
                           {"ELASTUNE_METADATA_URL": f"{self.metadata_url}/{iid}"})

    # -- what tests use -----------------------------------------------------------------------
    def give_notice(self, instance_id: str) -> None:
        """EC2's two-minute warning before it takes a spot instance back."""
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 120))
        self._handler.notices[instance_id] = (
            '{"action": "terminate", "time": "' + when + '"}')

    def running(self) -> list[Vm]:
        return [vm for vm in self.vms.values() if vm.process.poll() is None]

    def wait_all_gone(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                return True
            time.sleep(0.2)
        return False

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for vm in self.vms.values():
            if vm.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(vm.process.pid, signal.SIGKILL)
                vm.process.wait(timeout=10)
        self._meta.shutdown()
        self._meta.server_close()


def _vm_tools(workdir: Path) -> tuple[Path, Path]:
    """The install prefix (this virtual environment's ``elastune``) and a folder with the
    ``shutdown`` a VM's script calls, which records the power-off."""
    prefix = workdir / "opt-elastune"
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    elastune = Path(sys.executable).parent / "elastune"
    link = prefix / "bin" / "elastune"
    if not link.exists():
        link.symlink_to(elastune)
    sbin = workdir / "sbin"
    sbin.mkdir(exist_ok=True)
    shutdown = sbin / "shutdown"
    shutdown.write_text('#!/bin/sh\ntouch "$ELASTUNE_VM_DIR/powered-off"\n')
    shutdown.chmod(0o755)
    return prefix, sbin


def _run_script(name: str, script: str, workdir: Path, prefix: Path, sbin: Path,
                env_extra: dict[str, str]) -> Vm:
    """Start a VM's startup script as a local process group, with its paths made local."""
    vm_dir = workdir / name
    vm_dir.mkdir(parents=True, exist_ok=True)
    local = (script.replace("/opt/elastune", str(prefix))
             .replace("/var/log/elastune-worker.log", str(vm_dir / "worker.log")))
    path = vm_dir / "user-data.sh"
    path.write_text(local)
    env = dict(os.environ)
    env.update({
        **env_extra,
        "ELASTUNE_VM_DIR": str(vm_dir),
        "ELASTUNE_NOTICE_POLL_S": "0.3",
        "PATH": f"{sbin}{os.pathsep}{env.get('PATH', '')}",
        # The user's code, as the install spec would put it on the VM.
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p),
    })
    process = subprocess.Popen(["bash", str(path)], cwd=vm_dir, env=env,
                               start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    return Vm(name, vm_dir, script, process)


class _GceMetadata(BaseHTTPRequestHandler):
    """The GCE metadata server for many VMs: ``/<name>/instance/name`` and
    ``/<name>/instance/preempted`` (``FALSE``), with the ``Metadata-Flavor`` header GCE asks."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        name, _, rest = self.path.lstrip("/").partition("/")
        status, body = 404, ""
        if self.headers.get("Metadata-Flavor") != "Google":
            status = 403
        elif rest == "instance/name":
            status, body = 200, name
        elif rest == "instance/preempted":
            status, body = 200, "FALSE"
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@dataclass
class GceVms:
    """Watches the local Compute endpoint (in this process) and runs its VMs: an instance
    that turns RUNNING gets its ``startup-script`` metadata run as a local process, which
    reads the broker password from the endpoint's Secret Manager
    (``ELASTUNE_GCP_SECRETS_ENDPOINT``) and storage through ``STORAGE_EMULATOR_HOST`` (set by
    the test). A VM that powers itself off is stopped, as GCE does; a VM the cloud stopped or
    deleted has its processes killed."""

    cloud: Any          # tests.gce_server.FakeGoogleCloud
    workdir: Path
    boot_s: float = 0.5
    poll_s: float = 0.2
    vms: dict[str, Vm] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._meta = ThreadingHTTPServer(("127.0.0.1", 0), _GceMetadata)
        self._meta.daemon_threads = True
        threading.Thread(target=self._meta.serve_forever, daemon=True).start()
        self.metadata_url = f"http://127.0.0.1:{self._meta.server_address[1]}"
        self._prefix, self._sbin = _vm_tools(self.workdir)
        self._first_seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gce-vms", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self._tick()
            except Exception as exc:  # keep playing; the test reads the errors
                self.errors.append(repr(exc))

    def _tick(self) -> None:
        now = time.monotonic()
        instances = self.cloud.read_instances()
        for name, vm in self.vms.items():
            gone = name not in instances or instances[name]["status"] in GCE_GONE
            if gone and vm.process.poll() is None:
                vm.killed = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(vm.process.pid, signal.SIGKILL)
            elif not gone and vm.process.poll() is not None \
                    and (vm.dir / "powered-off").exists():
                vm.powered_off = True
                self.cloud.set_status(name, "TERMINATED")
        for name, raw in instances.items():
            if name in self.vms or raw["status"] != "RUNNING":
                continue
            if now - self._first_seen.setdefault(name, now) >= self.boot_s:
                items = {i["key"]: i["value"] for i in raw["metadata"]["items"]}
                self.vms[name] = _run_script(
                    name, items["startup-script"], self.workdir, self._prefix, self._sbin,
                    {"ELASTUNE_METADATA_URL": f"{self.metadata_url}/{name}",
                     "ELASTUNE_GCP_SECRETS_ENDPOINT": self.cloud.url})

    def running(self) -> list[Vm]:
        return [vm for vm in self.vms.values() if vm.process.poll() is None]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for vm in self.vms.values():
            if vm.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(vm.process.pid, signal.SIGKILL)
                vm.process.wait(timeout=10)
        self._meta.shutdown()
        self._meta.server_close()
