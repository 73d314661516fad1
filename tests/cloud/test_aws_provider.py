"""The AWS provider, S3 store and SSM secrets against moto's server over HTTP, with AWS's real
error replies injected by a proxy (see tests/aws_server.py)."""

from __future__ import annotations

import base64

import pytest

from budgets import SimClock
from cloud._aws import (
    DLAMI_PARAMETER,
    AwsProvider,
    logical_tags,
    physical_tags,
    provider_error,
)
from cloud._provider import (
    AuthError,
    Bootstrap,
    CapacityError,
    NotFoundError,
    ProviderError,
    QuotaError,
    ThrottledError,
    ZonedSpot,
)
from tests.aws_server import (  # noqa: F401 - the fixtures aws, aws_env, aws_server
    REGION,
    aws_env_fixture,
    aws_fixture,
    aws_server_fixture,
)
from worker._checkpoints import checkpoint_steps, load_checkpoint, save_checkpoint
from worker._s3 import S3Store
from worker._secrets import SecretError, read_secret
from worker._storage import open_store
from worker._trainable import load_trainable, write_bundle
from worker.records import InstanceState

TYPES = ["g4dn.xlarge", "g4dn.12xlarge", "g5.xlarge"]
PASSWORD = "hunter2-not-in-user-data"
BOOT = Bootstrap(broker_url="rediss://broker.example.com:6380/0",
                 secret_name="/elastune/exp1/broker", storage_uri="s3://bucket/elastune/exp1",
                 install="elastune==0.1.0")


def provider(aws, types=TYPES, **kwargs):
    kwargs.setdefault("image_id", aws.image_id())
    kwargs.setdefault("bootstrap", BOOT)
    kwargs.setdefault("clock", SimClock(1000.0))
    return AwsProvider(REGION, types, endpoint_url=aws.url, seed=1, **kwargs)


def launches(aws):
    """(instance type, zone) of every RunInstances request, in order."""
    return [(p["InstanceType"], p.get("Placement.AvailabilityZone"))
            for p in aws.requests("RunInstances")]


