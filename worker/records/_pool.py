"""A shared pool of workers in Redis: who is in it, who is alive, and which sweeps use it.

A worker started with ``elastune worker --pool NAME`` adds itself to the pool's member hash
and keeps a liveness key with a short TTL fresh; a sweep with ``provider.type: pool`` reads
them as its cluster, and claims slots before it sends work so that sweeps sharing the pool
never send one slot two segments (see ``cloud/_pool.py``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# A member whose liveness key is older than this is gone (killed, frozen or cut off).
ALIVE_TTL_S = 10
# How often a member refreshes its liveness key.
ALIVE_EVERY_S = 2.0


def members_key(pool: str) -> str:
    return f"elastune:pool:{pool}:members"


def alive_key(pool: str, worker: str) -> str:
    return f"elastune:pool:{pool}:alive:{worker}"


def claims_key(pool: str) -> str:
    return f"elastune:pool:{pool}:claims"


def sweeps_key(pool: str) -> str:
    return f"elastune:pool:{pool}:sweeps"


class PoolMember(BaseModel):
    """What a pool worker says of itself."""

    model_config = ConfigDict(frozen=True)

    v: int = 1
    name: str
    queue: str
    slots: int
    gpus: list[int] = []
    host: str
    pid: int
    joined_at: float
