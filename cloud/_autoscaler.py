"""The autoscaler: turn a target worker count into launches, drains and terminations.

Rules (RubberBand's cloud realism): never cut a segment short (surplus busy workers drain: they
take no new work and go when idle); an idle worker still inside its paid billing minimum is kept
until the minimum ends (keeping it costs nothing and it may be needed again); booting workers
go first when there is a surplus, then idle ones past their minimum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Node:
    instance_id: str
    launched_at: float
    ready: bool
    busy: bool


@dataclass(frozen=True)
class Scaling:
    launch: int = 0
    terminate: list[str] = field(default_factory=list)
    drain: list[str] = field(default_factory=list)


def reconcile(target: int, nodes: Sequence[Node], now: float, *,
              billing_minimum_s: float) -> Scaling:
    """What to do so that ``nodes`` (live, draining included) moves towards ``target``."""
    target = max(0, target)
    if target >= len(nodes):
        return Scaling(launch=target - len(nodes))
    surplus = len(nodes) - target
    booting = sorted((n for n in nodes if not n.ready), key=lambda n: -n.launched_at)
    idle = sorted((n for n in nodes if n.ready and not n.busy), key=lambda n: n.launched_at)
    busy = [n for n in nodes if n.ready and n.busy]
    terminate, drain = [], []
    for node in booting:
        if surplus == 0:
            break
        terminate.append(node.instance_id)
        surplus -= 1
    for node in idle:
        if surplus == 0:
            break
        if now - node.launched_at >= billing_minimum_s:
            terminate.append(node.instance_id)
        # else: paid for anyway; it stays available and goes once its minimum has passed
        surplus -= 1
    for node in busy:
        if surplus == 0:
            break
        drain.append(node.instance_id)
        surplus -= 1
    return Scaling(terminate=terminate, drain=drain)
