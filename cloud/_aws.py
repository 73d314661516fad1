"""The AWS provider: EC2 instances that become ``elastune worker`` VMs, through boto3.

Each launch is one ``RunInstances`` call (``MinCount=1``, ``MaxCount=count``: a partial launch is
accepted) with the startup script as user data, the experiment's tags on the instance and its
volumes, IMDSv2 required, and ``terminate`` as the shutdown behaviour (a VM that powers itself
off stops billing). Which zone and type come next, and on which error, is
:func:`cloud._fallback.launch_with_fallback`'s (shared with GCP); this module gives it one
``RunInstances`` per attempt, over the zones that offer each type (spot launches in the order a
spot policy last preferred: :meth:`AwsProvider.prefer_zones`, the :class:`cloud.ZonedSpot`
interface). Prices and GPU counts come from the price book, spot prices optionally from
``DescribeSpotPriceHistory`` per zone (``live_spot_prices``).

Retries: every client uses botocore's ``standard`` retry mode (exponential backoff with full
jitter, a retry quota) for throttling and transient failures, except ``RunInstances``: EC2
answers a capacity shortage with HTTP 500, which botocore retries as transient, spending
seconds and the account's RunInstances rate budget on a zone that has no capacity. The launch
client therefore makes one attempt per request, and this module retries only throttling and
transient failures there itself, with jittered backoff and the same ``ClientToken`` (so a retry
never launches twice).

Hand-written because no maintained library maps EC2 onto this project's provider verbs without
bringing its own controller (SkyPilot, Ray's autoscaler); the SDK calls themselves are boto3's.
boto3 and botocore are imported only when an AWS provider is used.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

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

log = logging.getLogger(__name__)

# The latest AWS Deep Learning Base AMI (NVIDIA driver, CUDA, Python 3) for x86_64 GPU types,
# published by AWS as a public SSM parameter in every region.
DLAMI_PARAMETER = ("/aws/service/deeplearning/ami/x86_64/"
                   "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id")
EXPERIMENT_TAG = "elastune-experiment"
MANAGED_TAG = "elastune-managed"
DEFAULT_MAX_ATTEMPTS = 5
SPOT_PRICE_TTL_S = 900.0     # EC2 changes spot prices at most about hourly

# EC2, SSM and S3 error codes, by what the autoscaler should do about them.
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity", "InsufficientCapacityOnHost",
    "InsufficientFreeAddressesInSubnet", "Unsupported", "SpotMaxPriceTooLow",
})
QUOTA_CODES = frozenset({
    "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded", "InstanceLimitExceeded",
    "ResourceLimitExceeded", "VolumeLimitExceeded", "AddressLimitExceeded",
    "ServiceQuotaExceededException", "ParameterLimitExceeded", "TooManyBuckets",
})
THROTTLE_CODES = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "ThrottledException",
    "RequestThrottled", "RequestThrottledException", "TooManyRequestsException",
    "SlowDown", "PriorRequestNotComplete", "BandwidthLimitExceeded", "EC2ThrottledException",
    # transient: the same backoff applies
    "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "RequestTimeout",
    "RequestTimeoutException", "InternalServerError",
})
AUTH_CODES = frozenset({
    "AuthFailure", "UnauthorizedOperation", "AccessDenied", "AccessDeniedException",
    "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException",
    "RequestExpired", "IncompleteSignature", "MissingAuthenticationToken", "OptInRequired",
    "Blocked", "PendingVerification", "UnrecognizedClientException", "InvalidAccessKeyId",
    "AccountProblem", "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
})
NOT_FOUND_CODES = frozenset({
    "ParameterNotFound", "NoSuchBucket", "NoSuchKey", "404", "NotFound",
})
_TRANSIENT_EXCEPTIONS = frozenset({
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
    "ConnectionClosedError", "ProxyConnectionError", "HTTPClientError",
})
_AUTH_EXCEPTIONS = frozenset({
    "NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
    "NoAuthTokenError", "TokenRetrievalError", "SSOTokenLoadError", "UnauthorizedSSOTokenError",
    "InvalidConfigError", "ProfileNotFound",
})

# How EC2 says the cloud took a spot instance back: the instance's state reason, or (when that
# is not conclusive) the status of the spot request that launched it.
SPOT_INTERRUPTION_REASONS = frozenset({
    "Server.SpotInstanceTermination", "Server.SpotInstanceShutdown",
})
SPOT_INTERRUPTION_STATUSES = frozenset({
    "instance-terminated-by-price", "instance-terminated-no-capacity",
    "instance-terminated-capacity-oversubscribed", "instance-terminated-launch-group-constraint",
    "instance-stopped-by-price", "instance-stopped-no-capacity",
    "instance-stopped-capacity-oversubscribed",
})
_STATES = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
}
_GONE = frozenset({"terminated", "shutting-down"})
_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 20.0
_CHUNK = 100   # instance ids per describe/terminate request


# -- errors -------------------------------------------------------------------------------------

def is_aws_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from boto3/botocore (a service reply or a client-side failure)."""
    return (isinstance(getattr(exc, "response", None), dict)
            or type(exc).__module__.split(".")[0] in ("botocore", "boto3"))


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` (``""`` for other exceptions)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str((response.get("Error") or {}).get("Code") or "")


def provider_error(exc: BaseException, action: str = "") -> ProviderError:
    """Our exception for a boto3/botocore failure of ``action`` (e.g. ``"RunInstances"``).

    Capacity codes give :class:`CapacityError`, quota codes :class:`QuotaError`, throttling and
    transient server or network failures :class:`ThrottledError`, credential and permission
    problems :class:`AuthError`, missing resources :class:`NotFoundError`, anything else
    :class:`ProviderError`. The message keeps AWS's code and text and says what to do.
    """
    where = f"AWS {action}" if action else "AWS"
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        err = response.get("Error") or {}
        code = str(err.get("Code") or "")
        message = str(err.get("Message") or "").strip()
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        text = f"{where} failed: {code or status}" + (f": {message}" if message else "")
        if code in CAPACITY_CODES:
            return CapacityError(f"{text} (no capacity here now: another zone or instance "
                                 "type, or later, may have it)")
        if code in QUOTA_CODES:
            return QuotaError(f"{text} (an account quota; ask for an increase in the Service "
                              "Quotas console, e.g. 'Running On-Demand G and VT instances' or "
                              "'All G and VT Spot Instance Requests', or use another type)")
        if code in THROTTLE_CODES or (not code and status in (429, 500, 502, 503, 504)):
            return ThrottledError(f"{text} (retry after a backoff)")
        if code in AUTH_CODES or code.startswith("AuthFailure") or status in (401, 403):
            return AuthError(f"{text} (check the AWS credentials, e.g. `aws sts "
                             "get-caller-identity`, and that their IAM policy allows this "
                             "action)")
        if code in NOT_FOUND_CODES or code.endswith(".NotFound") or status == 404:
            return NotFoundError(text)
        return ProviderError(text)
    names = {c.__name__ for c in type(exc).__mro__}
    detail = f"{where} failed: {type(exc).__name__}: {exc}"
    if names & _AUTH_EXCEPTIONS:
        return AuthError(f"{detail} (configure AWS credentials: environment variables, "
                         "~/.aws/credentials, an SSO login, or an instance profile)")
    if "NoRegionError" in names:
        return ProviderError(f"{detail} (name a region, e.g. us-east-1)")
    if names & _TRANSIENT_EXCEPTIONS:
        return ThrottledError(f"{detail} (AWS could not be reached; retry after a backoff)")
    return ProviderError(detail)


