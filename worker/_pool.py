"""A worker's membership of a shared pool: it joins at start, keeps its liveness key fresh from
a daemon thread, and leaves at shutdown (a killed worker's key simply expires)."""

from __future__ import annotations

import os
import socket
import threading
import time

import redis

from worker.records import (
    ALIVE_EVERY_S,
    ALIVE_TTL_S,
    PoolMember,
    alive_key,
    members_key,
)


def join_pool(client: redis.Redis, pool: str, name: str, queue: str, slots: int,
              gpus: list[int]) -> threading.Event:
    """Join ``pool`` as ``name``; returns the event that stops the keep-alive thread."""
    member = PoolMember(name=name, queue=queue, slots=slots, gpus=gpus,
                        host=socket.gethostname(), pid=os.getpid(), joined_at=time.time())
    key = alive_key(pool, name)
    pipe = client.pipeline()
    pipe.hset(members_key(pool), name, member.model_dump_json())
    pipe.set(key, "1", ex=ALIVE_TTL_S)
    pipe.execute()
    done = threading.Event()

    def keep_alive() -> None:
        while not done.wait(ALIVE_EVERY_S):
            try:
                client.set(key, "1", ex=ALIVE_TTL_S)
            except redis.RedisError:
                pass   # the broker is away for a moment: the sweeps see a gap, not a crash

    threading.Thread(target=keep_alive, name="elastune-pool", daemon=True).start()
    return done


def leave_pool(client: redis.Redis, pool: str, name: str) -> None:
    pipe = client.pipeline()
    pipe.hdel(members_key(pool), name)
    pipe.delete(alive_key(pool, name))
    pipe.execute()
