"""The provider contract: a few verbs over plain :class:`records.Instance` records.

Cloud SDK errors never leave a provider as SDK exceptions: each provider maps them onto the
hierarchy below, which the autoscaler handles (capacity and quota: fall back to the next
instance type or zone, then retry later; throttled: back off with jitter; auth: stop the sweep
with the message; not found: the instance is already gone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from worker.records import Instance


class ProviderError(RuntimeError):
    """A provider could not do what was asked (the message says why and what to do)."""


class CapacityError(ProviderError):
    """No capacity for this instance type here now; try another type, zone or later."""


class QuotaError(ProviderError):
    """The account's quota (vCPUs, GPUs, spot instances) does not allow more of this type."""


class ThrottledError(ProviderError):
    """The cloud asked us to slow down; retry after a jittered backoff."""


class AuthError(ProviderError):
    """Credentials are missing, expired or lack a permission; retrying will not help."""


class NotFoundError(ProviderError):
    """The instance (or zone, image, bucket) does not exist."""


@dataclass(frozen=True)
class Bootstrap:
    """What a fresh VM needs to become an ``elastune worker`` of one experiment.

    The broker password is *not* here: the VM reads it from the cloud's secret store
    (``secret_name``: an SSM SecureString parameter on AWS, a Secret Manager secret on GCP),
    so it never appears in user data, metadata, logs or the experiment store.
    """

    broker_url: str                 # rediss://host:port/0, without the password
    secret_name: str                # where the broker password lives in the cloud's secret store
    storage_uri: str                # s3://bucket/prefix or gs://bucket/prefix: code + checkpoints
    install: str = "elastune"       # what pip installs on the VM (a requirement or a wheel URL)
    slots: int = 1                  # GPU slots per worker (the instance type's GPU count)
    preload: tuple[str, ...] = ()   # modules the worker imports before taking work
    insecure_broker: bool = False   # the user accepted a broker without TLS: worker --insecure
    env: Mapping[str, str] = field(default_factory=dict)  # extra non-secret environment


@runtime_checkable
class ZonedSpot(Protocol):
    """A provider that offers spot capacity in ``zones``, each at its own spot price; its spot
    launches walk the zones a spot policy prefers, in that order
    (:meth:`budgets.SpotPolicy.zone_order`). AWS, GCP and the simulated provider are ones:
    ``prefer_zones`` orders spot launches only, never what ``list`` or ``cleanup`` scan."""

    zones: list[str]

    def spot_price_in(self, zone: str, instance_type: str) -> float: ...

    def price_per_hour(self, instance_type: str, spot: bool = False) -> float: ...

    def prefer_zones(self, zones: Sequence[str]) -> None: ...


class Provider(Protocol):
    name: str
    # True where launch() waits on a remote cloud (seconds to minutes per VM): the controller
    # then runs it on a thread and keeps dispatching and watching the budget meanwhile.
    # False where it returns at once (simulated, local processes): launched inline, so a
    # seeded simulation repeats exactly.
    blocking_launch: bool

    def launch(self, count: int, instance_type: str, spot: bool = False,
               tags: Mapping[str, str] | None = None) -> list[Instance]:
        """Start ``count`` instances; each runs an ``elastune worker`` on a queue of its own."""
        ...

    def terminate(self, instance_ids: Sequence[str]) -> list[Instance]: ...

    def list(self, experiment: str | None = None) -> list[Instance]:
        """Instances this provider knows, with their current states."""
        ...

    def price_per_hour(self, instance_type: str, spot: bool = False) -> float: ...

    def slots(self, instance_type: str) -> int:
        """GPU slots of one instance of this type."""
        ...


@runtime_checkable
class CloudServices(Protocol):
    """What a sweep on a cloud needs besides VMs: object storage for checkpoints and code, the
    secret store that keeps the broker password out of user data, and sweeps for leftovers."""

    def ensure_bucket(self, bucket: str) -> None:
        """Create the private bucket unless it is there already."""
        ...

    def put_secret(self, name: str, value: str) -> str:
        """Store ``value`` under ``name``; returns the reference a VM reads it by."""
        ...

    def delete_secret(self, name: str) -> None:
        """Delete the secret; a missing one is not an error."""
        ...

    def cleanup_secrets(self, experiment: str | None = None) -> list[str]:
        """Delete the broker secrets sweeps left behind; returns their names."""
        ...

    def cleanup(self, experiment: str | None = None) -> list[Instance]:
        """Terminate every live instance of ``experiment`` (every managed one when None)."""
        ...


@runtime_checkable
class CloudProvider(Provider, CloudServices, Protocol):
    """A provider that rents VMs on a cloud (AWS, GCP): its VMs run ``bootstrap``."""

    bootstrap: Bootstrap | None


@runtime_checkable
class Retaggable(Protocol):
    """A provider that can move a live instance to another experiment (a VM kept warm for the
    next sweep, then taken up by it)."""

    def retag(self, instance_ids: Sequence[str], experiment: str) -> list[Instance]:
        """Move these live instances to ``experiment``; returns the ones moved."""
        ...