def _retryable(err: ProviderError) -> bool:
    return isinstance(err, ThrottledError)


# -- tags -----------------------------------------------------------------------------------------

def physical_tags(tags: Mapping[str, str] | None) -> dict[str, str]:
    """The EC2 tags for a record's logical tags: ``experiment`` becomes ``elastune-experiment``,
    ``elastune-managed=true`` marks the resource as ours, every other tag is kept as it is."""
    out = {MANAGED_TAG: "true"}
    for key, value in (tags or {}).items():
        if key.lower().startswith("aws:"):
            raise ValueError(f"tag {key!r}: keys starting with 'aws:' are reserved by AWS")
        if key == MANAGED_TAG:
            continue
        out[EXPERIMENT_TAG if key == "experiment" else key] = str(value)
    return out


def logical_tags(tags: Iterable[Mapping[str, str]] | Mapping[str, str] | None) -> dict[str, str]:
    """The record's tags for EC2 tags (a ``[{"Key", "Value"}]`` list or a dict): the inverse of
    :func:`physical_tags`, without the managed marker and AWS's own ``aws:`` tags."""
    if tags is None:
        return {}
    pairs = (tags.items() if isinstance(tags, Mapping)
             else ((t.get("Key", ""), t.get("Value", "")) for t in tags))
    out = {}
    for key, value in pairs:
        if key == MANAGED_TAG or key.startswith("aws:"):
            continue
        out["experiment" if key == EXPERIMENT_TAG else key] = value
    return out


