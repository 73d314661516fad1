"""Warm VMs across back-to-back sweeps (``provider.keep_warm``).

A sweep that ends leaves its idle, registered VMs running until a deadline it pays for (its
ledger bills each to that deadline, within its cost budget), and lists them in the broker under
a scope: the setup a VM was booted with (cloud, region, image, install, storage, identity). A
later sweep of the same scope on the same broker takes them up before it launches anything:
no boot, no second billing minimum, billed from the deadline the first sweep paid up to. A VM
not taken up leaves at its deadline (its worker's watchdog). So every VM-second is billed once,
to the sweep that held the VM then. SkyPilot's autostop keeps a cluster up between jobs the
same way; here the unit is a VM and the bill stays per sweep.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import redis

from worker.records import Instance, follows_key, warm_until_key

# The tag a kept-warm VM carries between sweeps (instead of an experiment's id), so the sweep
# that left it does not clean it up, and `elastune cloud ls` shows it as warm.
WARM_EXPERIMENT = "elastune-warm"
# A VM whose deadline is this close is not taken up: it may be leaving already.
TAKE_MARGIN_S = 20.0
# How long a taken-up worker remembers the heartbeat it follows (longer than any sweep).
FOLLOW_TTL_S = 30 * 24 * 3600

# KEYS: the scope's hash. ARGV: now, margin, count, instance types (json list), spot ("1",
# "0"), the heartbeat key to follow, its TTL in ms. Takes up to count entries whose deadline is
# not near, of those types and market, and points their workers at the heartbeat, atomically:
# a VM is taken up by one sweep only.
_TAKE = """
local now, margin, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local types = {}
for _, t in ipairs(cjson.decode(ARGV[4])) do types[t] = true end
local spot = ARGV[5] == '1'
local out = {}
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local e = cjson.decode(entries[i + 1])
  if e['until'] <= now then
    redis.call('HDEL', KEYS[1], entries[i])
  elseif #out < count and e['until'] > now + margin and types[e.instance.instance_type]
      and e.instance.spot == spot then
    redis.call('HDEL', KEYS[1], entries[i])
    redis.call('SET', e.follows_key, ARGV[6], 'PX', ARGV[7])
    redis.call('DEL', e.until_key)
    table.insert(out, entries[i + 1])
  end
end
return out
"""


def warm_scope(setup: Mapping[str, Any]) -> str:
    """The scope of VMs booted with ``setup`` (what their startup script and identity depend
    on): two sweeps share warm VMs only if their setups are equal."""
    text = json.dumps(setup, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def warm_key(scope: str) -> str:
    return f"elastune:warm:{scope}"


@dataclass(frozen=True)
class WarmVm:
    """A VM a finished sweep left running: paid for by ``left_by`` up to ``until``."""

    instance: Instance
    until: float
    left_by: str


class WarmPool:
    """The warm VMs of one scope in the broker: :meth:`offer` at a sweep's end, :meth:`take`
    before a later sweep launches."""

    def __init__(self, client: redis.Redis, scope: str, keep_s: float = 0.0) -> None:
        """``keep_s``: how long this sweep keeps its VMs warm when it ends (0: it takes warm
        VMs up but leaves none)."""
        if not keep_s >= 0:
            raise ValueError(f"keep_s must be >= 0, got {keep_s!r}")
        self._redis = client
        self.scope = scope
        self.keep_s = keep_s
        self._take = client.register_script(_TAKE)

    def offer(self, instance: Instance, left_by: str, until: float) -> None:
        """List ``instance`` as warm until ``until`` (epoch seconds): its worker waits for a
        new controller until then, and leaves at that moment if none took it up."""
        ttl_ms = max(1, int((until - _now(self._redis)) * 1000) + 60_000)
        entry = {"instance": instance.model_dump(mode="json"), "until": until,
                 "left_by": left_by, "follows_key": follows_key(instance.queue),
                 "until_key": warm_until_key(instance.queue)}
        pipe = self._redis.pipeline()
        pipe.set(warm_until_key(instance.queue), repr(until), px=ttl_ms)
        pipe.delete(follows_key(instance.queue))
        pipe.hset(warm_key(self.scope), instance.instance_id, json.dumps(entry))
        pipe.execute()

    def take(self, count: int, instance_types: Iterable[str], spot: bool, heartbeat_key: str,
             now: float) -> list[WarmVm]:
        """Take up to ``count`` warm VMs of these types and market; their workers follow
        ``heartbeat_key`` from now on. Entries past their deadline are dropped."""
        if count <= 0:
            return []
        raw = self._take(keys=[warm_key(self.scope)],
                         args=[now, TAKE_MARGIN_S, count, json.dumps(sorted(set(instance_types))),
                               "1" if spot else "0", heartbeat_key, FOLLOW_TTL_S * 1000])
        out = []
        for item in raw:
            e = json.loads(item)
            out.append(WarmVm(Instance.model_validate(e["instance"]), float(e["until"]),
                              str(e["left_by"])))
        return out

    def available(self) -> int:
        """How many VMs are listed warm now (some may be past their deadline)."""
        return int(self._redis.hlen(warm_key(self.scope)))

    def listed(self) -> list[WarmVm]:
        """The warm VMs listed now (any deadline)."""
        out = []
        for value in self._redis.hvals(warm_key(self.scope)):
            e = json.loads(value)
            out.append(WarmVm(Instance.model_validate(e["instance"]), float(e["until"]),
                              str(e["left_by"])))
        return out


def _now(client: redis.Redis) -> float:
    """The broker's clock (epoch seconds): the deadline a TTL is set for is on the same clock
    as the controller's wall clock within NTP's error, which the TTL's minute of slack covers."""
    seconds, micros = client.time()
    return float(seconds) + float(micros) / 1e6
