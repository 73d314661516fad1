"""Warm VMs between sweeps: the broker's list (taken up once, by type, market and deadline)
and the worker's watchdog (waits while paid for, follows the sweep that took it up)."""

from __future__ import annotations

import threading
import time

import pytest

from cloud import TAKE_MARGIN_S, WarmPool, warm_scope
from worker._watchdog import watch_controller
from worker.records import Instance, InstanceState, follows_key, warm_until_key

pytestmark = pytest.mark.slow   # a real Redis server


def _vm(iid: str, itype: str = "g4dn.xlarge", spot: bool = True) -> Instance:
    return Instance(instance_id=iid, provider="aws", instance_type=itype, spot=spot,
                    price_per_hour=0.2, state=InstanceState.RUNNING, launched_at=100.0,
                    queue=iid)


def test_a_warm_vm_is_taken_up_once_by_its_type_and_market_before_its_deadline(redis_server):
    client = redis_server.client()
    pool = WarmPool(client, warm_scope({"type": "aws", "region": "us-east-1"}), keep_s=60.0)
    other_scope = WarmPool(client, warm_scope({"type": "aws", "region": "eu-west-1"}))
    now = time.time()
    for vm in (_vm("i-a"), _vm("i-b"), _vm("i-c", spot=False), _vm("i-d", "g5.xlarge")):
        pool.offer(vm, "exp-1", now + 300)
    pool.offer(_vm("i-late"), "exp-1", now + TAKE_MARGIN_S / 2)   # leaving: never taken
    assert client.get(warm_until_key("i-a")) is not None

    assert other_scope.take(5, ["g4dn.xlarge"], True, "hb-x", now) == []
    taken = pool.take(5, ["g4dn.xlarge"], True, "elastune:exp-2:controller", now)
    assert sorted(v.instance.instance_id for v in taken) == ["i-a", "i-b"]
    assert all(v.left_by == "exp-1" and v.until == pytest.approx(now + 300) for v in taken)
    for iid in ("i-a", "i-b"):
        # Its worker follows the sweep that took it up, and waits on no deadline any more.
        assert client.get(follows_key(iid)) == b"elastune:exp-2:controller"
        assert client.get(warm_until_key(iid)) is None
    # Taken once: a second sweep finds none of them.
    assert pool.take(5, ["g4dn.xlarge"], True, "hb-y", now) == []
    assert [v.instance.instance_id for v in pool.take(1, ["g4dn.xlarge"], False, "h", now)] \
        == ["i-c"]
    assert sorted(v.instance.instance_id for v in pool.listed()) == ["i-d", "i-late"]
    # Past its deadline an entry is dropped by the next look.
    pool.take(1, ["p3.2xlarge"], True, "h", now + TAKE_MARGIN_S)
    assert [v.instance.instance_id for v in pool.listed()] == ["i-d"]


def _watch(client, worker: str, wall) -> threading.Event:
    left = threading.Event()
    watch_controller(client, "elastune:exp-1:controller", 0.3, poll_s=0.02,
                     on_orphaned=left.set, worker=worker, wall=wall)
    return left


def test_a_kept_warm_worker_waits_until_its_deadline_then_leaves_at_once(redis_server):
    client = redis_server.client()
    pool = WarmPool(client, "s")
    fake_now = [time.time()]
    client.set("elastune:exp-1:controller", "1")
    left = _watch(client, "i-w", lambda: fake_now[0])
    pool.offer(_vm("i-w"), "exp-1", fake_now[0] + 120)
    client.delete("elastune:exp-1:controller")          # the sweep that kept it ended
    assert not left.wait(1.0)                            # (> the orphan timeout): it waits
    fake_now[0] += 121                                   # its paid-for time is over
    assert left.wait(1.0)


def test_a_taken_up_worker_follows_its_new_sweep(redis_server):
    client = redis_server.client()
    pool = WarmPool(client, "s")
    now = time.time()
    left = _watch(client, "i-t", time.time)
    pool.offer(_vm("i-t"), "exp-1", now + 120)
    client.set("elastune:exp-2:controller", "1")
    assert pool.take(1, ["g4dn.xlarge"], True, "elastune:exp-2:controller", now)
    assert not left.wait(1.0)                            # the new sweep beats
    client.delete("elastune:exp-2:controller")           # and ends without keeping it
    assert left.wait(1.0)                                # orphaned: it goes
