"""The provider contract: a few verbs over plain :class:`records.Instance` records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from records import Instance


class ProviderError(RuntimeError):
    """A provider could not do what was asked (the message says why and what to do)."""


class CapacityError(ProviderError):
    """No capacity for this instance type here now; try another type, zone or later."""


class Provider(Protocol):
    name: str

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
