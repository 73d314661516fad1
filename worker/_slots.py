"""A worker's GPU slots, shared by its pool processes through a Redis set."""

from __future__ import annotations

import redis


def slots_key(worker_name: str) -> str:
    return f"elastune:worker:{worker_name}:slots"


class SlotPool:
    def __init__(self, client: redis.Redis, worker_name: str) -> None:
        self._redis = client
        self._key = slots_key(worker_name)

    def reset(self, slots: int, gpus: list[int] | None = None) -> None:
        """``slots`` slots, numbered 0.. or, given, the worker's GPU indices ``gpus``."""
        pipe = self._redis.pipeline()
        pipe.delete(self._key)
        if slots:
            pipe.sadd(self._key, *(gpus if gpus else range(slots)))
        pipe.execute()

    def claim(self, count: int) -> list[int] | None:
        """Take ``count`` slots at once, or none at all (a segment is never split)."""
        if count == 0:
            return []
        taken = self._redis.spop(self._key, count) or []
        if len(taken) < count:
            if taken:
                self._redis.sadd(self._key, *taken)
            return None
        return sorted(int(t) for t in taken)

    def release(self, gpus: list[int]) -> None:
        if gpus:
            self._redis.sadd(self._key, *gpus)
