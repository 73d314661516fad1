"""Fallback across types, zones and markets (cloud._fallback), over a small per-cloud verb.

``Cloud.try_launch`` below is a cloud by design of the interface, not a stand-in for one: it has
capacity per (type, zone, market) and answers with the project's own errors, as AWS's and GCP's
``try_launch`` do after mapping their SDK's errors. The real clouds' paths run in
test_aws_provider.py and test_gcp_provider.py against their SDKs.
"""

from __future__ import annotations

import threading

import pytest

from budgets import SimClock
from cloud import (
    AuthError,
    AwsProvider,
    CapacityError,
    CloudProvider,
    CloudServices,
    GcpProvider,
    LocalProvider,
    NotFoundError,
    ProviderError,
    QuotaError,
    ThrottledError,
    ZonedSpot,
)
from cloud._fallback import fallback_types, launch_with_fallback, preferred_order
from tuner.sim import SimProvider
from worker.records import Instance

ZONES = {"t1": ["a", "b"], "t2": ["a", "b", "c"], "t3": ["a"]}


class Cloud:
    """Room for ``capacity[(type, zone, spot)]`` instances (none where not named), or the error
    ``errors[(type, zone, spot)]``; records every attempt in order."""

    def __init__(self, capacity=None, errors=None, barrier=None):
        self.capacity = dict(capacity or {})
        self.errors = dict(errors or {})
        self.attempts: list[tuple[str, str | None, int, bool]] = []
        self.zone_lookups: list[str] = []
        self.barrier = barrier
        self._lock = threading.Lock()
        self._ids = 0

    def zones(self, itype: str) -> list[str | None]:
        self.zone_lookups.append(itype)
        return ZONES.get(itype, [None])

    def try_launch(self, itype: str, zone: str | None, count: int,
                   spot: bool) -> list[Instance]:
        if self.barrier is not None:
            self.barrier.wait()   # every call of the launch must get here at once
        with self._lock:
            self.attempts.append((itype, zone, count, spot))
            key = (itype, zone, spot)
            if key in self.errors:
                raise self.errors[key]
            room = self.capacity.get(key, 0)
            if room == 0:
                raise CapacityError(f"no {itype} in {zone}")
            n = min(room, count)
            self.capacity[key] = room - n
            out = []
            for _ in range(n):
                self._ids += 1
                name = f"i-{self._ids}"
                out.append(Instance(instance_id=name, provider="test", instance_type=itype,
                                    spot=spot, price_per_hour=1.0, launched_at=0.0,
                                    queue=name, zone=zone or ""))
            return out

    def launch(self, count: int, types=("t1", "t2", "t3"), spot: bool = False,
               **kwargs) -> list[Instance]:
        return launch_with_fallback(self.try_launch, count, list(types), self.zones, spot,
                                    **kwargs)


def places(instances: list[Instance]) -> list[tuple[str, str, bool]]:
    return [(i.instance_type, i.zone, i.spot) for i in instances]


# -- the order of attempts ----------------------------------------------------------------------

def test_types_in_order_each_in_its_zones_in_order():
    cloud = Cloud(capacity={("t2", "c", False): 5})
    got = cloud.launch(2)
    assert places(got) == [("t2", "c", False)] * 2
    assert [(t, z) for t, z, _, _ in cloud.attempts] == [
        ("t1", "a"), ("t1", "b"), ("t2", "a"), ("t2", "b"), ("t2", "c")]
    # Zones asked once per type reached, never for a type not reached.
    assert cloud.zone_lookups == ["t1", "t2"]


def test_quota_skips_the_rest_of_the_type():
    cloud = Cloud(capacity={("t1", "b", False): 1, ("t2", "a", False): 1},
                  errors={("t1", "a", False): QuotaError("vCPU quota")})
    (inst,) = cloud.launch(1)
    assert (inst.instance_type, inst.zone) == ("t2", "a")
    assert [(t, z) for t, z, _, _ in cloud.attempts] == [("t1", "a"), ("t2", "a")]


def test_not_offered_in_a_zone_moves_on_to_the_next_zone():
    cloud = Cloud(capacity={("t1", "b", False): 1},
                  errors={("t1", "a", False): NotFoundError("t1 is not offered in a")})
    (inst,) = cloud.launch(1)
    assert inst.zone == "b"


