"""The pool provider: a sweep's cluster is the workers that joined a shared pool in Redis
(``elastune worker --pool NAME``), on a lab's machines, a Kubernetes Deployment or anywhere
else that reaches the broker. It launches and terminates nothing: a worker is in the cluster
from when the sweep first sees it alive until it leaves (or the sweep releases it).

Sweeps sharing a pool claim slots before they send work, in one Redis script, so one slot
never gets two segments; while another live sweep has work waiting, a sweep claims no more
than its fair share (the pool's live slots over the sweeps that want them), and takes up
what the others leave idle otherwise. A sweep's claims go with it when it stops beating.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import redis

from budgets import Clock, RealClock
from cloud._provider import ProviderError
from worker.records import (
    Instance,
    InstanceState,
    PoolMember,
    alive_key,
    claims_key,
    members_key,
    sweeps_key,
)

INSTANCE_TYPE = "pool"
# A sweep that has not beaten for this long holds no claims (its controller is gone).
SWEEP_STALE_S = 30.0

# KEYS: claims, sweeps, members; ARGV: sweep, worker, slots, now, stale_s, alive prefix.
_CLAIM = """
local claims, sweeps, members = KEYS[1], KEYS[2], KEYS[3]
local me, worker, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now, stale, alive = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local live, wanting = {}, 0
local sw = redis.call('HGETALL', sweeps)
for i = 1, #sw, 2 do
  local info = cjson.decode(sw[i + 1])
  if now - info.ts <= stale then
    live[sw[i]] = true
    if info.wants and sw[i] ~= me then wanting = wanting + 1 end
  end
end
live[me] = true
local cap, total = 0, 0
local m = redis.call('HGETALL', members)
for i = 1, #m, 2 do
  if redis.call('EXISTS', alive .. m[i]) == 1 then
    local slots = cjson.decode(m[i + 1]).slots
    total = total + slots
    if m[i] == worker then cap = slots end
  end
end
local used, mine = 0, 0
local c = redis.call('HGETALL', claims)
for i = 1, #c, 2 do
  local sep = string.find(c[i], '|', 1, true)
  local w, s = string.sub(c[i], 1, sep - 1), string.sub(c[i], sep + 1)
  local v = tonumber(c[i + 1])
  if live[s] then
    if w == worker then used = used + v end
    if s == me then mine = mine + v end
  else
    redis.call('HDEL', claims, c[i])
  end
