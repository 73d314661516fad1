"""What workers leave in the broker, removed once they are gone: a sweep calls
:func:`forget_workers` for its own workers at its end, so a user's Redis keeps nothing of them.

A worker killed (as local workers and VMs are at the end of a sweep) cannot remove its own
registry entry, slot set or spot notice, nor the queue Celery made for it: the list of messages
never taken, the binding kombu keeps for the queue's exchange, and the messages delivered but not
acknowledged (``acks_late``), which kombu would otherwise push back into the dead queue after its
visibility timeout, recreating it for good. The key names are read from kombu's Redis channel.
kombu's ``unacked`` hash and ``unacked_index`` set stay while other workers on the same Redis
use them (only these workers' entries go; Redis drops them once empty), as does its
``unacked_mutex``, which expires by itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import redis

from worker._interruption import NOTICE_KEY
from worker._main import REGISTRY_KEY
from worker._slots import slots_key


def forget_workers(client: redis.Redis, queues: Mapping[str, str]) -> None:
    """Remove every trace of the workers named in ``queues`` (worker name -> its queue)."""
    if not queues:
        return
    from kombu.transport.redis import Channel

    names = list(queues)
    pipe = client.pipeline(transaction=False)
    pipe.hdel(REGISTRY_KEY, *names)
    pipe.hdel(NOTICE_KEY, *names)
    for name, queue in queues.items():
        pipe.delete(slots_key(name))
        # One list per priority step (kombu's ``_q_for_pri``: step 0 is the bare name).
        pipe.delete(queue, *(f"{queue}{Channel.sep}{p}" for p in Channel.priority_steps if p))
    pipe.execute()
    for queue in queues.values():
        _unbind(client, queue, Channel)
    _drop_unacked(client, set(queues.values()), Channel)


def _unbind(client: redis.Redis, queue: str, channel: type) -> None:
    """Drop the queue from the binding tables of the exchange Celery named after it."""
    tables = [channel.keyprefix_queue % (queue,)]
    permanent = getattr(channel, "keyprefix_binding_permanent", None)   # kombu >= 5.5
    if permanent:
        tables.append(permanent % (queue,))
    for table in tables:
        members = [m for m in client.smembers(table)
                   if _text(m).split(channel.sep)[-1] == queue]
        if members:
            client.srem(table, *members)   # an emptied set is gone


def _drop_unacked(client: redis.Redis, queues: set[str], channel: type) -> None:
    """Forget messages delivered to these queues and never acknowledged."""
    dead = []
    for tag, raw in client.hscan_iter(channel.unacked_key):
        try:
            _, exchange, routing_key = json.loads(raw)
        except (ValueError, TypeError):
            continue   # not kombu's record: not ours to judge
        if routing_key in queues or exchange in queues:
            dead.append(tag)
    if dead:
        pipe = client.pipeline(transaction=False)
        pipe.hdel(channel.unacked_key, *dead)
        pipe.zrem(channel.unacked_index_key, *dead)
        pipe.execute()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