def tags_of(aws, instance_id):
    reply = aws.client("ec2").describe_instances(InstanceIds=[instance_id])
    raw = reply["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


# -- launch -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_launch_on_demand_tags_user_data_and_record(aws):
    p = provider(aws)
    out = p.launch(2, "g4dn.xlarge", tags={"experiment": "exp1", "owner": "ml"})
    assert len(out) == 2
    for inst in out:
        assert inst.instance_id.startswith("i-") and inst.queue == inst.instance_id
        assert (inst.provider, inst.instance_type, inst.spot) == ("aws", "g4dn.xlarge", False)
        assert inst.slots == 1 and inst.price_per_hour == pytest.approx(0.526)
        assert inst.zone == "us-east-1a" and inst.launched_at == 1000.0
        assert inst.state in (InstanceState.PENDING, InstanceState.RUNNING)
        assert inst.tags == {"experiment": "exp1", "owner": "ml"} and not inst.preempted
        assert tags_of(aws, inst.instance_id) == {
            "elastune-experiment": "exp1", "elastune-managed": "true", "owner": "ml"}
    (req,) = aws.requests("RunInstances")
    assert (req["MinCount"], req["MaxCount"]) == ("1", "2")   # as sent by the provider
    assert req["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert req["MetadataOptions.HttpTokens"] == "required" and req["ClientToken"]
    assert "InstanceMarketOptions.MarketType" not in req
    volumes = aws.client("ec2").describe_volumes()["Volumes"]
    assert volumes and all({"Key": "elastune-experiment", "Value": "exp1"} in v["Tags"]
                           for v in volumes)

    ec2 = aws.client("ec2")
    data = ec2.describe_instance_attribute(InstanceId=out[0].instance_id, Attribute="userData")
    script = base64.b64decode(data["UserData"]["Value"]).decode()
    assert script.startswith("#!/bin/bash")
    assert "elastune worker --name-from-metadata aws" in script
    assert "--password-secret 'ssm:/elastune/exp1/broker?region=us-east-1'" in script
    assert "--slots 1" in script and "elastune==0.1.0" in script
    assert PASSWORD not in script and "rediss://broker.example.com:6380/0" in script


def test_launch_spot_records_catalog_price(aws):
    p = provider(aws)
    out = p.launch(1, "g4dn.xlarge", spot=True, tags={"experiment": "exp1"})
    assert out[0].spot and out[0].price_per_hour == pytest.approx(0.21)
    (req,) = aws.requests("RunInstances")
    assert req["InstanceMarketOptions.MarketType"] == "spot"
    assert req["InstanceMarketOptions.SpotOptions.SpotInstanceType"] == "one-time"
    assert req["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] == "terminate"
    (listed,) = p.list("exp1")
    assert listed.spot and listed.price_per_hour == pytest.approx(0.21)


def test_partial_launch_is_accepted(aws):
    aws.launch_limit = 1
    out = provider(aws).launch(3, "g4dn.xlarge", tags={"experiment": "exp1"})
    assert len(out) == 1


@pytest.mark.slow
def test_launch_without_bootstrap_and_with_network_settings(aws):
    ec2 = aws.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24",
                               AvailabilityZone="us-east-1c")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="w", Description="w", VpcId=vpc)["GroupId"]
    aws.client("iam").create_instance_profile(InstanceProfileName="elastune-worker")
    p = provider(aws, bootstrap=None, subnet_ids={"us-east-1c": subnet},
                 security_group_ids=[group], iam_instance_profile="elastune-worker")
    (inst,) = p.launch(1, "g5.xlarge", tags={"experiment": "e"})
    assert inst.zone == "us-east-1c"
    (req,) = aws.requests("RunInstances")
    assert req["SubnetId"] == subnet and req["SecurityGroupId.1"] == group
    assert req["IamInstanceProfile.Name"] == "elastune-worker" and "UserData" not in req


# -- list, terminate, cleanup ---------------------------------------------------------------------

@pytest.mark.slow
def test_list_by_experiment_and_all_managed(aws):
    p = provider(aws)
    a = {i.instance_id for i in p.launch(2, "g4dn.xlarge", tags={"experiment": "exp-a"})}
    a |= {i.instance_id for i in p.launch(1, "g5.xlarge", tags={"experiment": "exp-a"})}
    b = {i.instance_id for i in p.launch(1, "g4dn.xlarge", tags={"experiment": "exp-b"})}
    aws.client("ec2").run_instances(ImageId=aws.image_id(), MinCount=1, MaxCount=1,
                                    InstanceType="g4dn.xlarge")   # not ours
    listed = p.list("exp-a")
    assert {i.instance_id for i in listed} == a
    assert {i.instance_type for i in listed} == {"g4dn.xlarge", "g5.xlarge"}
    assert all(i.state == InstanceState.RUNNING and i.tags == {"experiment": "exp-a"}
               for i in listed)
    assert {i.instance_id for i in p.list()} == a | b
    assert p.list("exp-none") == []


def test_terminate_and_list_show_terminated(aws):
    clock = SimClock(50.0)
    p = provider(aws, clock=clock)
    a = [i.instance_id for i in p.launch(2, "g4dn.xlarge", tags={"experiment": "exp-a"})]
    (b,) = [i.instance_id for i in p.launch(1, "g4dn.xlarge", tags={"experiment": "exp-b"})]
    clock.advance_to(80.0)
    done = p.terminate(a)
    assert [i.instance_id for i in done] == a
    assert all(i.state == InstanceState.TERMINATED and i.terminated_at == 80.0
               and i.launched_at == 50.0 and not i.preempted for i in done)
    assert {(i.instance_id, i.state) for i in p.list("exp-a")} == {
        (iid, InstanceState.TERMINATED) for iid in a}
    assert [i.state for i in p.list("exp-b")] == [InstanceState.RUNNING]
    # Again: already gone is no error, and the termination time stays the first one.
    clock.advance_to(90.0)
    assert [i.terminated_at for i in p.terminate(a)] == [80.0, 80.0]
    assert {i.state for i in p.list("exp-b")} == {InstanceState.RUNNING} and b


@pytest.mark.slow
def test_terminate_unknown_or_foreign_ids(aws):
    p = provider(aws)
    (mine,) = p.launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    foreign = aws.client("ec2").run_instances(
        ImageId=aws.image_id(), MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    assert p.terminate(["i-0123456789abcdef0"]) == []
    done = p.terminate(["i-0123456789abcdef0", mine.instance_id, foreign])
    assert [i.instance_id for i in done] == [mine.instance_id]
    state = aws.client("ec2").describe_instances(InstanceIds=[foreign])
    assert state["Reservations"][0]["Instances"][0]["State"]["Name"] == "running"
    assert p.terminate([]) == []


@pytest.mark.slow
def test_cleanup_terminates_leaks(aws):
    p = provider(aws)
    a = [i.instance_id for i in p.launch(2, "g4dn.xlarge", tags={"experiment": "exp-a"})]
    p.launch(1, "g4dn.xlarge", tags={"experiment": "exp-b"})
    aws.client("ec2").stop_instances(InstanceIds=[a[1]])   # stopped still costs its disk
    done = p.cleanup("exp-a")
    assert sorted(i.instance_id for i in done) == sorted(a)
    assert {i.state for i in p.list("exp-a")} == {InstanceState.TERMINATED}
    assert {i.state for i in p.list("exp-b")} == {InstanceState.RUNNING}
    assert p.cleanup("exp-a") == []
    assert len(p.cleanup()) == 1
    assert {i.state for i in p.list()} == {InstanceState.TERMINATED}


def test_cleanup_secrets_deletes_the_broker_secrets_left_behind(aws):
    p = provider(aws)
    for exp in ("exp-a", "exp-b"):
        p.put_secret(f"/elastune/{exp}/broker", "pw")
    aws.client("ssm").put_parameter(Name="/other/app", Value="x", Type="String")
    assert p.cleanup_secrets("exp-a") == ["/elastune/exp-a/broker"]
    names = [q["Name"] for q in aws.client("ssm").describe_parameters()["Parameters"]]
    assert sorted(names) == ["/elastune/exp-b/broker", "/other/app"]
    assert p.cleanup_secrets("exp-a") == []
    assert p.cleanup_secrets() == ["/elastune/exp-b/broker"]
    names = [q["Name"] for q in aws.client("ssm").describe_parameters()["Parameters"]]
    assert names == ["/other/app"]          # not ours: kept


@pytest.mark.slow
def test_spot_interruption_is_preempted(aws):
    p = provider(aws)
    first, second = p.launch(2, "g4dn.xlarge", spot=True, tags={"experiment": "e"})
    aws.interrupt_spot(first.instance_id)
    by_id = {i.instance_id: i for i in p.list("e")}
    assert by_id[first.instance_id].state == InstanceState.TERMINATED
    assert by_id[first.instance_id].preempted
    assert by_id[first.instance_id].terminated_at == 1000.0
    assert by_id[second.instance_id].state == InstanceState.RUNNING
    assert not by_id[second.instance_id].preempted
    (ended,) = p.terminate([second.instance_id])
    assert ended.state == InstanceState.TERMINATED and not ended.preempted


def test_spot_interruption_seen_on_the_spot_request(aws):
    """Instances from RequestSpotInstances: the request's status says EC2 interrupted it."""
    ec2 = aws.client("ec2")
    ids = []
    for _ in range(2):
        reply = ec2.request_spot_instances(InstanceCount=1, LaunchSpecification={
            "ImageId": aws.image_id(), "InstanceType": "g4dn.xlarge"})
        request_id = reply["SpotInstanceRequests"][0]["SpotInstanceRequestId"]
        (req,) = ec2.describe_spot_instance_requests(
            SpotInstanceRequestIds=[request_id])["SpotInstanceRequests"]
        ids.append(req["InstanceId"])
    ec2.create_tags(Resources=ids, Tags=[{"Key": "elastune-managed", "Value": "true"},
                                         {"Key": "elastune-experiment", "Value": "e"}])
    aws.interrupt_spot(ids[0], request_status="instance-terminated-no-capacity")
    aws.interrupt_spot(ids[1], request_status="instance-terminated-by-user")
    by_id = {i.instance_id: i for i in provider(aws).list("e")}
    assert by_id[ids[0]].preempted and by_id[ids[0]].spot
    assert by_id[ids[1]].state == InstanceState.TERMINATED and not by_id[ids[1]].preempted


# -- fallbacks and errors -------------------------------------------------------------------------

def test_capacity_error_falls_back_to_the_next_zone(aws):
    aws.fail("RunInstances", "InsufficientInstanceCapacity",
             match={"InstanceType": "g4dn.xlarge", "Placement.AvailabilityZone": "us-east-1a"})
    (inst,) = provider(aws).launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    assert (inst.instance_type, inst.zone) == ("g4dn.xlarge", "us-east-1b")
    # One request per zone: the 500 of a capacity shortage is not retried by botocore.
    assert launches(aws) == [("g4dn.xlarge", "us-east-1a"), ("g4dn.xlarge", "us-east-1b")]


def test_capacity_error_in_every_zone_falls_back_to_the_next_type(aws):
    aws.fail("RunInstances", "InsufficientInstanceCapacity", match={"InstanceType": "g4dn.xlarge"})
    aws.fail("RunInstances", "Unsupported", match={"InstanceType": "g4dn.12xlarge",
                                                   "Placement.AvailabilityZone": "us-east-1a"})
    p = provider(aws, zones=["us-east-1a", "us-east-1b"])
    (inst,) = p.launch(1, "g4dn.xlarge", spot=True, tags={"experiment": "e"})
    assert (inst.instance_type, inst.zone, inst.slots) == ("g4dn.12xlarge", "us-east-1b", 4)
    assert inst.price_per_hour == pytest.approx(1.60) and inst.spot
    assert launches(aws) == [("g4dn.xlarge", "us-east-1a"), ("g4dn.xlarge", "us-east-1b"),
                             ("g4dn.12xlarge", "us-east-1a"), ("g4dn.12xlarge", "us-east-1b")]
    data = aws.client("ec2").describe_instance_attribute(InstanceId=inst.instance_id,
                                                         Attribute="userData")
    assert "--slots 4" in base64.b64decode(data["UserData"]["Value"]).decode()


def test_quota_error_moves_to_the_next_type_at_once(aws):
    aws.fail("RunInstances", "VcpuLimitExceeded", match={"InstanceType": "g4dn.12xlarge"})
    (inst,) = provider(aws).launch(1, "g4dn.12xlarge", tags={"experiment": "e"})
    assert inst.instance_type == "g5.xlarge"
    assert launches(aws) == [("g4dn.12xlarge", "us-east-1a"), ("g5.xlarge", "us-east-1a")]


def test_not_found_in_one_zone_moves_on_and_everywhere_is_not_found(aws):
    # A zone whose subnet is gone: the other zones still launch (as on GCP).
    aws.fail("RunInstances", "InvalidSubnetID.NotFound", status=400,
             match={"Placement.AvailabilityZone": "us-east-1a"},
             message="The subnet ID 'subnet-gone' does not exist")
    p = provider(aws, zones=["us-east-1a", "us-east-1b"])
    (inst,) = p.launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    assert inst.zone == "us-east-1b"
    assert launches(aws) == [("g4dn.xlarge", "us-east-1a"), ("g4dn.xlarge", "us-east-1b")]
    aws.faults.clear()
    aws.fail("RunInstances", "InvalidAMIID.NotFound", status=400)
    with pytest.raises(NotFoundError, match="g5.xlarge in us-east-1b: InvalidAMIID.NotFound"):
        p.launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    assert [i.instance_id for i in p.list("e")] == [inst.instance_id]
    assert len(launches(aws)) == 2 + 6     # every type in every zone was tried


def test_everything_exhausted(aws):
    aws.fail("RunInstances", "InsufficientInstanceCapacity", match={"InstanceType": "g5.xlarge"})
    aws.fail("RunInstances", "MaxSpotInstanceCountExceeded",
             match={"InstanceType": "g4dn.12xlarge"})
    p = provider(aws, zones=["us-east-1a", "us-east-1b"])
    with pytest.raises(CapacityError) as err:
        p.launch(1, "g4dn.12xlarge", spot=True, tags={"experiment": "e"})
    text = str(err.value)
    assert "g4dn.12xlarge in us-east-1a: MaxSpotInstanceCountExceeded" in text
    assert "g5.xlarge in us-east-1a: InsufficientInstanceCapacity" in text
    assert "g5.xlarge in us-east-1b: InsufficientInstanceCapacity" in text
    aws.faults.clear()
    aws.fail("RunInstances", "VcpuLimitExceeded")
    with pytest.raises(QuotaError, match="quota"):
        p.launch(1, "g5.xlarge", tags={"experiment": "e"})
    assert p.list() == []


# -- zones a spot policy orders (cloud.ZonedSpot) -----------------------------------------------

@pytest.mark.slow
def test_spot_launches_walk_the_preferred_zones(aws):
    p = provider(aws, zones=["us-east-1a", "us-east-1b"])
    assert isinstance(p, ZonedSpot) and p.zones == ["us-east-1a", "us-east-1b"]
    p.prefer_zones(["us-east-1b", "us-east-1z", "us-east-1a"])      # an unknown zone: ignored
    (first,) = p.launch(1, "g4dn.xlarge", spot=True, tags={"experiment": "e"})
    aws.fail("RunInstances", "InsufficientInstanceCapacity",
             match={"InstanceType": "g4dn.xlarge", "Placement.AvailabilityZone": "us-east-1b"})
    (second,) = p.launch(1, "g4dn.xlarge", spot=True, tags={"experiment": "e"})
    (third,) = p.launch(1, "g4dn.xlarge", tags={"experiment": "e"})     # on-demand
    assert [first.zone, second.zone, third.zone] == ["us-east-1b", "us-east-1a", "us-east-1a"]
    assert launches(aws) == [("g4dn.xlarge", "us-east-1b"),
                             ("g4dn.xlarge", "us-east-1b"), ("g4dn.xlarge", "us-east-1a"),
                             ("g4dn.xlarge", "us-east-1a")]     # on-demand: configured order
    assert p.zones == ["us-east-1a", "us-east-1b"]
    ids = {first.instance_id, second.instance_id, third.instance_id}
    assert {i.instance_id for i in p.terminate(sorted(ids))} == ids
    p.prefer_zones(["us-east-1z"])                  # none known: the configured order again
    aws.faults.clear()
    (again,) = p.launch(1, "g4dn.xlarge", spot=True, tags={"experiment": "e"})
    assert again.zone == "us-east-1a"


def test_discovered_zones_are_ordered_once_known(aws):
    p = provider(aws)                           # no zones: those that offer the type
    assert p.zones == []                        # none known before a launch looked them up
    p.launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    assert len(p.zones) > 1 and "us-east-1c" in p.zones
    p.prefer_zones(["us-east-1c", "us-east-1a"])
    (inst,) = p.launch(1, "g4dn.xlarge", spot=True, tags={"experiment": "e"})
    assert inst.zone == "us-east-1c"
    # Another type walks the preferred zones that offer it.
    (other,) = p.launch(1, "g5.xlarge", spot=True, tags={"experiment": "e"})
    assert other.zone == "us-east-1c"


@pytest.mark.slow
def test_spot_prices_by_zone_and_the_zone_each_instance_pays(aws):
    aws.spot_prices = {"us-east-1a": "0.30", "us-east-1b": "0.25", "us-east-1c": "0.40"}
    p = provider(aws, zones=["us-east-1a", "us-east-1b"], live_spot_prices=True)
    assert p.spot_price_in("us-east-1a", "g4dn.xlarge") == pytest.approx(0.30)
    assert p.spot_price_in("us-east-1b", "g4dn.xlarge") == pytest.approx(0.25)
    # Budgets count the dearest zone a launch may use (1c is not one).
    assert p.price_per_hour("g4dn.xlarge", spot=True) == pytest.approx(0.30)
    p.prefer_zones(["us-east-1b"])
    (inst,) = p.launch(1, "g4dn.xlarge", spot=True, tags={"experiment": "e"})
    assert (inst.zone, inst.price_per_hour) == ("us-east-1b", pytest.approx(0.25))
    assert [i.price_per_hour for i in p.list("e")] == [pytest.approx(0.25)]
    assert len(aws.requests("DescribeSpotPriceHistory")) == 1       # one read, cached
    # Without live prices, every zone has the catalog's.
    book = provider(aws, zones=["us-east-1a", "us-east-1b"])
    assert book.spot_price_in("us-east-1a", "g4dn.xlarge") == pytest.approx(0.21)
    assert book.spot_price_in("us-east-1b", "g4dn.xlarge") == pytest.approx(0.21)


def test_throttled_launch_is_retried_with_the_same_token(aws):
    aws.fail("RunInstances", "RequestLimitExceeded", times=2)
    clock = SimClock(0.0)
    (inst,) = provider(aws, clock=clock).launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    requests = aws.requests("RunInstances")
    assert len(requests) == 3 and len({r["ClientToken"] for r in requests}) == 1
    assert 0.0 < clock.now() <= 1.0 + 2.0     # two jittered backoffs, on the provider's clock
    assert inst.launched_at == clock.now()


def test_throttled_launch_gives_up(aws):
    aws.fail("RunInstances", "RequestLimitExceeded")
    with pytest.raises(ThrottledError, match="RequestLimitExceeded"):
        provider(aws, max_attempts=3).launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    assert len(aws.requests("RunInstances")) == 3


@pytest.mark.slow
def test_throttled_describe_is_retried_by_botocore(aws):
    p = provider(aws)
    p.launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    aws.fail("DescribeInstances", "RequestLimitExceeded", times=1)
    assert len(p.list("e")) == 1
    assert len(aws.requests("DescribeInstances")) == 2


def test_auth_errors_surface(aws):
    aws.fail("RunInstances", "AuthFailure")
    p = provider(aws)
    with pytest.raises(AuthError, match="AuthFailure.*credentials"):
        p.launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    assert len(aws.requests("RunInstances")) == 1     # no fallback, no retry
    aws.fail("DescribeInstances", "UnauthorizedOperation")
    with pytest.raises(AuthError, match="UnauthorizedOperation"):
        p.list("e")


@pytest.mark.slow
def test_default_image_from_ssm(aws):
    aws.client("ssm").put_parameter(Name="/test/gpu-ami", Value=aws.image_id(), Type="String")
    p = provider(aws, image_id=None, image_parameter="/test/gpu-ami")
    p.launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    assert aws.requests("RunInstances")[0]["ImageId"] == aws.image_id() == p.image_id
    missing = provider(aws, image_id=None)
    assert missing.image_parameter == DLAMI_PARAMETER
    with pytest.raises(ProviderError, match="image_id"):
        missing.launch(1, "g4dn.xlarge", tags={"experiment": "e"})
    assert len(aws.requests("RunInstances")) == 1


# -- prices, tags, error mapping (no server) ------------------------------------------------------

def test_prices_and_slots_from_the_catalog(aws_env):
    east = AwsProvider("us-east-1", TYPES, image_id="ami-1")
    west = AwsProvider("us-west-2", TYPES, image_id="ami-1")
    assert east.price_per_hour("g4dn.xlarge") == pytest.approx(0.526)
    assert east.price_per_hour("g4dn.xlarge", spot=True) == pytest.approx(0.21)
    assert west.price_per_hour("g4dn.xlarge", spot=True) == pytest.approx(0.19)
    assert east.slots("g4dn.12xlarge") == 4 and east.slots("g5.xlarge") == 1
    with pytest.raises(ProviderError, match="m5.large"):
        east.price_per_hour("m5.large")
    with pytest.raises(ValueError, match="eu-west-1"):
        AwsProvider("eu-west-1", ["g4dn.xlarge"], image_id="ami-1")
    with pytest.raises(ValueError, match="g9.huge"):
        AwsProvider("us-east-1", ["g4dn.xlarge", "g9.huge"], image_id="ami-1")


def test_tags_round_trip():
    tags = {"experiment": "exp1", "owner": "ml"}
    phys = physical_tags(tags)
    assert phys == {"elastune-managed": "true", "elastune-experiment": "exp1", "owner": "ml"}
    assert logical_tags([{"Key": k, "Value": v} for k, v in phys.items()]
                        + [{"Key": "aws:ec2launchtemplate:id", "Value": "x"}]) == tags
    with pytest.raises(ValueError, match="aws:"):
        physical_tags({"aws:x": "1"})


@pytest.mark.parametrize(("code", "status", "kind"), [
    ("InsufficientInstanceCapacity", 500, CapacityError),
    ("Unsupported", 400, CapacityError),
    ("VcpuLimitExceeded", 400, QuotaError),
    ("MaxSpotInstanceCountExceeded", 400, QuotaError),
    ("InstanceLimitExceeded", 400, QuotaError),
    ("RequestLimitExceeded", 503, ThrottledError),
    ("ThrottlingException", 400, ThrottledError),
    ("AuthFailure", 401, AuthError),
    ("UnauthorizedOperation", 403, AuthError),
    ("ExpiredToken", 400, AuthError),
    ("InvalidInstanceID.NotFound", 400, NotFoundError),
    ("ParameterNotFound", 400, NotFoundError),
    ("404", 404, NotFoundError),
    ("InvalidParameterValue", 400, ProviderError),
])
def test_provider_error_mapping(code, status, kind):
    from botocore.exceptions import ClientError

    exc = ClientError({"Error": {"Code": code, "Message": "details"},
                       "ResponseMetadata": {"HTTPStatusCode": status}}, "RunInstances")
    err = provider_error(exc, "RunInstances")
    assert type(err) is kind
    assert code in str(err) and "details" in str(err) and "RunInstances" in str(err)


def test_provider_error_mapping_client_side():
    from botocore.exceptions import EndpointConnectionError, NoCredentialsError, NoRegionError

    assert type(provider_error(NoCredentialsError())) is AuthError
    assert type(provider_error(EndpointConnectionError(endpoint_url="https://x"))) \
        is ThrottledError
    assert type(provider_error(NoRegionError())) is ProviderError


# -- secrets, bucket, storage ---------------------------------------------------------------------

def test_ssm_secret_round_trip(aws):
    p = provider(aws)
    name = p.put_secret("elastune/exp1/broker", "first")
    assert name == "/elastune/exp1/broker"
    assert p.put_secret(name, PASSWORD) == name      # overwrite
    uri = f"ssm:{name}?region={REGION}&endpoint={aws.url}"
    assert read_secret(uri) == PASSWORD
    ssm = aws.client("ssm")
    assert ssm.get_parameter(Name=name)["Parameter"]["Type"] == "SecureString"
    tags = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name)["TagList"]
    assert {"Key": "elastune-managed", "Value": "true"} in tags
    p.delete_secret(name)
    p.delete_secret(name)                            # already gone: fine
    with pytest.raises(SecretError) as err:
        read_secret(uri)
    assert name in str(err.value) and "ParameterNotFound" in str(err.value)
    assert PASSWORD not in str(err.value)


def test_put_secret_errors_never_carry_the_value(aws):
    aws.fail("PutParameter", "ValidationException",
             message=f"1 validation error: Value '{PASSWORD}' at 'value' failed to satisfy "
                     "constraint")
    with pytest.raises(ProviderError) as err:
        provider(aws).put_secret("/elastune/x", PASSWORD)
    assert "ValidationException" in str(err.value) and PASSWORD not in str(err.value)
    assert err.value.__cause__ is None


@pytest.mark.parametrize("region", ["us-east-1", "us-west-2"])
def test_ensure_bucket(aws, region):
    p = AwsProvider(region, ["g4dn.xlarge"], image_id="ami-1", endpoint_url=aws.url)
    p.ensure_bucket("elastune-test-bucket")
    p.ensure_bucket("elastune-test-bucket")          # there already: nothing to do
    s3 = aws.client("s3", region)
    location = s3.get_bucket_location(Bucket="elastune-test-bucket")["LocationConstraint"]
    assert (location or "us-east-1") == region
    block = s3.get_public_access_block(Bucket="elastune-test-bucket")
    assert all(block["PublicAccessBlockConfiguration"].values())


@pytest.fixture
def bucket(aws, monkeypatch):
    """An S3 bucket; storage URIs reach it through AWS_ENDPOINT_URL, as boto3 honours it."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    aws.client("s3").create_bucket(Bucket="elastune-data")
    return "elastune-data"


def test_s3_store(bucket, aws):
    store = open_store(f"s3://{bucket}/exp1/")
    assert isinstance(store, S3Store) and store.prefix == "exp1"
    assert store.list() == [] and store.get("missing") is None
    store.put("a/one", b"1")
    store.put("a/two", b"22")
    store.put("ab/three", b"333")
    store.put("top", b"t")
    assert store.get("a/two") == b"22"
    assert store.list() == ["a/one", "a/two", "ab/three", "top"]
    assert store.list("a") == ["a/one", "a/two"] == store.list("a/")
    store.delete("a/one")
    store.delete("a/one")                            # missing: fine
    assert store.list("a") == ["a/two"]
    keys = [o["Key"] for o in aws.client("s3").list_objects_v2(Bucket=bucket)["Contents"]]
    assert sorted(keys) == ["exp1/a/two", "exp1/ab/three", "exp1/top"]
    with pytest.raises(ValueError, match="escapes"):
        store.put("../other", b"x")
    with pytest.raises(FileNotFoundError, match="no-such-bucket"):
        open_store("s3://no-such-bucket/x").put("k", b"v")


def test_checkpoints_on_s3(bucket, aws):
    where = f"s3://{bucket}/exp1/checkpoints/t0001"
    assert checkpoint_steps(where) == [] and load_checkpoint(where, 10) is None
    for step in (1, 2, 3, 4):
        saved = save_checkpoint(where, step, {"step": step, "w": [step] * 3})
    assert saved == f"{where}/step-000004.pkl"
    assert checkpoint_steps(where) == [3, 4]
    assert load_checkpoint(where, 10) == (4, {"step": 4, "w": [4, 4, 4]})
    assert load_checkpoint(where, 3) == (3, {"step": 3, "w": [3, 3, 3]})
    assert load_checkpoint(where, 2) is None
    keys = [o["Key"] for o in aws.client("s3").list_objects_v2(Bucket=bucket)["Contents"]]
    assert sorted(keys) == ["exp1/checkpoints/t0001/step-000003.pkl",
                            "exp1/checkpoints/t0001/step-000004.pkl"]


def test_checkpoints_in_a_folder_keep_their_layout(tmp_path):
    folder = tmp_path / "t1"
    for step in (5, 9, 12):
        saved = save_checkpoint(str(folder), step, step * 10)
    assert saved == folder / "step-000012.pkl"
    assert sorted(p.name for p in folder.iterdir()) == ["step-000009.pkl", "step-000012.pkl"]
    assert load_checkpoint(folder, 11) == (9, 90)
    assert checkpoint_steps(f"file://{folder}") == [9, 12]


def _scaled(factor):
    return lambda params, ctx=None: params["x"] * factor


def test_code_bundle_on_s3(bucket):
    uri = f"s3://{bucket}/exp1/code/trainable.pkl"
    spec = write_bundle(_scaled(2), uri)
    assert spec == f"bundle:{uri}"
    assert load_trainable(spec)({"x": 21}) == 42
    write_bundle(_scaled(3), uri)                    # rewritten: loaded again
    assert load_trainable(spec)({"x": 21}) == 63
    with pytest.raises(FileNotFoundError):
        load_trainable(f"bundle:s3://{bucket}/exp1/code/none.pkl")


def test_code_bundle_in_a_folder(tmp_path):
    path = tmp_path / "code" / "trainable.pkl"
    spec = write_bundle(_scaled(5), str(path))
    assert spec == f"bundle:{path}" and path.is_file()
    assert load_trainable(spec)({"x": 2}) == 10


def test_live_spot_prices_come_from_the_spot_price_history(aws):
    p = provider(aws, live_spot_prices=True)
    history = aws.client("ec2").describe_spot_price_history(
        InstanceTypes=["g4dn.xlarge"], ProductDescriptions=["Linux/UNIX"])["SpotPriceHistory"]
    newest: dict[str, float] = {}
    for row in history:
        newest.setdefault(row["AvailabilityZone"], float(row["SpotPrice"]))
    assert newest, "the endpoint reports no spot price"
    price = p.price_per_hour("g4dn.xlarge", spot=True)
    assert price == pytest.approx(max(newest.values()))      # the dearest allowed zone
    (out,) = p.launch(1, "g4dn.xlarge", spot=True, tags={"experiment": "exp1"})
    assert out.price_per_hour == pytest.approx(newest[out.zone])   # what the ledger charges
    assert p.price_per_hour("g4dn.xlarge") == pytest.approx(0.526)   # on demand: the catalog
    assert len(aws.requests("DescribeSpotPriceHistory")) == 1       # cached


@pytest.mark.slow
def test_live_spot_prices_fall_back_to_the_catalog(aws):
    aws.fail("DescribeSpotPriceHistory", "UnauthorizedOperation", status=403)
    p = provider(aws, live_spot_prices=True)
    assert p.price_per_hour("g4dn.xlarge", spot=True) == pytest.approx(0.21)


def test_retag_moves_live_instances_to_another_experiment(aws):
    p = provider(aws)
    a, b = p.launch(2, "g4dn.xlarge", tags={"experiment": "exp1", "owner": "ml"})
    p.terminate([b.instance_id])
    moved = p.retag([a.instance_id, b.instance_id, "i-0000000000unknown"], "elastune-warm")
    assert [m.instance_id for m in moved] == [a.instance_id]   # the live one only
    assert moved[0].tags == {"experiment": "elastune-warm", "owner": "ml"}
    assert tags_of(aws, a.instance_id)["elastune-experiment"] == "elastune-warm"
    assert [i.instance_id for i in p.list("elastune-warm")] == [a.instance_id]
    assert a.instance_id not in {i.instance_id for i in p.list("exp1")}
    assert p.cleanup("exp1") == []          # the sweep's cleanup leaves a moved VM alone
