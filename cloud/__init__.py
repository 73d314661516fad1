"""Providers that rent (or stand in for) machines, behind one small interface."""

from cloud._autoscaler import Node, Scaling, reconcile
from cloud._local import DEFAULT_PRICE_PER_HOUR, LocalProvider
from cloud._provider import CapacityError, Provider, ProviderError
from cloud._sim import DEFAULT_TYPE, SimInstanceType, SimProvider, uniform_boot

__all__ = [
    "DEFAULT_PRICE_PER_HOUR",
    "DEFAULT_TYPE",
    "CapacityError",
    "LocalProvider",
    "Node",
    "Provider",
    "ProviderError",
    "Scaling",
    "SimInstanceType",
    "SimProvider",
    "reconcile",
    "uniform_boot",
]
