"""Providers that rent (or stand in for) machines, behind one small interface."""

from cloud._local import DEFAULT_PRICE_PER_HOUR, LocalProvider
from cloud._provider import CapacityError, Provider, ProviderError

__all__ = ["DEFAULT_PRICE_PER_HOUR", "CapacityError", "LocalProvider", "Provider", "ProviderError"]
