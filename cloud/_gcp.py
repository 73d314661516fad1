"""The Google Cloud provider: GPU VMs on Compute Engine through ``google-cloud-compute``.

Each worker is one VM named ``elastune-<experiment>-<random>``, labelled
``elastune-managed=true`` and ``elastune-experiment=<experiment>`` (so ``list`` and
``cleanup`` find it with a server-side label filter), carrying the original tags in its
metadata and the worker bootstrap (:func:`cloud._bootstrap.startup_script`) as its
``startup-script``. The script holds no password: the VM reads the broker password from Secret
Manager with its service account (:meth:`GcpProvider.put_secret` puts it there).

Catalog names follow ``budgets/data/prices.csv``: a machine type with built-in GPUs
(``g2-standard-4``, ``a2-highgpu-1g``), or ``<n1 machine type>+<N>x<accelerator>``
(``n1-standard-8+1xnvidia-tesla-t4``) for guest accelerators.

A launch creates its VMs concurrently (one insert and one operation wait per VM, a few at
once), each falling back through :func:`cloud._fallback.launch_with_fallback` (shared with
AWS): a stockout tries the next zone, then the next machine type in ``machine_types`` after the
asked one; a quota error skips to the next type. Spot launches walk the zones in the order a
spot policy last preferred (:meth:`GcpProvider.prefer_zones`, the :class:`cloud.ZonedSpot`
interface: each zone's spot price is its region's in the price book). Throttling is retried
here with jittered exponential backoff (``google.api_core.retry.Retry``); errors arrive either
as HTTP errors on the insert call or inside the finished zone operation, and both go through
the same mapping (:func:`map_gcp_error`).

Spot VMs use ``provisioningModel=SPOT`` with ``instanceTerminationAction=DELETE``; a VM that
Compute Engine took back is found through the zone's ``compute.instances.preempted``
operations (the documented way to tell a preemption from a deletion) and listed with
``preempted=True``.

The Google SDKs are imported inside the methods that use them, so importing ``cloud`` stays
light on machines that never talk to Google Cloud.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from budgets import Clock, InstanceType, PriceBook, RealClock
from cloud._bootstrap import startup_script
from cloud._fallback import fallback_types, launch_with_fallback, preferred_order
from cloud._provider import (
    AuthError,
    Bootstrap,
    CapacityError,
    NotFoundError,
    ProviderError,
    QuotaError,
    ThrottledError,
)
from worker.records import Instance, InstanceState

if TYPE_CHECKING:
    from google.api_core.retry import Retry

log = logging.getLogger(__name__)
T = TypeVar("T")

#: A Deep Learning VM image family with the NVIDIA driver and CUDA preinstalled.
DEFAULT_IMAGE = ("projects/deeplearning-platform-release/global/images/family/"
                 "common-cu128-ubuntu-2204-nvidia-570")
LABEL_MANAGED = "elastune-managed"
LABEL_EXPERIMENT = "elastune-experiment"
TAGS_METADATA_KEY = "elastune-tags"
PREEMPTED_OPERATION = "compute.instances.preempted"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
NAME_PREFIX = "elastune"
#: VMs of one launch created at once: each insert is its own operation, waited for on its own
#: thread, so a launch takes about one VM's creation time, not the sum (kept below the HTTP
#: client's connection pool of 10).
PARALLEL_INSERTS = 8

_STATES = {
    "PROVISIONING": InstanceState.PENDING,
    "STAGING": InstanceState.PENDING,
    "REPAIRING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "STOPPING": InstanceState.TERMINATED,
    "STOPPED": InstanceState.TERMINATED,
    "SUSPENDING": InstanceState.TERMINATED,
    "SUSPENDED": InstanceState.TERMINATED,
    "TERMINATED": InstanceState.TERMINATED,
}


# -- names, labels, catalog names --------------------------------------------------------------

def sanitize_label(value: str) -> str:
    """A GCE label value for ``value``: lowercase letters, digits, ``-`` and ``_``, <= 63."""
    return re.sub(r"[^a-z0-9_-]+", "-", value.lower())[:63]


def instance_name(experiment: str | None = None, suffix: str | None = None) -> str:
    """``elastune-<experiment>-<suffix>``: a valid GCE name (``[a-z]([-a-z0-9]*[a-z0-9])?``,
    at most 63 characters), unique through the random ``suffix``."""
    suffix = suffix or secrets.token_hex(4)
    room = 63 - len(NAME_PREFIX) - len(suffix) - 2
    exp = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]+", "-", (experiment or "").lower()))
    exp = exp[:room].strip("-")
    return "-".join(p for p in (NAME_PREFIX, exp, suffix) if p)


def parse_instance_type(name: str) -> tuple[str, str | None, int]:
    """``"n1-standard-8+2xnvidia-tesla-t4"`` -> ``("n1-standard-8", "nvidia-tesla-t4", 2)``;
    ``"g2-standard-4"`` -> ``("g2-standard-4", None, 0)``."""
    m = re.fullmatch(r"([a-z0-9-]+)(?:\+(\d+)x([a-z0-9-]+))?", name)
    if not m:
        raise ProviderError(f"instance type {name!r} is not a GCE machine type, nor "
                            "'<machine type>+<N>x<accelerator>' "
                            "(e.g. n1-standard-8+1xnvidia-tesla-t4)")
    machine, count, accelerator = m.groups()
    return machine, accelerator, int(count or 0)


def region_of(zone: str) -> str:
    """``us-central1-a`` -> ``us-central1``."""
    return zone.rsplit("-", 1)[0]


# -- errors ------------------------------------------------------------------------------------

def _norm(code: object) -> str:
    return re.sub(r"[^a-z]", "", str(code).lower())


_THROTTLE_CODES = {"ratelimitexceeded", "userratelimitexceeded",
                   "resourceoperationrateexceeded", "operationratelimitexceeded"}
_CAPACITY_CODES = {"zoneresourcepoolexhausted", "zoneresourcepoolexhaustedwithdetails",
                   "regionresourcepoolexhausted", "resourcepoolexhausted",
                   "insufficientcapacity", "stockout"}
_QUOTA_CODES = {"quotaexceeded"}
_AUTH_CODES = {"iampermissiondenied", "forbidden", "insufficientpermissions",
               "accessnotconfigured", "autherror", "permissionserror", "unauthenticated",
               "permissiondenied"}
_NOT_FOUND_CODES = {"notfound", "resourcenotfound"}
_CAPACITY_TEXT = re.compile(r"does not have enough resources available|"
                            r"resource pool exhausted|currently unavailable in the", re.I)
_QUOTA_TEXT = re.compile(r"\bquota '[^']+' exceeded", re.I)

_HINTS: dict[type[ProviderError], str] = {
    CapacityError: "no capacity for this machine type there now; try another zone, type or "
                   "later",
    QuotaError: "the project's quota does not allow it; ask for more in the console "
                "(IAM & Admin > Quotas) or use another type or region",
    ThrottledError: "Compute Engine asked us to slow down",
    AuthError: "check the credentials (gcloud auth application-default login, or the "
               "service account) and their roles, e.g. roles/compute.instanceAdmin.v1",
    NotFoundError: "it does not exist (or is already gone)",
}


def _classify(status: int, codes: Sequence[str], message: str) -> type[ProviderError]:
    norm = {_norm(c) for c in codes if c}
    if status == 429 or norm & _THROTTLE_CODES:
        return ThrottledError
    if norm & _CAPACITY_CODES or _CAPACITY_TEXT.search(message):
        return CapacityError
    if norm & _QUOTA_CODES or _QUOTA_TEXT.search(message):
        return QuotaError
    if status in (401, 403) or norm & _AUTH_CODES:
        return AuthError
    if status == 404 or norm & _NOT_FOUND_CODES:
        return NotFoundError
    if status == 503:
        return ThrottledError
    return ProviderError


def map_gcp_error(error: object, context: str = "") -> ProviderError:
    """The :mod:`cloud._provider` error for a Google Cloud failure.

    ``error`` may be a ``google.api_core`` exception (an HTTP error answer, or a
    ``RetryError`` around one), a ``google.auth`` credentials error, a finished
    ``compute_v1.Operation`` with ``error.errors`` (or its JSON as a dict), or a
    :class:`ProviderError` (returned unchanged). ``context`` says what was being done; it
    starts the message, followed by the cloud's codes and message and what to do.
    """
    if isinstance(error, ProviderError):
        return error
    status, codes, message = 0, [], str(error)
    if isinstance(error, Mapping):
        errors = (error.get("error") or {}).get("errors") or []
        codes = [str(e.get("code", "")) for e in errors]
        message = "; ".join(str(e.get("message", "")) for e in errors) or message
        status = int(error.get("httpErrorStatusCode") or 0)
    elif isinstance(error, BaseException):
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc

        if isinstance(error, gexc.RetryError) and error.cause is not None:
            return map_gcp_error(error.cause, context)
        if isinstance(error, auth_exc.GoogleAuthError):
            kind: type[ProviderError] = AuthError
            text = f"{context}: {type(error).__name__}: {error}" if context else str(error)
            return kind(f"{text} ({_HINTS[kind]})")
        if _is_network_error(error):  # transient: the caller backs off and tries again
            text = f"{context}: " if context else ""
            return ThrottledError(f"{text}cannot reach the API: {type(error).__name__}: {error}")
        if isinstance(error, gexc.GoogleAPICallError):
            status = int(error.code or 0)
            codes = [str(e.get("reason", "")) for e in error.errors or []
                     if isinstance(e, Mapping)]
            if error.reason:
                codes.append(error.reason)
            message = error.message or message
    elif hasattr(error, "error") and hasattr(error, "http_error_status_code"):
        errors = list(error.error.errors)  # type: ignore[attr-defined]
        codes = [e.code for e in errors]
        message = "; ".join(e.message for e in errors) or message
        status = int(error.http_error_status_code or 0)  # type: ignore[attr-defined]
    kind = _classify(status, codes, message)
    what = ", ".join(dict.fromkeys(c for c in codes if c)) or (f"HTTP {status}" if status
                                                                 else type(error).__name__)
    text = f"{context}: " if context else ""
    hint = _HINTS.get(kind)
    return kind(f"{text}{what}: {message}" + (f" ({hint})" if hint else ""))


def _reason(error: ProviderError) -> str:
    """An error's codes and message without the context and the hint (for a list of
    attempts that already names the type and zone, and says what to do)."""
    text = re.sub(r"^launching .*? in \S+: ", "", str(error))
    hint = _HINTS.get(type(error))
    return text.removesuffix(f" ({hint})") if hint else text


def _is_network_error(error: BaseException) -> bool:
    try:
        import requests
    except ImportError:  # pragma: no cover - google-auth's REST transport brings it
        return False
    return isinstance(error, requests.exceptions.ConnectionError | requests.exceptions.Timeout)


def _name(value: object) -> str:
    """An enum or string field's name (``Operation.status`` is an enum, ``Instance.status`` a
    string)."""
    return str(getattr(value, "name", value))


def _epoch(timestamp: str, default: float) -> float:
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


# -- the provider -----------------------------------------------------------------------------

class GcpProvider:
    """Compute Engine VMs as elastune workers.

    Args:
        project: the GCP project id.
        zones: zones to try, in order (e.g. ``["us-central1-a", "us-central1-b"]``); spot
            launches walk them in the order :meth:`prefer_zones` last gave.
        machine_types: catalog names to fall back to, in order, after the one a launch asks for.
        bootstrap: what each VM runs (broker URL, secret name, storage); without it VMs get no
            startup script (a custom image must start the worker itself).
        image: the boot image (an image or image family URL).
        service_account: the VMs' service account email (default: the project's Compute Engine
            default account); it needs Secret Manager access and the storage bucket.
        network: the VPC network; VMs get an external IP unless ``external_ip=False``.
        disk_gb: boot disk size.
        prices: the price book (default: the shipped catalog).
        api_endpoint: another endpoint for Compute Engine and Secret Manager (e.g. a local
            server: ``http://127.0.0.1:8080``).
        credentials: ``google.auth`` credentials (default: application default credentials).
        clock: the clock for launch and termination times.
        retry: a ``google.api_core.retry.Retry`` for throttled calls (its predicate is replaced);
            default: jittered exponential backoff from 1 s to 30 s for up to 120 s.
        operation_timeout_s: how long to wait for an insert operation to finish.
    """

    name = "gcp"
    blocking_launch = True    # the controller launches on a thread

    def __init__(
        self,
        project: str,
        zones: Sequence[str],
        machine_types: Sequence[str],
        *,
        bootstrap: Bootstrap | None = None,
        image: str = DEFAULT_IMAGE,
        service_account: str | None = None,
        network: str = "global/networks/default",
        disk_gb: int = 100,
        prices: PriceBook | None = None,
        api_endpoint: str | None = None,
        credentials: Any = None,
        clock: Clock | None = None,
        retry: Retry | None = None,
        operation_timeout_s: float = 600.0,
        external_ip: bool = True,
    ) -> None:
        if not zones:
            raise ValueError("GcpProvider needs at least one zone")
        self.project = project
        self.zones = list(zones)
        self.machine_types = list(machine_types)
        self.bootstrap = bootstrap
        self.image = image
        self.service_account = service_account
        self.network = network
        self.disk_gb = disk_gb
        self.prices = prices or PriceBook()
        self.api_endpoint = api_endpoint
        self.credentials = credentials
        self.operation_timeout_s = operation_timeout_s
        self.external_ip = external_ip
        self._clock = clock or RealClock()
        self._retry_arg = retry
        self._retry: Retry | None = None
        self._clients: dict[str, Any] = {}
        self._known: dict[str, Instance] = {}       # every instance this provider has seen
        # Launches run on other threads than list/terminate (the controller's launcher, and
        # the inserts of one launch): they share the clients and ``_known``.
        self._lock = threading.RLock()
        self._deleted_by_us: set[str] = set()
        # The zones spot launches walk, in order (prefer_zones); ``zones`` stays what list,
        # terminate and cleanup scan.
        self._spot_walk: tuple[str, ...] = ()

    # -- catalog ----------------------------------------------------------------------------
    def _catalog(self, instance_type: str, zone: str | None = None) -> InstanceType:
        region = region_of(zone or self.zones[0])
        try:
            return self.prices.get("gcp", instance_type, region)
        except KeyError as exc:
            elsewhere = [t for t in self.prices.types("gcp") if t.name == instance_type]
            if elsewhere:
                return elsewhere[0]  # priced in another region: the best estimate we have
            raise ProviderError(f"unknown GCP instance type {instance_type!r}: "
                                f"{exc.args[0]}") from None

    def price_per_hour(self, instance_type: str, spot: bool = False) -> float:
        """List price per hour (from the price book), the highest over the zones' regions: a
        launch may land in any of them, and budgets must not count less."""
        return max(self._price(instance_type, zone, spot) for zone in self.zones)

    def spot_price_in(self, zone: str, instance_type: str) -> float:
        """The spot price per hour in ``zone``'s region (from the price book; the on-demand
        price where the type has no spot price)."""
        try:
            return self._catalog(instance_type, zone).hourly(True, fallback=True)
        except LookupError as exc:
            raise ProviderError(str(exc)) from None

    def prefer_zones(self, zones: Sequence[str]) -> None:
        """Have the next spot launches walk these zones, in this order (zones not in
        ``zones`` are ignored; none left: the configured order). On-demand launches, and
        ``list``, ``terminate`` and ``cleanup``, keep the configured zones."""
        self._spot_walk = tuple(preferred_order(self.zones, zones))

    def _price(self, instance_type: str, zone: str, spot: bool) -> float:
        try:
            return self._catalog(instance_type, zone).hourly(spot)
        except LookupError as exc:
            raise ProviderError(str(exc)) from None

    def slots(self, instance_type: str) -> int:
        """GPUs of one instance of this type (from the price book)."""
        return self._catalog(instance_type).gpus

    # -- clients ----------------------------------------------------------------------------
    def _client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"transport": "rest"}
        if self.api_endpoint:
            from google.api_core.client_options import ClientOptions

            kwargs["client_options"] = ClientOptions(api_endpoint=self.api_endpoint)
        if self.credentials is not None:
            kwargs["credentials"] = self.credentials
        return kwargs

    def _client(self, kind: str) -> Any:
        with self._lock:
            return self._make_client(kind)

    def _make_client(self, kind: str) -> Any:
        if kind not in self._clients:
            try:
                if kind == "secrets":
                    from google.cloud import secretmanager

                    factory: Callable[..., Any] = secretmanager.SecretManagerServiceClient
                else:
                    from google.cloud import compute_v1

                    factory = (compute_v1.InstancesClient if kind == "instances"
                               else compute_v1.ZoneOperationsClient)
                self._clients[kind] = factory(**self._client_kwargs())
            except Exception as exc:  # missing credentials, bad endpoint
                raise map_gcp_error(exc, f"creating the GCP {kind} client") from exc
        return self._clients[kind]

    def _retrying(self) -> Retry:
        if self._retry is None:
            from google.api_core.retry import Retry

            def throttled(exc: BaseException) -> bool:
                return isinstance(exc, ThrottledError)

            base = self._retry_arg or Retry(initial=1.0, maximum=30.0, multiplier=2.0,
                                            timeout=120.0)
            self._retry = base.with_predicate(throttled)
        return self._retry

    def _call(self, context: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Call the SDK, mapping its errors; throttled calls are retried with backoff."""
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc

        def attempt() -> T:
            try:
                return fn(*args, **kwargs)
            except (gexc.GoogleAPIError, auth_exc.GoogleAuthError) as exc:
                raise map_gcp_error(exc, context) from exc
            except OSError as exc:  # requests' connection errors and timeouts among them
                if _is_network_error(exc):
                    raise map_gcp_error(exc, context) from exc
                raise

        try:
            return self._retrying()(attempt)()
        except gexc.RetryError as exc:  # throttled for longer than the retry allows
            raise map_gcp_error(exc, context) from exc

    # -- launch -----------------------------------------------------------------------------
    def launch(self, count: int, instance_type: str, spot: bool = False,
               tags: Mapping[str, str] | None = None) -> builtins.list[Instance]:
        """Create ``count`` VMs, each running one ``elastune worker`` on a queue named after it.

        Tries ``instance_type`` in each zone (spot: in the order :meth:`prefer_zones` gave),
        then the types after it in ``machine_types``.
        Returns the VMs it created (possibly fewer than ``count``, never none: with none it
        raises the :class:`CapacityError` / :class:`QuotaError` / other error that stopped it).
        """
        tags = dict(tags or {})
        types = fallback_types(instance_type, self.machine_types)
        for t in types:
            parse_instance_type(t)
        self._price(instance_type, self.zones[0], spot)  # unknown type / no spot price: fail now
        priced = []
        for t in types:
            try:
                self._price(t, self.zones[0], spot)
                priced.append(t)
            except ProviderError as exc:  # a fallback without a (spot) price: skip it
                log.info("not falling back to %s: %s", t, exc)

        def try_launch(itype: str, zone: str | None, n: int,
                       market: bool) -> builtins.list[Instance]:
            assert zone is not None   # GCE always names the zone
            out: builtins.list[Instance] = []
            for _ in range(n):
                try:
                    out.append(self._launch_one(itype, zone, market, tags))
                except ProviderError as exc:
                    if not out:
                        raise
                    # What started is the answer: returned, or it would run unseen.
                    log.warning("launched %d of %d %s in %s: %s", len(out), n, itype, zone, exc)
                    break
            return out

        self._client("instances")
        self._client("operations")
        walk = list(self._spot_walk or self.zones) if spot else list(self.zones)
        # One insert (and one operation wait) per VM, PARALLEL_INSERTS at once: each VM walks
        # the fallback on its own, so one that stocks out moves on while the others go ahead.
        return launch_with_fallback(try_launch, count, priced, lambda _: walk, spot,
                                    per_call=1, width=PARALLEL_INSERTS, reason=_reason,
                                    cloud="GCP")

    def _launch_one(self, itype: str, zone: str, spot: bool, tags: dict[str, str]) -> Instance:
        from google.cloud import compute_v1

        name = instance_name(tags.get("experiment"))
        context = f"launching {'spot ' if spot else ''}{itype} in {zone}"
        request = compute_v1.InsertInstanceRequest(
            project=self.project, zone=zone, request_id=str(uuid.uuid4()),
            instance_resource=self._resource(name, itype, zone, spot, tags))
        started = self._clock.now()
        op = self._call(context, self._client("instances").insert_unary, request=request)
        self._wait(op, zone, context)
        inst = Instance(
            instance_id=name, provider=self.name, instance_type=itype, spot=spot,
            slots=self.slots(itype), price_per_hour=self._price(itype, zone, spot),
            state=InstanceState.PENDING, launched_at=started, queue=name, tags=tags, zone=zone)
        with self._lock:
            self._known[name] = inst
        return inst

    def _wait(self, op: Any, zone: str, context: str) -> Any:
        deadline = time.monotonic() + self.operation_timeout_s
        while _name(op.status) != "DONE":
            if time.monotonic() > deadline:
                raise ProviderError(f"{context}: operation {op.name} not done after "
                                    f"{self.operation_timeout_s:.0f} s")
            op = self._call(context, self._client("operations").wait,
                            project=self.project, zone=zone, operation=op.name)
        if op.error.errors:
            raise map_gcp_error(op, context)
        return op

    def _resource(self, name: str, itype: str, zone: str, spot: bool,
                  tags: Mapping[str, str]) -> Any:
        from google.cloud import compute_v1

        machine, accelerator, count = parse_instance_type(itype)
        gpus = self.slots(itype)
        if spot:
            scheduling = compute_v1.Scheduling(
                provisioning_model="SPOT", instance_termination_action="DELETE",
                on_host_maintenance="TERMINATE", automatic_restart=False)
        elif gpus or accelerator:  # GPU VMs cannot live-migrate
            scheduling = compute_v1.Scheduling(on_host_maintenance="TERMINATE",
                                               automatic_restart=True)
        else:
            scheduling = compute_v1.Scheduling()
        labels = {LABEL_MANAGED: "true"}
        if tags.get("experiment"):
            labels[LABEL_EXPERIMENT] = sanitize_label(tags["experiment"])
        items = [compute_v1.Items(key=TAGS_METADATA_KEY, value=json.dumps(dict(tags))),
                 compute_v1.Items(key="install-nvidia-driver", value="True")]
        if self.bootstrap is not None:
            boot = replace(self.bootstrap, slots=max(1, gpus))
            items.append(compute_v1.Items(key="startup-script",
                                          value=startup_script(boot, "gcp")))
        nic = compute_v1.NetworkInterface(network=self.network)
        if self.external_ip:
            nic.access_configs = [compute_v1.AccessConfig(name="External NAT",
                                                          type_="ONE_TO_ONE_NAT")]
        resource = compute_v1.Instance(
            name=name,
            machine_type=f"zones/{zone}/machineTypes/{machine}",
            labels=labels,
            metadata=compute_v1.Metadata(items=items),
            scheduling=scheduling,
            disks=[compute_v1.AttachedDisk(
                boot=True, auto_delete=True,
                initialize_params=compute_v1.AttachedDiskInitializeParams(
                    source_image=self.image, disk_size_gb=self.disk_gb,
                    disk_type=f"zones/{zone}/diskTypes/pd-balanced"))],
            network_interfaces=[nic],
            service_accounts=[compute_v1.ServiceAccount(
                email=self.service_account or "default", scopes=[CLOUD_PLATFORM_SCOPE])],
        )
        if accelerator:
            resource.guest_accelerators = [compute_v1.AcceleratorConfig(
                accelerator_count=count,
                accelerator_type=f"projects/{self.project}/zones/{zone}/acceleratorTypes/"
                                 f"{accelerator}")]
        return resource

    # -- list -------------------------------------------------------------------------------
    def list(self, experiment: str | None = None) -> builtins.list[Instance]:
        """Instances of ``experiment`` (or every elastune-managed one) in the provider's zones,
        with their states; ones this provider launched that are gone are TERMINATED, and ones
        Compute Engine preempted have ``preempted=True``."""
        return [inst for inst, _ in self._scan(experiment)]

    def _scan(self, experiment: str | None) -> builtins.list[tuple[Instance, bool]]:
        """(instance, still exists in Compute Engine) pairs."""
        from google.cloud import compute_v1

        if experiment:
            flt = f'labels.{LABEL_EXPERIMENT} = "{sanitize_label(experiment)}"'
        else:
            flt = f'labels.{LABEL_MANAGED} = "true"'
        client = self._client("instances")
        now = self._clock.now()
        # What was known before listing: a VM a launch adds meanwhile is not listed yet, and
        # must not pass for gone.
        with self._lock:
            known = dict(self._known)
        found: dict[str, Instance] = {}
        for zone in self.zones:
            request = compute_v1.ListInstancesRequest(project=self.project, zone=zone,
                                                      filter=flt)
            raws = self._call(f"listing instances in {zone}",
                              lambda r=request: builtins.list(client.list(request=r)))
            for raw in raws:
                inst = self._record(raw, zone, now)
                if experiment is None or inst.tags.get("experiment") == experiment:
                    found[inst.instance_id] = inst
        # Instances this provider launched that Compute Engine no longer lists are gone.
        gone = {}
        for name, inst in known.items():
            if name in found or inst.zone not in self.zones:
                continue
            if experiment is not None and inst.tags.get("experiment") != experiment:
                continue
            if inst.state != InstanceState.TERMINATED:
                inst = inst.model_copy(update={"state": InstanceState.TERMINATED,
                                               "terminated_at": now})
            gone[name] = inst
        self._mark_preempted(found, gone)
        with self._lock:
            self._known.update(found)
            self._known.update(gone)
        return [(found[n], True) for n in found] + [(gone[n], False) for n in gone]

    def _record(self, raw: Any, zone: str, now: float) -> Instance:
        name = raw.name
        known = self._known.get(name)
        state = _STATES.get(_name(raw.status), InstanceState.PENDING)
        if name in self._deleted_by_us:  # being deleted: never back to RUNNING in our books
            state = InstanceState.TERMINATED
        if known is not None:
            update: dict[str, Any] = {"state": state}
            if state == InstanceState.TERMINATED and known.terminated_at is None:
                update["terminated_at"] = now
            return known.model_copy(update=update)
        machine = raw.machine_type.rsplit("/", 1)[-1]
        itype = machine
        for acc in raw.guest_accelerators:
            itype = f"{machine}+{acc.accelerator_count}x{acc.accelerator_type.rsplit('/', 1)[-1]}"
        spot = _name(raw.scheduling.provisioning_model) == "SPOT"
        meta = {item.key: item.value for item in raw.metadata.items}
        try:
            tags = {str(k): str(v) for k, v in json.loads(meta.get(TAGS_METADATA_KEY)
                                                          or "{}").items()}
        except (ValueError, AttributeError):
            tags = {}
        label = raw.labels.get(LABEL_EXPERIMENT)
        if label and sanitize_label(tags.get("experiment", "")) != label:
            # Moved to another experiment (a warm VM taken up): the label says where it is.
            tags = {**tags, "experiment": label}
        try:
            catalog = self._catalog(itype, zone)
            price, slots = catalog.hourly(spot, fallback=True), catalog.gpus
        except ProviderError:
            price = 0.0
            slots = sum(a.accelerator_count for a in raw.guest_accelerators) or 1
        launched = _epoch(raw.creation_timestamp, now)
        terminated = None
        if state == InstanceState.TERMINATED:
            terminated = _epoch(raw.last_stop_timestamp, now) if raw.last_stop_timestamp \
                else now
        return Instance(instance_id=name, provider=self.name, instance_type=itype, spot=spot,
                        slots=slots, price_per_hour=price, state=state, launched_at=launched,
                        terminated_at=terminated, queue=name, tags=tags, zone=zone)

    def _mark_preempted(self, *groups: dict[str, Instance]) -> None:
        """Set ``preempted`` on terminated spot VMs that a ``compute.instances.preempted``
        operation names (one operations query per zone that has such a VM)."""
        candidates = [(group, name) for group in groups for name, inst in group.items()
                      if inst.spot and not inst.preempted and name not in self._deleted_by_us
                      and inst.state == InstanceState.TERMINATED]
        if not candidates:
            return
        preempted: set[tuple[str, str]] = set()
        for zone in sorted({group[name].zone for group, name in candidates}):
            preempted |= {(zone, n) for n in self._preempted_in(zone)}
        for group, name in candidates:
            if (group[name].zone, name) in preempted:
                group[name] = group[name].model_copy(update={"preempted": True})

    def _preempted_in(self, zone: str) -> set[str]:
        from google.cloud import compute_v1

        client = self._client("operations")
        request = compute_v1.ListZoneOperationsRequest(
            project=self.project, zone=zone,
            filter=f'operationType = "{PREEMPTED_OPERATION}"')
        ops = self._call(f"listing preemptions in {zone}",
                         lambda: builtins.list(client.list(request=request)))
        return {op.target_link.rsplit("/", 1)[-1] for op in ops if op.target_link}

    # -- moving a VM to another experiment --------------------------------------------------
    def retag(self, instance_ids: Sequence[str], experiment: str) -> builtins.list[Instance]:
        """Move live VMs to ``experiment`` (its label; the label wins over the tags in the
        VM's metadata): a VM kept warm leaves the sweep that launched it, and a later sweep
        takes it up. Returns the live ones moved; VMs that are gone are skipped."""
        from google.cloud import compute_v1

        client = self._client("instances")
        now = self._clock.now()
        out = []
        for name in dict.fromkeys(instance_ids):
            known = self._known.get(name)
            zones = [known.zone] if known is not None and known.zone in self.zones \
                else self.zones
            for zone in zones:
                context = f"labelling instance {name} in {zone}"
                try:
                    raw = self._call(context, client.get, project=self.project, zone=zone,
                                     instance=name)
                except NotFoundError:
                    continue
                if _STATES.get(_name(raw.status), InstanceState.PENDING) == \
                        InstanceState.TERMINATED or name in self._deleted_by_us:
                    break
                labels = {**dict(raw.labels), LABEL_EXPERIMENT: sanitize_label(experiment)}
                request = compute_v1.InstancesSetLabelsRequest(
                    label_fingerprint=raw.label_fingerprint, labels=labels)
                self._call(context, client.set_labels_unary, project=self.project, zone=zone,
                           instance=name, instances_set_labels_request_resource=request)
                record = self._record(raw, zone, now)
                record = record.model_copy(update={"tags": {**record.tags,
                                                            "experiment": experiment}})
                with self._lock:
                    self._known[name] = record
                out.append(record)
                break
        return out

    # -- terminate / cleanup ----------------------------------------------------------------
    def terminate(self, instance_ids: Sequence[str]) -> builtins.list[Instance]:
        """Delete the VMs (without waiting for the deletion to finish); a VM that is already
        gone is not an error. Returns the TERMINATED records of the VMs it knew or found."""
        client = self._client("instances")
        now = self._clock.now()
        out = []
        for name in instance_ids:
            known = self._known.get(name)
            zones = [known.zone] if known is not None and known.zone in self.zones \
                else self.zones
            record = known
            for zone in zones:
                context = f"deleting instance {name} in {zone}"
                try:
                    if record is None:
                        raw = self._call(context, client.get, project=self.project, zone=zone,
                                         instance=name)
                        record = self._record(raw, zone, now)
                    self._call(context, client.delete_unary, project=self.project, zone=zone,
                               instance=name)
                    break
                except NotFoundError:
                    continue  # already gone, or in another zone
            self._deleted_by_us.add(name)
            if record is None:
                continue  # never seen, and in none of the zones: nothing to report
            if record.state != InstanceState.TERMINATED or record.terminated_at is None:
                record = record.model_copy(update={"state": InstanceState.TERMINATED,
                                                   "terminated_at": now})
            self._known[name] = record
            out.append(record)
        return out

    def cleanup(self, experiment: str | None = None) -> builtins.list[Instance]:
        """Delete every VM of ``experiment`` (or every elastune-managed VM) that still exists,
        stopped ones included (their disks still cost money). Returns what it deleted."""
        existing = [inst.instance_id for inst, exists in self._scan(experiment) if exists]
        return self.terminate(existing)

    # -- secrets ----------------------------------------------------------------------------
    def _secret_path(self, name: str) -> str:
        name = name.strip("/")
        if name.startswith("projects/"):
            m = re.fullmatch(r"(projects/[^/]+/secrets/[^/]+)(?:/versions/[^/]+)?", name)
            if not m:
                raise ValueError(f"secret {name!r} is not projects/P/secrets/S[/versions/V]")
            return m.group(1)
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,255}", name):
            raise ValueError(f"secret id {name!r} may hold only letters, digits, - and _")
        return f"projects/{self.project}/secrets/{name}"

    def ensure_bucket(self, bucket: str) -> None:
        """Create the Cloud Storage bucket in this provider's region (uniform bucket-level
        access, public access prevention enforced) unless it is there already. The storage
        client honours ``STORAGE_EMULATOR_HOST`` (a local endpoint)."""
        from google.cloud import storage

        try:
            credentials = self.credentials
            if credentials is None and os.environ.get("STORAGE_EMULATOR_HOST"):
                from google.auth.credentials import AnonymousCredentials

                credentials = AnonymousCredentials()
            client = storage.Client(project=self.project, credentials=credentials)
        except Exception as exc:  # missing credentials
            raise map_gcp_error(exc, "creating the Cloud Storage client") from exc
        try:
            self._call(f"looking up bucket gs://{bucket}", client.get_bucket, bucket)
            return
        except NotFoundError:
            pass
        except AuthError as exc:
            raise AuthError(f"bucket gs://{bucket} exists but these credentials cannot use it, "
                            f"or may not look: {exc}; choose another bucket name") from exc
        spec = client.bucket(bucket)
        spec.iam_configuration.uniform_bucket_level_access_enabled = True
        spec.iam_configuration.public_access_prevention = "enforced"
        from google.api_core import exceptions as gexc

        def create() -> None:
            try:
                client.create_bucket(spec, location=region_of(self.zones[0]))
            except gexc.Conflict:  # created meanwhile
                pass

        self._call(f"creating bucket gs://{bucket}", create)

    def put_secret(self, name: str, value: str) -> str:
        """Store ``value`` as a new version of Secret Manager secret ``name`` (an id in this
        project, or ``projects/P/secrets/S``), creating the secret if needed. Returns the
        ``projects/P/secrets/S/versions/latest`` name the worker reads
        (``Bootstrap.secret_name``)."""
        from google.api_core import exceptions as gexc

        path = self._secret_path(name)
        parent, _, secret_id = path.rpartition("/secrets/")
        client = self._client("secrets")

        def create() -> None:
            try:
                client.create_secret(request={
                    "parent": parent, "secret_id": secret_id,
                    "secret": {"replication": {"automatic": {}},
                               "labels": {LABEL_MANAGED: "true"}}})
            except gexc.Conflict:  # 409 ALREADY_EXISTS: add a version to it
                pass

        self._call(f"creating secret {path}", create)
        data = value.encode()
        payload: dict[str, Any] = {"data": data}
        try:
            import google_crc32c

            payload["data_crc32c"] = int(google_crc32c.value(data))
        except ImportError:  # pragma: no cover - installed with google-cloud-storage
            pass
        self._call(f"adding a version to secret {path}", client.add_secret_version,
                   request={"parent": path, "payload": payload})
        return f"{path}/versions/latest"

    def cleanup_secrets(self, experiment: str | None = None) -> list[str]:
        """Delete the broker secrets sweeps left behind (``elastune-<experiment>-...``
        secrets labelled as ours: of ``experiment``, or of every experiment when None), e.g.
        by a controller killed and never resumed; returns the secret names deleted."""
        prefix = f"elastune-{experiment}-" if experiment else "elastune-"
        client = self._client("secrets")

        def listed() -> list[Any]:
            return list(client.list_secrets(request={
                "parent": f"projects/{self.project}",
                "filter": f"labels.{LABEL_MANAGED}=true"}))

        found = self._call(f"listing secrets of {self.project}", listed)
        names = [str(sec.name) for sec in found
                 if str(sec.name).rpartition("/secrets/")[2].startswith(prefix)
                 and dict(sec.labels).get(LABEL_MANAGED) == "true"]
        for name in names:
            self.delete_secret(name)
        return names

    def delete_secret(self, name: str) -> None:
        """Delete the secret (all its versions); a missing secret is not an error."""
        path = self._secret_path(name)
        try:
            self._call(f"deleting secret {path}", self._client("secrets").delete_secret,
                       request={"name": path})
        except NotFoundError:
            pass