@pytest.mark.parametrize("error", [AuthError("denied"), ThrottledError("slow down"),
                                   ProviderError("bad request")])
def test_other_errors_give_up_at_once(error):
    cloud = Cloud(capacity={("t1", "b", False): 1}, errors={("t1", "a", False): error})
    with pytest.raises(type(error)) as raised:
        cloud.launch(1)
    assert raised.value is error
    assert len(cloud.attempts) == 1


def test_fallback_types_start_at_the_asked_one():
    assert fallback_types("b", ["a", "b", "c"]) == ["b", "c"]
    assert fallback_types("x", ["a", "b"]) == ["x", "a", "b"]
    assert fallback_types("a", ["a", "b", "a"]) == ["a", "b"]


def test_a_preferred_order_keeps_the_zones_it_names_in_its_order():
    assert preferred_order(["a", "b", "c"], ["c", "x", "a", "c"]) == ["c", "a"]
    assert preferred_order(["a", "b"], ["x"]) == ["a", "b"]       # none known: all, as given
    assert preferred_order(["a", "b"], []) == ["a", "b"]
    assert preferred_order([None], ["a"]) == [None]                # the cloud picks


def test_bad_arguments_are_refused():
    cloud = Cloud()
    with pytest.raises(ValueError, match="instance type"):
        cloud.launch(1, types=[])
    with pytest.raises(ValueError, match="width"):
        cloud.launch(1, width=0)
    assert cloud.launch(0) == [] and cloud.attempts == []


# -- when everything was tried: quota vs capacity ---------------------------------------------

def test_capacity_anywhere_is_a_capacity_error_naming_every_attempt():
    cloud = Cloud(errors={("t1", "a", True): QuotaError("spot quota")})
    with pytest.raises(CapacityError) as raised:
        cloud.launch(1, types=["t1", "t3"], spot=True, cloud="TEST")
    text = str(raised.value)
    assert text.startswith("no spot TEST instance launched: no capacity")
    assert "t1 in a: spot quota; t3 in a: no t3 in a" in text


def test_quota_everywhere_is_a_quota_error():
    cloud = Cloud(errors={(t, "a", False): QuotaError(f"{t} quota") for t in ("t1", "t3")})
    with pytest.raises(QuotaError, match="quota allows no more.*t1 in a: t1 quota"):
        cloud.launch(1, types=["t1", "t3"])


def test_not_found_everywhere_is_a_not_found_error():
    cloud = Cloud(errors={("t3", "a", False): NotFoundError("no such image")})
    with pytest.raises(NotFoundError, match="t3 in a: no such image"):
        cloud.launch(1, types=["t3"])


def test_the_cloud_gives_the_short_reason():
    cloud = Cloud()
    with pytest.raises(CapacityError, match=r"t3 in a: CapacityError\)"):
        cloud.launch(1, types=["t3"], reason=lambda e: type(e).__name__)


# -- partial launches -----------------------------------------------------------------------------

def test_a_short_answer_ends_the_walk():
    # One call for all (EC2's RunInstances with MinCount=1): what it started is the answer.
    cloud = Cloud(capacity={("t1", "a", False): 2, ("t1", "b", False): 5})
    got = cloud.launch(5)
    assert places(got) == [("t1", "a", False)] * 2
    assert cloud.attempts == [("t1", "a", 5, False)]


def test_one_instance_per_call_fills_the_count_across_zones():
    # GCP: each VM walks the order on its own; one that finds no room moves on.
    cloud = Cloud(capacity={("t1", "a", False): 2, ("t1", "b", False): 1,
                            ("t2", "a", False): 5})
    got = cloud.launch(5, per_call=1)
    assert sorted(places(got)) == sorted([("t1", "a", False)] * 2 + [("t1", "b", False)]
                                         + [("t2", "a", False)] * 2)
    # What one call learned (t1 in a is full) the next skips.
    assert [(t, z) for t, z, _, _ in cloud.attempts] == [
        ("t1", "a"), ("t1", "a"), ("t1", "a"), ("t1", "b"), ("t1", "b"), ("t2", "a"),
        ("t2", "a")]