def _tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


# -- the provider ---------------------------------------------------------------------------------

class AwsProvider:
    """EC2 GPU instances in one region, each running one ``elastune worker`` on its own queue.

    Args:
        region: e.g. ``"us-east-1"``; prices come from the price book's rows for this region.
        instance_types: the types this sweep may use, in order of preference; a launch that
            finds no capacity or quota for the asked type falls back to the types after it.
            Empty for a provider that only lists and terminates (``elastune cloud``).
        bootstrap: what a fresh VM needs to become a worker (set it, or the attribute
            ``bootstrap``, before the first launch; without it the VMs start bare).
        image_id: the AMI; by default the latest AWS Deep Learning Base GPU AMI, read from the
            public SSM parameter ``image_parameter`` (:data:`DLAMI_PARAMETER`; name another
            parameter for another image family, e.g. arm64 or Ubuntu 24.04).
        zones: availability zones to try, in order; by default the zones that offer the type
            (``DescribeInstanceTypeOfferings``), or the zones of ``subnet_ids``. Spot launches
            walk them in the order :meth:`prefer_zones` last gave.
        iam_instance_profile: name or ARN of the instance profile the VMs run as (it must allow
            ``ssm:GetParameter`` on the broker secret and S3 access to the storage bucket).
        security_group_ids, key_name: passed to ``RunInstances``.
        subnet_ids: the subnet to use in each zone (``{"us-east-1a": "subnet-..."}``).
        prices: the price book (the shipped one by default).
        endpoint_url: another endpoint for every AWS service (boto3 also honours
            ``AWS_ENDPOINT_URL``).
        session: a ``boto3.session.Session`` (credentials, profile); a new one by default.
        clock: launch and termination times, and the backoff's sleeps.
        max_attempts: attempts per request (the first included) on throttling and transient
            failures.
        retry_mode: botocore's retry mode, ``"standard"`` or ``"adaptive"`` (adds client-side
            rate limiting, for accounts that launch very many VMs).
        seed: seeds the launch backoff's jitter (reproducible tests).
        live_spot_prices: price spot instances from ``DescribeSpotPriceHistory`` (the current
            price in each zone, cached for 15 minutes) instead of the catalog's representative
            value; the catalog when the call fails. A launched instance is priced in its zone;
            :meth:`price_per_hour` is the highest over the zones a launch may land in.

    Example (no AWS call is made until the first launch, list or terminate)::

        >>> p = AwsProvider("us-east-1", ["g5.xlarge", "g4dn.xlarge"], image_id="ami-0abc")
        >>> p.price_per_hour("g4dn.xlarge", spot=True), p.slots("g5.xlarge")
        (0.21, 1)
    """

    name = "aws"
    blocking_launch = True    # the controller launches on a thread

    def __init__(
        self,
        region: str,
        instance_types: Sequence[str],
        *,
        bootstrap: Bootstrap | None = None,
        image_id: str | None = None,
        image_parameter: str = DLAMI_PARAMETER,
        zones: Sequence[str] | None = None,
        iam_instance_profile: str | None = None,
        security_group_ids: Sequence[str] = (),
        subnet_ids: Mapping[str, str] | None = None,
        key_name: str | None = None,
        prices: PriceBook | None = None,
        endpoint_url: str | None = None,
        session: Any = None,
        clock: Clock | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        retry_mode: str = "standard",
        seed: int | None = None,
        live_spot_prices: bool = False,
    ) -> None:
        if not region:
            raise ValueError("AwsProvider needs a region, e.g. 'us-east-1'")
        if isinstance(instance_types, str):
            instance_types = [instance_types]
        if max_attempts < 1:
            raise ValueError(f"max_attempts is {max_attempts}; it must be >= 1")
        if retry_mode not in ("standard", "adaptive"):
            raise ValueError(f"retry_mode is {retry_mode!r}; allowed: 'standard', 'adaptive'")
        self.region = region
        self.instance_types: list[str] = list(dict.fromkeys(instance_types))
        self.bootstrap = bootstrap
        self.image_id = image_id
        self.image_parameter = image_parameter
        self.subnet_ids: dict[str, str] = dict(subnet_ids or {})
        # The configured zones (None: the zones that offer each type, looked up at launch).
        self._zones: list[str] | None = (list(zones) if zones
                                         else list(self.subnet_ids) or None)
        if self.subnet_ids and self._zones:
            bare = [z for z in self._zones if z not in self.subnet_ids]
            if bare:
                raise ValueError(f"zone(s) {', '.join(bare)} have no subnet in subnet_ids; "
                                 "name a subnet for every zone, or leave zones out")
        self.iam_instance_profile = iam_instance_profile
        self.live_spot_prices = live_spot_prices
        # type -> (spot price by zone, read at)
        self._spot_prices: dict[str, tuple[dict[str, float], float]] = {}
        # The zones spot launches walk, in order (prefer_zones); list, terminate and cleanup
        # are region-wide.
        self._spot_walk: tuple[str, ...] = ()
        self.security_group_ids = list(security_group_ids)
        self.key_name = key_name
        self._book = prices or PriceBook()
        self._endpoint_url = endpoint_url
        self._session = session
        self._clock: Clock = clock or RealClock()
        self._max_attempts = max_attempts
        self._retry_mode = retry_mode
        self._rng = random.Random(seed)
        self._clients: dict[tuple[str, bool], Any] = {}
        self._clients_lock = threading.Lock()
        self._zones_by_type: dict[str, list[str | None]] = {}
        self._launched_at: dict[str, float] = {}
        self._terminated_at: dict[str, float] = {}
        problems = []
        for itype in self.instance_types:
            try:
                self._book.get("aws", itype, region)
            except KeyError as exc:
                problems.append(str(exc.args[0]))
        if problems:
            raise ValueError("; ".join(problems) + " (add rows to a price CSV and pass "
                             "PriceBook(path=...): the ledger must know what a VM costs)")

    # -- prices -------------------------------------------------------------------------------
    def _lookup(self, instance_type: str) -> InstanceType | None:
        try:
            return self._book.get("aws", instance_type, self.region)
        except KeyError:
            return None

    def _type(self, instance_type: str) -> InstanceType:
        try:
            return self._book.get("aws", instance_type, self.region)
        except KeyError as exc:
            raise ProviderError(f"{exc.args[0]}: elastune launches only priced instance types "
                                "(the ledger must know what they cost)") from None

    def price_per_hour(self, instance_type: str, spot: bool = False) -> float:
        """Dollars per instance-hour from the price book; spot without a spot price is charged
        at the on-demand price (AWS's default ceiling for a spot price). With
        ``live_spot_prices``, spot is the current market price where EC2 reports one: the
        highest over the zones a launch may land in (budgets count the dearest, never less)."""
        book = self._type(instance_type).hourly(spot, fallback=True)
        if not (spot and self.live_spot_prices):
            return book
        prices = self._zone_spot_prices(instance_type)
        if self._zones:
            prices = {z: p for z, p in prices.items() if z in self._zones}
        return max(prices.values(), default=book)

    def spot_price_in(self, zone: str, instance_type: str) -> float:
        """The spot price per hour in ``zone``: with ``live_spot_prices`` the zone's current
        price from ``DescribeSpotPriceHistory`` (cached), else (or where EC2 reports none)
        the price book's."""
        book = self._type(instance_type).hourly(True, fallback=True)
        if not self.live_spot_prices:
            return book
        return self._zone_spot_prices(instance_type).get(zone, book)

    def _zone_spot_prices(self, instance_type: str) -> dict[str, float]:
        """The current spot price of the type in each zone of the region that EC2 reports
        (empty when the call fails), read at most once per :data:`SPOT_PRICE_TTL_S`."""
        now = self._clock.now()
        cached = self._spot_prices.get(instance_type)
        if cached is None or now - cached[1] >= SPOT_PRICE_TTL_S:
            cached = (self._live_spot_prices(instance_type), now)
            self._spot_prices[instance_type] = cached
        return cached[0]

    def _live_spot_prices(self, instance_type: str) -> dict[str, float]:
        latest: dict[str, float] = {}
        try:
            kwargs: dict[str, Any] = {"InstanceTypes": [instance_type],
                                      "ProductDescriptions": ["Linux/UNIX"],
                                      "StartTime": datetime.now(UTC)}
            for page in self._client("ec2").get_paginator(
                    "describe_spot_price_history").paginate(**kwargs):
                for row in page.get("SpotPriceHistory", []):
                    zone = str(row.get("AvailabilityZone", ""))
                    latest.setdefault(zone, float(row["SpotPrice"]))   # newest first
        except Exception as exc:  # noqa: BLE001 - a missing permission must not stop a sweep
            log.info("spot price of %s from the catalog (%s)", instance_type, exc)
            return {}
        return latest

    def slots(self, instance_type: str) -> int:
        """GPUs of one instance of this type (one worker slot each)."""
        return max(1, self._type(instance_type).gpus)

    # -- clients ------------------------------------------------------------------------------
    def _client(self, service: str, *, launch: bool = False) -> Any:
        key = (service, launch)
        with self._clients_lock:   # a boto3 session must not make clients concurrently
            client = self._clients.get(key)
            if client is None:
                import boto3
                from botocore.config import Config

                if self._session is None:
                    self._session = boto3.session.Session()
                config = Config(
                    region_name=self.region,
                    # total_max_attempts counts the first request (max_attempts would not).
                    retries={"mode": self._retry_mode,
                             "total_max_attempts": 1 if launch else self._max_attempts},
                    user_agent_extra="elastune")
                client = self._session.client(service, endpoint_url=self._endpoint_url,
                                              config=config)
                self._clients[key] = client
        return client

    def _call(self, action: str, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            raise provider_error(exc, action) from exc

    def _backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2^attempt)]."""
        return self._rng.uniform(0.0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** attempt))

    def _pages(self, action: str, service: str, operation: str,
               **kwargs: Any) -> Iterator[dict[str, Any]]:
        paginator = self._client(service).get_paginator(operation)
        try:
            yield from paginator.paginate(**kwargs)
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            raise provider_error(exc, action) from exc

    # -- image, zones ---------------------------------------------------------------------------
    @property
    def zones(self) -> list[str]:
        """The zones a spot policy may order (:class:`cloud.ZonedSpot`): the configured ones,
        else those that offer the first instance type once a launch has looked them up
        (before that none, and a launch walks them in name order)."""
        if self._zones:
            return list(self._zones)
        found = self._zones_by_type.get(self.instance_types[0], []) \
            if self.instance_types else []
        return [z for z in found if z is not None]

    def prefer_zones(self, zones: Sequence[str]) -> None:
        """Have the next spot launches walk these zones, in this order (for each type, the
        ones that offer it; none of them: the configured or discovered order). On-demand
        launches keep that order; list, terminate and cleanup cover the whole region."""
        self._spot_walk = tuple(dict.fromkeys(zones))

    def image(self) -> str:
        """The AMI the VMs boot: ``image_id``, or the one the public SSM parameter names now."""
        if self.image_id is None:
            ssm = self._client("ssm")
            try:
                reply = self._call("GetParameter", ssm.get_parameter, Name=self.image_parameter)
                self.image_id = str(reply["Parameter"]["Value"])
            except ProviderError as exc:
                raise ProviderError(
                    f"cannot find the default GPU image in {self.region}: reading SSM "
                    f"parameter {self.image_parameter} failed ({exc}); set image_id "
                    "(provider.image in the sweep) to an AMI id with NVIDIA drivers and "
                    "Python 3") from exc
        return self.image_id

    def _zones_for(self, instance_type: str) -> list[str | None]:
        """Zones to try for this type, in order; ``[None]`` lets EC2 choose."""
        if self._zones:
            return list(self._zones)
        if instance_type not in self._zones_by_type:
            try:
                zones = sorted({
                    str(o["Location"])
                    for page in self._pages(
                        "DescribeInstanceTypeOfferings", "ec2", "describe_instance_type_offerings",
                        LocationType="availability-zone",
                        Filters=[{"Name": "instance-type", "Values": [instance_type]}])
                    for o in page.get("InstanceTypeOfferings", [])})
            except ProviderError as exc:
                # Optional: without the permission or the answer, EC2 picks the zone.
                log.info("no zone list for %s in %s (%s); letting EC2 choose", instance_type,
                         self.region, exc)
                return [None]
            self._zones_by_type[instance_type] = list(zones) or [None]
        return list(self._zones_by_type[instance_type])

    # -- launch ---------------------------------------------------------------------------------
    def launch(self, count: int, instance_type: str, spot: bool = False,
               tags: Mapping[str, str] | None = None) -> list[Instance]:
        """Start up to ``count`` instances (fewer when EC2 has fewer); each record names the
        type and zone that had capacity (spot: the zones in the order :meth:`prefer_zones`
        gave). Raises :class:`CapacityError` or :class:`QuotaError` when no type and zone
        could launch one, naming every attempt."""
        if count < 1:
            return []
        self._type(instance_type)
        physical = physical_tags(tags)
        record_tags = logical_tags(physical)
        image = self.image()

        def try_launch(itype: str, zone: str | None, n: int, market: bool) -> list[Instance]:
            # One RunInstances for all n (MinCount=1): EC2 starts as many as it can.
            reply = self._run_instances(self._launch_request(n, itype, zone, market, physical,
                                                             image))
            now = self._clock.now()
            out = []
            for raw in reply.get("Instances", []):
                self._launched_at[raw["InstanceId"]] = now
                out.append(self._record(raw, now=now, tags=record_tags, spot=market))
            return out

        types = [t for t in fallback_types(instance_type, self.instance_types)
                 if self._lookup(t) is not None]
        walk = self._spot_walk if spot else ()

        def zones(itype: str) -> list[str | None]:
            return preferred_order(self._zones_for(itype), walk)

        return launch_with_fallback(try_launch, count, types, zones, spot,
                                    reason=_code_of, cloud="AWS")

    def _launch_request(self, count: int, instance_type: str, zone: str | None, spot: bool,
                        tags: Mapping[str, str], image: str) -> dict[str, Any]:
        req: dict[str, Any] = {
            "ImageId": image, "InstanceType": instance_type, "MinCount": 1, "MaxCount": count,
            "InstanceInitiatedShutdownBehavior": "terminate",
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
            "TagSpecifications": [{"ResourceType": kind, "Tags": _tag_list(tags)}
                                  for kind in ("instance", "volume")],
        }
        if self.bootstrap is not None:
            boot = replace(self.bootstrap, slots=self.slots(instance_type))
            req["UserData"] = startup_script(boot, "aws", self.region)
        if spot:
            req["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time",
                                "InstanceInterruptionBehavior": "terminate"}}
        if zone is not None:
            req["Placement"] = {"AvailabilityZone": zone}
            if zone in self.subnet_ids:
                req["SubnetId"] = self.subnet_ids[zone]
        if self.security_group_ids:
            req["SecurityGroupIds"] = list(self.security_group_ids)
        if self.key_name:
            req["KeyName"] = self.key_name
        if self.iam_instance_profile:
            key = "Arn" if self.iam_instance_profile.startswith("arn:") else "Name"
            req["IamInstanceProfile"] = {key: self.iam_instance_profile}
        return req

    def _run_instances(self, request: dict[str, Any]) -> dict[str, Any]:
        """One RunInstances request; throttling and transient failures are retried here with
        jittered backoff under the same client token (EC2 then launches at most once)."""
        client = self._client("ec2", launch=True)
        token = uuid.uuid4().hex
        for attempt in range(self._max_attempts):
            try:
                return self._call("RunInstances", client.run_instances, ClientToken=token,
                                  **request)
            except ProviderError as exc:
                if not _retryable(exc) or attempt + 1 >= self._max_attempts:
                    raise
                self._clock.sleep(self._backoff(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- list, terminate, cleanup ---------------------------------------------------------------
    def _describe(self, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [raw
                for page in self._pages("DescribeInstances", "ec2", "describe_instances",
                                        Filters=filters)
                for reservation in page.get("Reservations", [])
                for raw in reservation.get("Instances", [])]

    def _describe_ours(self, experiment: str | None = None,
                       ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        filters: list[dict[str, Any]] = [{"Name": "tag-key", "Values": [MANAGED_TAG]}]
        if experiment is not None:
            filters.append({"Name": f"tag:{EXPERIMENT_TAG}", "Values": [experiment]})
        if ids is None:
            return self._describe(filters)
        out = []
        for i in range(0, len(ids), _CHUNK):
            chunk = list(ids[i:i + _CHUNK])
            out += self._describe([*filters, {"Name": "instance-id", "Values": chunk}])
        return out

    def list(self, experiment: str | None = None) -> list[Instance]:
        """This experiment's instances (every elastune-managed one when ``experiment`` is
        None), of any type, with their states; a spot instance the cloud took back is
        TERMINATED with ``preempted=True``."""
        raws = self._describe_ours(experiment)
        interrupted = self._interrupted_by_request(raws)
        now = self._clock.now()
        return [self._record(raw, now=now, preempted=raw["InstanceId"] in interrupted)
                for raw in raws]

    def terminate(self, instance_ids: Sequence[str]) -> list[Instance]:
        """Terminate these instances (only ones this project launched; ids that are unknown or
        already gone are skipped); returns their records, TERMINATED."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return []
        raws = {raw["InstanceId"]: raw for raw in self._describe_ours(ids=ids)}
        skipped = [i for i in ids if i not in raws]
        if skipped:
            log.info("terminate: not found or not elastune-managed, skipped: %s",
                     ", ".join(skipped))
        live = [i for i, raw in raws.items() if raw["State"]["Name"] not in _GONE]
        self._terminate_ids(live)
        now = self._clock.now()
        out = []
        for iid in ids:
            raw = raws.get(iid)
            if raw is None:
                continue
            if iid in live:
                self._terminated_at.setdefault(iid, now)
                raw = {**raw, "State": {"Code": 32, "Name": "shutting-down"}}
            out.append(self._record(raw, now=now))
        return out

    def retag(self, instance_ids: Sequence[str], experiment: str) -> list[Instance]:
        """Move live instances to ``experiment`` (its tag): a VM kept warm leaves the sweep
        that launched it, and a later sweep takes it up. Returns the live ones moved; ids
        that are gone or not elastune-managed are skipped."""
        ids = list(dict.fromkeys(instance_ids))
        raws = [raw for raw in self._describe_ours(ids=ids) if raw["State"]["Name"] not in _GONE]
        if not raws:
            return []
        live = [raw["InstanceId"] for raw in raws]
        tag = {"Key": EXPERIMENT_TAG, "Value": experiment}
        ec2 = self._client("ec2")
        self._call("CreateTags", ec2.create_tags, Resources=live, Tags=[tag])
        now = self._clock.now()
        out = []
        for raw in raws:
            tags = [t for t in raw.get("Tags", []) if t["Key"] != EXPERIMENT_TAG] + [tag]
            out.append(self._record({**raw, "Tags": tags}, now=now))
        return out

    def _terminate_ids(self, ids: Sequence[str]) -> None:
        ec2 = self._client("ec2")
        for i in range(0, len(ids), _CHUNK):
            chunk = list(ids[i:i + _CHUNK])
            try:
                self._call("TerminateInstances", ec2.terminate_instances, InstanceIds=chunk)
            except NotFoundError:
                # One of them vanished since we looked: the rest one by one.
                for iid in chunk:
                    try:
                        self._call("TerminateInstances", ec2.terminate_instances,
                                   InstanceIds=[iid])
                    except NotFoundError:
                        pass   # already gone

    def cleanup(self, experiment: str | None = None) -> list[Instance]:
        """Terminate every instance of ``experiment`` (every elastune-managed instance when
        None) that is not already gone, stopped ones included; returns what was terminated."""
        raws = self._describe_ours(experiment)
        return self.terminate([raw["InstanceId"] for raw in raws
                               if raw["State"]["Name"] not in _GONE])

    # -- records --------------------------------------------------------------------------------
    def _interrupted_by_request(self, raws: Sequence[Mapping[str, Any]]) -> set[str]:
        """Instances whose spot request status says EC2 interrupted them, for the terminated
        spot instances whose state reason does not say so already."""
        def inconclusive(raw: Mapping[str, Any]) -> bool:
            reason = str((raw.get("StateReason") or {}).get("Code") or "")
            return reason not in SPOT_INTERRUPTION_REASONS and not reason.startswith("Client.")

        requests = {
            str(raw["SpotInstanceRequestId"]): str(raw["InstanceId"]) for raw in raws
            if raw.get("SpotInstanceRequestId") and raw["State"]["Name"] not in _STATES
            and inconclusive(raw)}
        if not requests:
            return set()
        ec2 = self._client("ec2")
        try:
            reply = self._call("DescribeSpotInstanceRequests",
                               ec2.describe_spot_instance_requests,
                               SpotInstanceRequestIds=sorted(requests))
        except ProviderError as exc:
            if isinstance(exc, AuthError):
                raise
            log.info("spot request status unavailable: %s", exc)
            return set()
        return {requests[str(r["SpotInstanceRequestId"])]
                for r in reply.get("SpotInstanceRequests", [])
                if (r.get("Status") or {}).get("Code") in SPOT_INTERRUPTION_STATUSES
                and str(r.get("SpotInstanceRequestId")) in requests}

    def _record(self, raw: Mapping[str, Any], *, now: float,
                tags: Mapping[str, str] | None = None, spot: bool | None = None,
                preempted: bool = False) -> Instance:
        iid = str(raw["InstanceId"])
        itype = str(raw.get("InstanceType", ""))
        state = _STATES.get(str(raw["State"]["Name"]), InstanceState.TERMINATED)
        if spot is None:
            spot = raw.get("InstanceLifecycle") == "spot"
        reason = str((raw.get("StateReason") or {}).get("Code") or "")
        known = self._lookup(itype)
        launched_at = self._launched_at.get(iid)
        if launched_at is None:
            when = raw.get("LaunchTime")
            launched_at = when.timestamp() if isinstance(when, datetime) else now
        terminated_at = None
        if state == InstanceState.TERMINATED:
            terminated_at = self._terminated_at.setdefault(iid, now)
        zone = str((raw.get("Placement") or {}).get("AvailabilityZone") or "")
        price = 0.0
        if known is not None:   # a spot instance pays its own zone's price (the ledger's)
            price = (self.spot_price_in(zone, itype) if spot and zone
                     else self.price_per_hour(itype, spot))
        return Instance(
            instance_id=iid, provider=self.name, instance_type=itype, spot=spot,
            slots=max(1, known.gpus) if known else 1, price_per_hour=price,
            state=state, launched_at=launched_at, terminated_at=terminated_at, queue=iid,
            tags=dict(tags) if tags is not None else logical_tags(raw.get("Tags")),
            zone=zone, preempted=preempted or reason in SPOT_INTERRUPTION_REASONS)

    # -- what the VMs need: the broker secret, the bucket -----------------------------------------
    def put_secret(self, name: str, value: str, *, kms_key_id: str | None = None) -> str:
        """Store ``value`` as an SSM SecureString parameter (replacing an older value), tagged
        as ours; returns the parameter name. Errors never carry the value."""
        name = _parameter_name(name)
        ssm = self._client("ssm")
        request: dict[str, Any] = {"Name": name, "Value": value, "Type": "SecureString",
                                   "Overwrite": True,
                                   "Description": "elastune broker password"}
        if kms_key_id:
            request["KeyId"] = kms_key_id
        try:
            self._call("PutParameter", ssm.put_parameter, **request)
            self._call("AddTagsToResource", ssm.add_tags_to_resource, ResourceType="Parameter",
                       ResourceId=name, Tags=[{"Key": MANAGED_TAG, "Value": "true"}])
        except ProviderError as exc:
            text = str(exc).replace(value, "***") if value else str(exc)
            raise type(exc)(text) from None
        return name

    def delete_secret(self, name: str) -> None:
        """Delete the SSM parameter; a missing one is not an error."""
        ssm = self._client("ssm")
        try:
            self._call("DeleteParameter", ssm.delete_parameter, Name=_parameter_name(name))
        except NotFoundError:
            pass

    def cleanup_secrets(self, experiment: str | None = None) -> list[str]:
        """Delete the broker secrets sweeps left behind (``/elastune/<experiment>/...``
        parameters: of ``experiment``, or of every experiment when None), e.g. by a controller
        killed and never resumed; returns the names deleted."""
        prefix = f"/elastune/{experiment}/" if experiment else "/elastune/"
        ssm = self._client("ssm")
        names: list[str] = []
        request: dict[str, Any] = {"ParameterFilters": [
            {"Key": "Name", "Option": "BeginsWith", "Values": [prefix]}], "MaxResults": 50}
        while True:
            reply = self._call("DescribeParameters", ssm.describe_parameters, **request)
            names += [str(p["Name"]) for p in reply.get("Parameters", [])]
            if not reply.get("NextToken"):
                break
            request["NextToken"] = reply["NextToken"]
        for name in names:
            self.delete_secret(name)
        return names

    def ensure_bucket(self, bucket: str) -> None:
        """Create the S3 bucket in this region (private: public access blocked) unless it is
        there already."""
        s3 = self._client("s3")
        try:
            self._call("HeadBucket", s3.head_bucket, Bucket=bucket)
            return
        except NotFoundError:
            pass
        except AuthError as exc:
            raise AuthError(f"S3 bucket {bucket} exists but these credentials cannot use it, "
                            f"or may not look: {exc}; choose another bucket name") from exc
        request: dict[str, Any] = {"Bucket": bucket}
        if self.region != "us-east-1":   # us-east-1 refuses its own name as a constraint
            request["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self._call("CreateBucket", s3.create_bucket, **request)
        except ProviderError as exc:
            code = _code_of(exc)
            if code == "BucketAlreadyOwnedByYou":
                return
            if code == "BucketAlreadyExists":
                raise ProviderError(f"S3 bucket name {bucket} is taken by another account; "
                                    "choose another (bucket names are global)") from exc
            raise
        self._call("PutPublicAccessBlock", s3.put_public_access_block, Bucket=bucket,
                   PublicAccessBlockConfiguration={
                       "BlockPublicAcls": True, "IgnorePublicAcls": True,
                       "BlockPublicPolicy": True, "RestrictPublicBuckets": True})


def _parameter_name(name: str) -> str:
    """SSM parameter names as the worker's ``ssm:`` URI spells them: with a leading slash."""
    if not name:
        raise ValueError("a secret needs a name")
    return name if name.startswith("/") else f"/{name}"


def _code_of(exc: BaseException) -> str:
    """The AWS error code behind one of our exceptions (raised ``from`` a ClientError)."""
    cause = exc.__cause__
    return error_code(cause) if cause is not None else type(exc).__name__