end
if used + n > cap then return 0 end
if wanting > 0 and mine + n > math.ceil(total / (wanting + 1)) then return 0 end
redis.call('HINCRBY', claims, worker .. '|' .. me, n)
return 1
"""


@runtime_checkable
class SharedPool(Protocol):
    """A provider whose instances join by themselves and are shared with other sweeps: the
    cluster takes up the ones that appear, claims a slot before it sends work, and beats so
    that its claims stay its own."""

    def claim(self, instance_id: str, slots: int) -> bool: ...

    def unclaim(self, instance_id: str, slots: int) -> None: ...

    def beat(self, wants: bool) -> None: ...

    def close(self) -> None: ...


class PoolProvider:
    name = "pool"
    blocking_launch = False

    def __init__(self, client: redis.Redis, pool: str, sweep: str, *,
                 price_per_hour: float = 0.0, clock: Clock | None = None) -> None:
        """``sweep``: the experiment id this sweep claims slots as."""
        self._redis = client
        self.pool = pool
        self._sweep = sweep
        self._price = price_per_hour
        self._clock = clock or RealClock()
        self._seen: dict[str, Instance] = {}
        self._claimed: dict[str, int] = {}
        self._claim = client.register_script(_CLAIM)

    # -- Provider ---------------------------------------------------------------------------
    def price_per_hour(self, instance_type: str = INSTANCE_TYPE, spot: bool = False) -> float:
        return self._price

    def slots(self, instance_type: str = INSTANCE_TYPE) -> int:
        return max((i.slots for i in self._seen.values()), default=1)

    def launch(self, count: int, instance_type: str = INSTANCE_TYPE, spot: bool = False,
               tags: Mapping[str, str] | None = None) -> list[Instance]:
        """Nothing: a pool grows when workers join it."""
        if spot:
            raise ProviderError("a pool has no spot market")
        return []

    def members(self) -> dict[str, PoolMember]:
        """The pool's live members (by name)."""
        raw = self._redis.hgetall(members_key(self.pool))
        names = [k.decode() if isinstance(k, bytes) else k for k in raw]
        pipe = self._redis.pipeline()
        for name in names:
            pipe.exists(alive_key(self.pool, name))
        alive = pipe.execute()
        return {name: PoolMember.model_validate_json(value)
                for name, value, up in zip(names, raw.values(), alive, strict=True) if up}

    def list(self, experiment: str | None = None) -> list[Instance]:
        now = self._clock.now()
        live = self.members()
        for name, inst in list(self._seen.items()):
            if inst.state != InstanceState.TERMINATED and name not in live:
                # Left the pool, was killed, or stopped beating: gone for this sweep.
                self._seen[name] = inst.model_copy(update={
                    "state": InstanceState.TERMINATED, "terminated_at": now})
                self._claimed.pop(name, None)
        for name, member in live.items():
            if name not in self._seen:
                self._seen[name] = Instance(
                    instance_id=name, provider=self.name, instance_type=INSTANCE_TYPE,
                    slots=member.slots, price_per_hour=self._price,
                    state=InstanceState.RUNNING, launched_at=now, queue=member.queue,
                    zone=member.host, tags={"pool": self.pool})
        return list(self._seen.values())

    def terminate(self, instance_ids: Sequence[str]) -> list[Instance]:
        """Release the workers from this sweep (they stay in the pool for others)."""
        now = self._clock.now()
        out = []
        for iid in instance_ids:
            inst = self._seen.get(iid)
            if inst is None:
                continue
            held = self._claimed.pop(iid, 0)
            if held:
                self._release(iid, held)
            if inst.state != InstanceState.TERMINATED:
                inst = inst.model_copy(update={"state": InstanceState.TERMINATED,
                                               "terminated_at": now})
                self._seen[iid] = inst
            out.append(inst)
        return out

    # -- SharedPool -------------------------------------------------------------------------
    def claim(self, instance_id: str, slots: int) -> bool:
        ok = bool(self._claim(
            keys=[claims_key(self.pool), sweeps_key(self.pool), members_key(self.pool)],
            args=[self._sweep, instance_id, slots, self._clock.now(), SWEEP_STALE_S,
                  alive_key(self.pool, "")]))
        if ok:
            self._claimed[instance_id] = self._claimed.get(instance_id, 0) + slots
        return ok

    def unclaim(self, instance_id: str, slots: int) -> None:
        held = self._claimed.get(instance_id, 0)
        n = min(held, slots)
        if n <= 0:
            return
        self._claimed[instance_id] = held - n
        self._release(instance_id, n)

    def _release(self, instance_id: str, slots: int) -> None:
        field = f"{instance_id}|{self._sweep}"
        if self._redis.hincrby(claims_key(self.pool), field, -slots) <= 0:
            self._redis.hdel(claims_key(self.pool), field)

    def beat(self, wants: bool) -> None:
        self._redis.hset(sweeps_key(self.pool), self._sweep,
                         json.dumps({"ts": self._clock.now(), "wants": bool(wants)}))

    def close(self) -> None:
        """The sweep is over: its claims and its entry go."""
        claims = claims_key(self.pool)
        mine = [f for f in self._redis.hkeys(claims)
                if (f.decode() if isinstance(f, bytes) else f).endswith(f"|{self._sweep}")]
        pipe = self._redis.pipeline()
        if mine:
            pipe.hdel(claims, *mine)
        pipe.hdel(sweeps_key(self.pool), self._sweep)
        pipe.execute()
        self._claimed.clear()