def test_what_started_is_returned_when_the_rest_gave_up():
    cloud = Cloud(capacity={("t3", "a", False): 2})
    got = cloud.launch(4, types=["t3"], per_call=1)
    assert len(got) == 2
    cloud = Cloud(capacity={("t3", "a", False): 1})
    cloud.errors[("t3", "a", False)] = AuthError("denied")
    with pytest.raises(AuthError):
        cloud.launch(3, types=["t3"], per_call=1)


def test_calls_run_width_at_a_time():
    # Three calls that each wait for the other two: they only finish if they run at once.
    barrier = threading.Barrier(3, timeout=10)
    cloud = Cloud(capacity={("t1", "a", False): 3}, barrier=barrier)
    got = cloud.launch(3, per_call=1, width=8)
    assert len(got) == 3 and len({i.instance_id for i in got}) == 3
    assert not barrier.broken


# -- spot, then on-demand where the cloud allows it -----------------------------------------------

def test_spot_falls_back_to_on_demand_when_allowed():
    cloud = Cloud(capacity={("t2", "b", False): 1},
                  errors={("t1", "a", True): QuotaError("spot quota")})
    (inst,) = cloud.launch(1, types=["t1", "t2"], spot=True, on_demand_fallback=True)
    assert (inst.instance_type, inst.zone, inst.spot) == ("t2", "b", False)
    spot_attempts = [(t, z) for t, z, _, s in cloud.attempts if s]
    assert spot_attempts == [("t1", "a"), ("t2", "a"), ("t2", "b"), ("t2", "c")]
    on_demand = [(t, z) for t, z, _, s in cloud.attempts if not s]
    assert on_demand == [("t1", "a"), ("t1", "b"), ("t2", "a"), ("t2", "b")]


def test_spot_stays_spot_unless_allowed():
    cloud = Cloud(capacity={("t1", "a", False): 1})
    with pytest.raises(CapacityError, match="no spot instance launched"):
        cloud.launch(1, types=["t1"], spot=True)
    assert all(spot for _, _, _, spot in cloud.attempts)


def test_on_demand_fallback_is_only_for_capacity_and_quota():
    cloud = Cloud(capacity={("t1", "a", False): 1},
                  errors={("t1", "a", True): AuthError("denied")})
    with pytest.raises(AuthError):
        cloud.launch(1, types=["t1"], spot=True, on_demand_fallback=True)
    assert cloud.attempts == [("t1", "a", 1, True)]


def test_both_markets_exhausted_names_the_on_demand_attempts():
    cloud = Cloud()
    with pytest.raises(CapacityError, match="no spot or on-demand instance.*on-demand t3 in a"):
        cloud.launch(1, types=["t3"], spot=True, on_demand_fallback=True)


# -- the storage and secret verbs -----------------------------------------------------------------

def test_both_clouds_declare_the_storage_and_secret_verbs(tmp_path):
    aws = AwsProvider("us-east-1", ["g5.xlarge"], image_id="ami-0abc")
    gcp = GcpProvider("project", ["us-central1-a"], ["g2-standard-4"])
    for provider in (aws, gcp):
        assert isinstance(provider, CloudServices) and isinstance(provider, CloudProvider)
    local = LocalProvider("redis://localhost:6379/0", log_dir=tmp_path)
    for provider in (local, SimProvider(SimClock(0.0))):
        assert not isinstance(provider, CloudServices)


def test_both_clouds_let_a_spot_policy_order_their_zones():
    """What the controller checks before it orders zones (tuner/_plan_following.py)."""
    zoned = AwsProvider("us-east-1", ["g5.xlarge"], image_id="ami-0abc",
                        zones=["us-east-1a", "us-east-1b"])
    unzoned = AwsProvider("us-east-1", ["g5.xlarge"], image_id="ami-0abc")
    gcp = GcpProvider("project", ["us-central1-a", "us-central1-b"], ["g2-standard-4"])
    assert all(isinstance(p, ZonedSpot) for p in (zoned, unzoned, gcp))
    assert zoned.zones == ["us-east-1a", "us-east-1b"] and len(gcp.zones) == 2
    assert unzoned.zones == []          # zones not looked up yet: nothing to order (no call)
    assert gcp.spot_price_in("us-central1-b", "g2-standard-4") == pytest.approx(0.28)
