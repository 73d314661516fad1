"""Providers that rent (or stand in for) machines, behind one small interface."""

from cloud._autoscaler import Node, Scaling, reconcile
from cloud._aws import AwsProvider
from cloud._bootstrap import secret_uri, startup_script
from cloud._gcp import GcpProvider
from cloud._local import DEFAULT_PRICE_PER_HOUR, LocalProvider
from cloud._pool import PoolProvider, SharedPool
from cloud._provider import (
    AuthError,
    Bootstrap,
    CapacityError,
    CloudProvider,
    CloudServices,
    NotFoundError,
    Provider,
    ProviderError,
    QuotaError,
    Retaggable,
    ThrottledError,
    ZonedSpot,
)
from cloud._warm import TAKE_MARGIN_S, WARM_EXPERIMENT, WarmPool, WarmVm, warm_scope

__all__ = [
    "DEFAULT_PRICE_PER_HOUR",
    "AuthError",
    "AwsProvider",
    "Bootstrap",
    "CapacityError",
    "CloudProvider",
    "CloudServices",
    "GcpProvider",
    "LocalProvider",
    "Node",
    "NotFoundError",
    "PoolProvider",
    "Provider",
    "ProviderError",
    "QuotaError",
    "Retaggable",
    "Scaling",
    "SharedPool",
    "TAKE_MARGIN_S",
    "ThrottledError",
    "WARM_EXPERIMENT",
    "WarmPool",
    "WarmVm",
    "ZonedSpot",
    "reconcile",
    "secret_uri",
    "startup_script",
    "warm_scope",
]
