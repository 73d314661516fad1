"""Executors run segments and hand back events; the controller never sees how.

``CeleryExecutor`` sends each segment to the queue of the worker chosen for it and reads the
workers' events from one Redis stream per experiment. A simulated executor (same interface)
replays learning curves on a simulated clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Protocol

from worker import (
    KEY_TTL_S,
    NOTICE_KEY,
    REGISTRY_KEY,
    RIDE_OUT_S,
    TASK_NAME,
    BrokerAddress,
    forget_workers,
    make_app,
)
from worker.records import Event, Instance, Segment, parse_event, warm_until_key


class Executor(Protocol):
    def submit(self, segment: Segment, instance: Instance) -> None: ...

    def poll(self, timeout_s: float) -> list[Event]:
        """Events since the last poll; waits up to ``timeout_s`` for the first one."""
        ...

    def request_stop(self, segment_ids: list[str]) -> None: ...

    def revoke(self, segment_ids: list[str]) -> None:
        """The segments were given up (their instance is gone, or their lease lapsed) and run
        again elsewhere: a worker that still holds one (frozen, cut off) stops it and writes
        no checkpoint for it."""
        ...

    def ready(self, instance: Instance) -> bool:
        """Whether the instance's worker has registered and takes segments."""
        ...

    def heartbeats(self) -> Mapping[str, int]:
        """A count per running segment that moves while its worker is alive and working on
        it; the controller renews the segment's lease when it moves."""
        ...

    def notices(self) -> set[str]:
        """Instances whose cloud gave notice it will take them back (spot interruptions)."""
        ...

    def close(self) -> None: ...


def events_key(experiment_id: str) -> str:
    return f"elastune:{experiment_id}:events"


def stop_key(experiment_id: str) -> str:
    return f"elastune:{experiment_id}:stop"


def heartbeat_key(experiment_id: str) -> str:
    return f"elastune:{experiment_id}:beats"


def revoked_key(experiment_id: str) -> str:
    return f"elastune:{experiment_id}:revoked"


class CeleryExecutor:
    def __init__(self, address: BrokerAddress, experiment_id: str, *,
                 forget_workers: bool = True) -> None:
        """``forget_workers``: at the end, remove the sweep's workers' keys and queues (its
        own workers; a shared pool's stay)."""
        self._address = address
        self._forget = forget_workers
        self._app = make_app(address)
        self._redis = address.client(ride_out_s=RIDE_OUT_S)
        self.events_key = events_key(experiment_id)
        self.stop_key = stop_key(experiment_id)
        self.heartbeat_key = heartbeat_key(experiment_id)
        self.revoked_key = revoked_key(experiment_id)
        self._last_id = "0-0"
        self._trim_to: str | None = None
        self._queues: dict[str, str] = {}   # every worker of this sweep seen: name -> queue

    def submit(self, segment: Segment, instance: Instance) -> None:
        segment = segment.model_copy(update={"events_key": self.events_key,
                                             "stop_key": self.stop_key,
                                             "heartbeat_key": self.heartbeat_key,
                                             "revoked_key": self.revoked_key})
        self._queues[instance.instance_id] = instance.queue
        self._app.send_task(TASK_NAME, args=[segment.model_dump()], queue=instance.queue)

    def poll(self, timeout_s: float) -> list[Event]:
        if self._trim_to is not None:
            # The previous batch is in the store by now: drop it so the stream stays small.
            self._redis.xtrim(self.events_key, minid=self._trim_to, approximate=False)
            self._redis.xdel(self.events_key, self._trim_to)
            self._trim_to = None
        block = max(1, int(timeout_s * 1000))
        reply = self._redis.xread({self.events_key: self._last_id}, count=5000, block=block)
        events: list[Event] = []
        for _, messages in reply or []:
            for message_id, fields in messages:
                self._last_id = message_id.decode() if isinstance(message_id, bytes) else message_id
                events.append(parse_event(fields[b"e"]))
        if events:
            self._trim_to = self._last_id
        return events

    def request_stop(self, segment_ids: list[str]) -> None:
        if segment_ids:
            pipe = self._redis.pipeline()
            pipe.sadd(self.stop_key, *segment_ids)
            pipe.expire(self.stop_key, KEY_TTL_S)   # outlives a dead controller only so long
            pipe.execute()

    def revoke(self, segment_ids: list[str]) -> None:
        if segment_ids:
            pipe = self._redis.pipeline()
            for key in (self.revoked_key, self.stop_key):
                pipe.sadd(key, *segment_ids)
                pipe.expire(key, KEY_TTL_S)
            pipe.execute()

    def ready(self, instance: Instance) -> bool:
        self._queues[instance.instance_id] = instance.queue
        raw = self._redis.hget(REGISTRY_KEY, instance.instance_id)
        return raw is not None and json.loads(raw).get("queue") == instance.queue

    def notices(self) -> set[str]:
        return {k.decode() if isinstance(k, bytes) else k
                for k in self._redis.hkeys(NOTICE_KEY)}

    def heartbeats(self) -> dict[str, int]:
        return {(k.decode() if isinstance(k, bytes) else k): int(v)
                for k, v in self._redis.hgetall(self.heartbeat_key).items()}

    def close(self) -> None:
        """The sweep is over and its workers are terminated: remove its keys and theirs. A
        shared pool's workers live on, and one frozen mid-segment may wake later: the fence
        (the revoked and stop sets) stays until its TTL so it still writes nothing."""
        if self._forget:
            self._redis.delete(self.stop_key, self.heartbeat_key, self.events_key,
                               self.revoked_key)
            # A worker kept warm for a later sweep (provider.keep_warm) keeps its traces.
            pipe = self._redis.pipeline(transaction=False)
            for queue in self._queues.values():
                pipe.exists(warm_until_key(queue))
            warm = pipe.execute() if self._queues else []
            forget_workers(self._redis, {name: queue for (name, queue), kept
                                         in zip(self._queues.items(), warm, strict=True)
                                         if not kept})
        else:
            self._redis.delete(self.heartbeat_key, self.events_key)
        self._redis.close()
        self._app.close()
