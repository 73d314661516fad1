"""The GCP provider, GCS store and Secret Manager reader against a local fake of the REST APIs.

The real ``google-cloud-compute``, ``google-cloud-secret-manager`` and ``google-cloud-storage``
clients talk HTTP to :mod:`tests.gce_server`, so URL building, JSON parsing and error decoding
are the clients' own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("google.cloud.compute_v1")
pytest.importorskip("google.cloud.secretmanager")
pytest.importorskip("google.cloud.storage")

from google.api_core import exceptions as gexc  # noqa: E402
from google.api_core.retry import Retry  # noqa: E402
from google.auth.credentials import AnonymousCredentials  # noqa: E402

from budgets import PriceBook  # noqa: E402
from cloud._gcp import (  # noqa: E402
    DEFAULT_IMAGE,
    GcpProvider,
    instance_name,
    map_gcp_error,
    parse_instance_type,
    sanitize_label,
)
from cloud._provider import (  # noqa: E402
    AuthError,
    Bootstrap,
    CapacityError,
    NotFoundError,
    ProviderError,
    QuotaError,
    ThrottledError,
    ZonedSpot,
)
from tests.gce_server import FakeGoogleCloud  # noqa: E402
from worker.records import InstanceState  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "test-project"
ZONES = ["us-central1-a", "us-central1-b"]
T4 = "n1-standard-8+1xnvidia-tesla-t4"
L4 = "g2-standard-4"
PASSWORD = "s3cret-broker-pw-91f2"
NAME_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


@pytest.fixture
def fake():
    with FakeGoogleCloud(PROJECT) as server:
        yield server


def make(fake: FakeGoogleCloud, types=(L4, T4), zones=ZONES, **kwargs) -> GcpProvider:
    kwargs.setdefault("bootstrap", Bootstrap(
        broker_url="rediss://10.128.0.2:6380/0",
        secret_name=f"projects/{PROJECT}/secrets/elastune-broker/versions/latest",
        storage_uri="gs://elastune-test/exp"))
    kwargs.setdefault("retry", Retry(initial=0.01, maximum=0.05, multiplier=2, timeout=5))
    return GcpProvider(PROJECT, zones, list(types), api_endpoint=fake.url,
                       credentials=AnonymousCredentials(), **kwargs)


def inserts(fake: FakeGoogleCloud) -> list[tuple[str, str]]:
    """(zone, machine type) of every insert call, in order."""
    out = []
    for r in fake.requests:
        m = re.fullmatch(r"/compute/v1/projects/[^/]+/zones/([^/]+)/instances", r.path)
        if m and r.method == "POST":
            out.append((m.group(1), r.body["machineType"].rsplit("/", 1)[-1]))
    return out


def metadata(body: dict) -> dict[str, str]:
    return {item["key"]: item["value"] for item in body["metadata"]["items"]}


# -- launch -----------------------------------------------------------------------------------

def test_on_demand_launch_sends_guest_accelerators_labels_and_a_passwordless_script(fake):
    provider = make(fake)
    [inst] = provider.launch(1, T4, tags={"experiment": "Digits MLP/7"})

    assert NAME_RE.fullmatch(inst.instance_id) and len(inst.instance_id) <= 63
    assert inst.instance_id.startswith("elastune-digits-mlp-7-")
    assert inst.queue == inst.instance_id
    assert (inst.provider, inst.instance_type, inst.spot) == ("gcp", T4, False)
    assert (inst.slots, inst.price_per_hour, inst.zone) == (1, 0.73, "us-central1-a")
    assert inst.state == InstanceState.PENDING
    assert inst.tags == {"experiment": "Digits MLP/7"}

    [body] = fake.inserted()
    assert body["name"] == inst.instance_id
    assert body["machineType"] == "zones/us-central1-a/machineTypes/n1-standard-8"
    [acc] = body["guestAccelerators"]
    assert int(acc["acceleratorCount"]) == 1
    assert acc["acceleratorType"].endswith("/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4")
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert body["scheduling"].get("provisioningModel") != "SPOT"
    assert body["labels"] == {"elastune-managed": "true", "elastune-experiment": "digits-mlp-7"}
    assert body["disks"][0]["initializeParams"]["sourceImage"] == DEFAULT_IMAGE
    assert body["serviceAccounts"][0]["scopes"] == [
        "https://www.googleapis.com/auth/cloud-platform"]
    meta = metadata(body)
    assert json.loads(meta["elastune-tags"]) == {"experiment": "Digits MLP/7"}
    script = meta["startup-script"]
    assert "elastune worker --name-from-metadata gcp" in script
    assert (f"--password-secret gcpsm:projects/{PROJECT}/secrets/elastune-broker/versions/latest"
            in script)
    assert "--slots 1" in script
    assert "rediss://10.128.0.2:6380/0" in script
    wire = json.dumps([r.body for r in fake.requests if isinstance(r.body, dict)])
    assert PASSWORD not in wire and "password=" not in wire.lower()


def test_spot_launch_asks_for_the_spot_model_and_the_catalog_gpu_count(fake):
    provider = make(fake, types=["a2-highgpu-4g"])
    [inst] = provider.launch(1, "a2-highgpu-4g", spot=True, tags={"experiment": "e1"})
    assert inst.spot and inst.slots == 4 and inst.price_per_hour == 4.40
    [body] = fake.inserted()
    assert body["scheduling"] == {"provisioningModel": "SPOT",
                                  "instanceTerminationAction": "DELETE",
                                  "onHostMaintenance": "TERMINATE", "automaticRestart": False}
    assert "guestAccelerators" not in body
    assert "--slots 4" in metadata(body)["startup-script"]


def test_instances_go_from_pending_to_running_and_list_by_experiment(fake):
    provider = make(fake)
    a = provider.launch(2, L4, tags={"experiment": "Digits MLP/1"})
    # Same label after sanitising, different experiment: the exact tag tells them apart.
    b = provider.launch(1, L4, tags={"experiment": "digits-mlp-1"})
    c = provider.launch(1, T4, tags={"experiment": "other"})
    assert len({i.instance_id for i in a + b + c}) == 4

    first = provider.list("Digits MLP/1")
    assert sorted(i.instance_id for i in first) == sorted(i.instance_id for i in a)
    assert {i.state for i in first} == {InstanceState.PENDING}
    assert [i.instance_id for i in provider.list("digits-mlp-1")] == [b[0].instance_id]
    everything = provider.list()
    assert len(everything) == 4 and {i.state for i in everything} == {InstanceState.RUNNING}
    filters = {r.query["filter"][0] for r in fake.requests if "filter" in r.query}
    assert 'labels.elastune-experiment = "digits-mlp-1"' in filters
    assert 'labels.elastune-managed = "true"' in filters

    # A fresh provider (a resumed controller) re-adopts them from labels and metadata.
    again = make(fake).list("other")
    assert [(i.instance_id, i.instance_type, i.tags, i.price_per_hour, i.slots)
            for i in again] == [(c[0].instance_id, T4, {"experiment": "other"}, 0.73, 1)]


def test_terminate_then_list_and_unknown_names(fake):
    provider = make(fake)
    keep, drop = provider.launch(2, L4, tags={"experiment": "e"})
    [done] = provider.terminate([drop.instance_id])
    assert done.state == InstanceState.TERMINATED and done.terminated_at is not None
    states = {i.instance_id: i for i in provider.list("e")}
    assert states[drop.instance_id].state == InstanceState.TERMINATED
    assert not states[drop.instance_id].preempted
    assert states[keep.instance_id].state != InstanceState.TERMINATED
    assert (ZONES[0], drop.instance_id) not in fake.instances

    assert provider.terminate(["elastune-never-launched-1234"]) == []
    assert provider.terminate([drop.instance_id])[0].state == InstanceState.TERMINATED


@pytest.mark.slow
def test_a_launch_creates_its_vms_concurrently(fake):
    provider = make(fake)
    fake.insert_delay_s = 1.0           # each insert operation runs 1 s
    started = time.monotonic()
    [one] = provider.launch(1, L4, tags={"experiment": "e"})
    assert time.monotonic() - started >= 1.0     # a launch waits for its operation
    started = time.monotonic()
    five = provider.launch(5, L4, tags={"experiment": "e"})
    took = time.monotonic() - started
    assert len({i.instance_id for i in five}) == 5
    # Five 1 s operations waited for side by side, not one after another (>= 5 s).
    assert took < 3.0, f"5 VMs took {took:.1f} s"
    ops = [op for op in fake.operations.values() if op["operationType"] == "insert"]
    assert len(ops) == 6 and all(op["status"] == "DONE" for op in ops)
    assert {i.instance_id for i in provider.list("e")} == {one.instance_id} | {
        i.instance_id for i in five}


def test_a_concurrent_launch_returns_what_it_got_and_falls_back(fake):
    provider = make(fake)
    fake.insert_delay_s = 0.3
    fake.fail_inserts("stockout", times=2, machine_type=L4, zone=ZONES[0])
    got = provider.launch(4, L4, tags={"experiment": "e"})
    # Those that stocked out in the first zone went on to the next: four VMs, none lost.
    assert len(got) == 4 and {i.zone for i in got} <= set(ZONES)
    assert {i.instance_id for i in provider.list("e")} == {i.instance_id for i in got}


# -- fallbacks and errors ---------------------------------------------------------------------

def test_stockout_tries_the_next_zone_then_the_next_type(fake):
    provider = make(fake)
    fake.fail_inserts("stockout", machine_type=L4, zone=ZONES[0])
    [inst] = provider.launch(1, L4, tags={"experiment": "e"})
    assert (inst.zone, inst.instance_type) == (ZONES[1], L4)
    assert inserts(fake) == [(ZONES[0], L4), (ZONES[1], L4)]

    fake.requests.clear()
    fake.fail_inserts("stockout_details", machine_type=L4, zone=ZONES[0])
    fake.fail_inserts("stockout", machine_type=L4, zone=ZONES[1], delivery="http")
    [inst] = provider.launch(1, L4, tags={"experiment": "e"})
    assert (inst.zone, inst.instance_type, inst.slots) == (ZONES[0], T4, 1)
    assert inserts(fake) == [(ZONES[0], L4), (ZONES[1], L4), (ZONES[0], "n1-standard-8")]


@pytest.mark.parametrize("delivery", ["operation", "http"])
def test_quota_skips_to_the_next_type(fake, delivery):
    provider = make(fake)
    fake.fail_inserts("quota", machine_type=L4, delivery=delivery)
    [inst] = provider.launch(1, L4)
    assert inst.instance_type == T4
    assert inserts(fake) == [(ZONES[0], L4), (ZONES[0], "n1-standard-8")]


def test_all_exhausted_is_a_capacity_error(fake):
    provider = make(fake)
    fake.fail_inserts("stockout", times=10)
    with pytest.raises(CapacityError, match="us-central1-b"):
        provider.launch(1, L4)
    assert len(inserts(fake)) == 4
    assert provider.list() == []


def test_quota_everywhere_is_a_quota_error(fake):
    fake.fail_inserts("quota", times=10)
    with pytest.raises(QuotaError, match="NVIDIA_T4_GPUS"):
        make(fake).launch(1, L4)


def test_partial_launch_returns_what_it_got(fake):
    provider = make(fake, types=[L4])
    fake.fail_inserts("stockout", times=10, after=1)   # room for one VM, then none
    got = provider.launch(3, L4, tags={"experiment": "e"})
    assert len(got) == 1
    assert [i.instance_id for i in provider.list("e")] == [got[0].instance_id]


def test_throttling_is_retried_with_the_same_request_id(fake):
    provider = make(fake)
    fake.fail_inserts("throttle", times=2)
    [inst] = provider.launch(1, L4)
    assert inst.instance_type == L4
    posts = [r for r in fake.requests if r.method == "POST" and r.path.endswith("/instances")]
    assert len(posts) == 3
    assert len({r.query["requestId"][0] for r in posts}) == 1


def test_throttling_that_does_not_stop_is_a_throttled_error(fake):
    provider = make(fake, retry=Retry(initial=0.01, maximum=0.02, timeout=0.2))
    fake.fail_inserts("throttle", times=1000)
    with pytest.raises(ThrottledError, match="rateLimitExceeded"):
        provider.launch(1, L4)


@pytest.mark.parametrize("kind", ["forbidden", "unauthenticated"])
def test_permission_errors_stop_at_once(fake, kind):
    provider = make(fake)
    fake.fail_inserts(kind)
    with pytest.raises(AuthError):
        provider.launch(1, L4)
    assert len(inserts(fake)) == 1


def test_an_unreachable_api_is_retried_then_throttled():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = GcpProvider(PROJECT, ZONES, [L4], api_endpoint=f"http://127.0.0.1:{port}",
                           credentials=AnonymousCredentials(),
                           retry=Retry(initial=0.01, maximum=0.02, timeout=0.2))
    with pytest.raises(ThrottledError, match="cannot reach the API"):
        provider.list()


# -- zones a spot policy orders (cloud.ZonedSpot) ---------------------------------------------

def listed_zones(fake: FakeGoogleCloud) -> set[str]:
    """The zones whose instances were listed."""
    return {m.group(1) for r in fake.requests if r.method == "GET" and (m := re.fullmatch(
        r"/compute/v1/projects/[^/]+/zones/([^/]+)/instances", r.path))}


def test_spot_launches_walk_the_preferred_zones_and_list_sees_every_zone(fake):
    provider = make(fake)
    assert isinstance(provider, ZonedSpot)
    provider.prefer_zones([ZONES[1], "europe-west4-a", ZONES[0]])   # an unknown zone: ignored
    [first] = provider.launch(1, L4, spot=True, tags={"experiment": "e"})
    fake.fail_inserts("stockout", machine_type=L4, zone=ZONES[1])
    [second] = provider.launch(1, L4, spot=True, tags={"experiment": "e"})
    [third] = provider.launch(1, L4, tags={"experiment": "e"})        # on-demand
    assert [first.zone, second.zone, third.zone] == [ZONES[1], ZONES[0], ZONES[0]]
    assert inserts(fake) == [(ZONES[1], L4), (ZONES[1], L4), (ZONES[0], L4),
                             (ZONES[0], L4)]               # on-demand: the configured order
    assert provider.zones == ZONES
    # list, terminate and a fresh provider (a resumed controller) still cover every zone.
    ids = {first.instance_id, second.instance_id, third.instance_id}
    fake.requests.clear()
    assert {i.instance_id for i in make(fake).list("e")} == ids
    assert listed_zones(fake) == set(ZONES)
    assert {i.instance_id for i in provider.terminate(sorted(ids))} == ids
    assert make(fake).list("e") == []
    provider.prefer_zones(["europe-west4-a"])       # none known: the configured order again
    [again] = provider.launch(1, L4, spot=True, tags={"experiment": "e"})
    assert again.zone == ZONES[0]


def test_spot_prices_are_the_zone_regions(fake):
    central = PriceBook().get("gcp", L4, "us-central1")
    book = PriceBook.from_types([*PriceBook(), replace(central, region="us-east1",
                                                       on_demand_per_hour=0.75,
                                                       spot_per_hour=0.31)])
    zones = ["us-central1-a", "us-east1-b"]
    provider = make(fake, types=[L4], zones=zones, prices=book)
    assert provider.spot_price_in("us-central1-a", L4) == pytest.approx(0.28)
    assert provider.spot_price_in("us-east1-b", L4) == pytest.approx(0.31)
    # Budgets count the dearest region a launch may use.
    assert provider.price_per_hour(L4, spot=True) == pytest.approx(0.31)
    assert provider.price_per_hour(L4) == pytest.approx(0.75)
    provider.prefer_zones(["us-east1-b"])
    [east] = provider.launch(1, L4, spot=True, tags={"experiment": "e"})
    provider.prefer_zones(["us-central1-a"])
    [central_vm] = provider.launch(1, L4, spot=True, tags={"experiment": "e"})
    assert [(east.zone, east.price_per_hour), (central_vm.zone, central_vm.price_per_hour)] == [
        ("us-east1-b", pytest.approx(0.31)), ("us-central1-a", pytest.approx(0.28))]
    again = make(fake, types=[L4], zones=zones, prices=book)    # a resumed controller's
    listed = {i.instance_id: i.price_per_hour for i in again.list("e")}
    assert listed == {east.instance_id: pytest.approx(0.31),
                      central_vm.instance_id: pytest.approx(0.28)}


# -- preemption -------------------------------------------------------------------------------

def test_preemption_is_told_apart_from_stops_and_deletes(fake):
    provider = make(fake)
    kept, gone, stopped, deleted = provider.launch(4, L4, spot=True, tags={"experiment": "e"})
    provider.list("e")
    fake.preempt(kept.instance_id)                 # status TERMINATED, the VM still there
    fake.preempt(gone.instance_id, delete=True)    # instanceTerminationAction=DELETE
    fake.set_status(stopped.instance_id, "TERMINATED")
    provider.terminate([deleted.instance_id])

    seen = {i.instance_id: i for i in provider.list("e")}
    assert {n: (i.state, i.preempted) for n, i in seen.items()} == {
        kept.instance_id: (InstanceState.TERMINATED, True),
        gone.instance_id: (InstanceState.TERMINATED, True),
        stopped.instance_id: (InstanceState.TERMINATED, False),
        deleted.instance_id: (InstanceState.TERMINATED, False),
    }
    ops = [r for r in fake.requests if r.path.endswith("/operations") and r.method == "GET"]
    assert ops and all(r.query["filter"] == ['operationType = "compute.instances.preempted"']
                       for r in ops)


# -- catalog ----------------------------------------------------------------------------------

def test_prices_and_slots_come_from_the_catalog(fake):
    provider = make(fake)
    assert provider.price_per_hour(L4) == pytest.approx(0.7068)
    assert provider.price_per_hour(L4, spot=True) == pytest.approx(0.28)
    assert provider.price_per_hour("n1-standard-8+2xnvidia-tesla-t4") == pytest.approx(1.08)
    assert provider.slots("a2-highgpu-8g") == 8
    assert provider.slots("n1-standard-8+4xnvidia-tesla-t4") == 4
    with pytest.raises(ProviderError, match="unknown GCP instance type"):
        provider.slots("g2-standard-5")
    with pytest.raises(ProviderError):
        provider.launch(1, "g2-standard-5")
    assert fake.inserted() == []


def test_names_labels_and_type_parsing():
    long = instance_name("A" * 200 + "!!", suffix="0123abcd")
    assert NAME_RE.fullmatch(long) and len(long) <= 63 and long.endswith("-0123abcd")
    assert instance_name("9 lives", suffix="abcd1234") == "elastune-9-lives-abcd1234"
    assert instance_name("x") != instance_name("x")
    assert NAME_RE.fullmatch(instance_name(None)) and NAME_RE.fullmatch(instance_name("---"))
    assert sanitize_label("Digits MLP/1") == "digits-mlp-1"
    assert len(sanitize_label("x" * 100)) == 63
    assert parse_instance_type(T4) == ("n1-standard-8", "nvidia-tesla-t4", 1)
    assert parse_instance_type(L4) == (L4, None, 0)
    with pytest.raises(ProviderError):
        parse_instance_type("G2 standard")


def test_cleanup_deletes_what_is_left(fake):
    provider = make(fake)
    a = provider.launch(2, L4, tags={"experiment": "a"})
    b = provider.launch(1, L4, tags={"experiment": "b"})
    fake.set_status(a[1].instance_id, "TERMINATED")   # stopped VMs still hold disks
    cleaned = provider.cleanup("a")
    assert sorted(i.instance_id for i in cleaned) == sorted(i.instance_id for i in a)
    assert all(i.state == InstanceState.TERMINATED for i in cleaned)
    assert provider.cleanup("a") == []
    other = make(fake)  # knows nothing: finds b by the managed label
    assert [i.instance_id for i in other.cleanup()] == [b[0].instance_id]
    assert make(fake).list() == []


def test_cleanup_secrets_deletes_the_broker_secrets_left_behind(fake):
    provider = make(fake)
    for exp in ("a", "b"):
        provider.put_secret(f"elastune-{exp}-broker", PASSWORD)
    fake.secrets[f"projects/{PROJECT}/secrets/elastune-c-broker"] = (
        {"name": f"projects/{PROJECT}/secrets/elastune-c-broker", "labels": {}}, [])
    assert provider.cleanup_secrets("a") == [f"projects/{PROJECT}/secrets/elastune-a-broker"]
    assert provider.cleanup_secrets("a") == []
    assert provider.cleanup_secrets() == [f"projects/{PROJECT}/secrets/elastune-b-broker"]
    # Not labelled as ours: kept, whatever its name.
    assert list(fake.secrets) == [f"projects/{PROJECT}/secrets/elastune-c-broker"]


# -- error mapping ----------------------------------------------------------------------------

def _op(code: str, status: int, message: str = "") -> dict:
    return {"error": {"errors": [{"code": code, "message": message}]},
            "httpErrorStatusCode": status}


@pytest.mark.parametrize(("error", "kind"), [
    (_op("ZONE_RESOURCE_POOL_EXHAUSTED", 503), CapacityError),
    (_op("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 503), CapacityError),
    (_op("QUOTA_EXCEEDED", 403, "Quota 'GPUS_ALL_REGIONS' exceeded."), QuotaError),
    (_op("IAM_PERMISSION_DENIED", 403), AuthError),
    (_op("RESOURCE_NOT_FOUND", 404), NotFoundError),
    (_op("RESOURCE_OPERATION_RATE_EXCEEDED", 0), ThrottledError),
    (gexc.TooManyRequests("Quota exceeded for quota metric 'Queries'",
                          errors=[{"reason": "rateLimitExceeded"}]), ThrottledError),
    (gexc.Forbidden("Rate Limit Exceeded", errors=[{"reason": "rateLimitExceeded"}]),
     ThrottledError),
    (gexc.Forbidden("Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region us-central1.",
                    errors=[{"reason": "quotaExceeded", "domain": "usageLimits"}]), QuotaError),
    (gexc.Forbidden("Required 'compute.instances.create' permission",
                    errors=[{"reason": "forbidden"}]), AuthError),
    (gexc.Unauthorized("Login Required."), AuthError),
    (gexc.NotFound("The resource 'projects/p/zones/z/instances/x' was not found"),
     NotFoundError),
    (gexc.ServiceUnavailable("The zone 'projects/p/zones/z' does not have enough resources "
                             "available to fulfill the request."), CapacityError),
    (gexc.ServiceUnavailable("backend error"), ThrottledError),
    (gexc.BadRequest("Invalid value for field 'resource.name'"), ProviderError),
    (gexc.RetryError("gave up", cause=gexc.TooManyRequests("slow down")), ThrottledError),
])
def test_map_gcp_error(error, kind):
    mapped = map_gcp_error(error, "launching g2-standard-4 in us-central1-a")
    assert type(mapped) is kind
    assert str(mapped).startswith("launching g2-standard-4 in us-central1-a: ")


def test_map_gcp_error_on_operations_and_credentials():
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import compute_v1

    op = compute_v1.Operation(
        status=compute_v1.Operation.Status.DONE, http_error_status_code=503,
        error=compute_v1.Error(errors=[compute_v1.Errors(
            code="ZONE_RESOURCE_POOL_EXHAUSTED", message="no room")]))
    assert isinstance(map_gcp_error(op), CapacityError)
    assert isinstance(map_gcp_error(DefaultCredentialsError("none")), AuthError)
    same = ThrottledError("x")
    assert map_gcp_error(same) is same


# -- secrets and storage ----------------------------------------------------------------------

def test_secret_round_trip_through_the_worker_reader(fake, monkeypatch):
    from worker._secrets import SecretError, read_secret

    provider = make(fake)
    name = provider.put_secret("elastune-broker", PASSWORD)
    assert name == f"projects/{PROJECT}/secrets/elastune-broker/versions/latest"
    assert read_secret(f"gcpsm:{name}?endpoint={fake.url}") == PASSWORD
    assert provider.put_secret(f"projects/{PROJECT}/secrets/elastune-broker", "new") == name
    monkeypatch.setenv("ELASTUNE_GCP_SECRETS_ENDPOINT", fake.url)
    assert read_secret(f"gcpsm:{name}") == "new"
    assert read_secret(f"gcpsm:projects/{PROJECT}/secrets/elastune-broker/versions/1") \
        == PASSWORD
    provider.delete_secret("elastune-broker")
    provider.delete_secret("elastune-broker")  # already gone: fine
    with pytest.raises(SecretError, match="elastune-broker") as info:
        read_secret(f"gcpsm:{name}")
    assert PASSWORD not in str(info.value)
    with pytest.raises(SecretError):
        read_secret("gcpsm:not-a-secret-name")


def test_gcs_store_round_trip(fake, monkeypatch):
    from google.cloud import storage

    from worker._storage import open_store

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake.url)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    storage.Client(project=PROJECT, credentials=AnonymousCredentials()).create_bucket("bkt")
    store = open_store("gs://bkt/exp-1")
    big = bytes(range(256)) * (9 * 4096 + 7)   # > 8 MiB: a resumable upload
    store.put("t1/step-000001.pkl", b"one")
    store.put("t1/step-000002.pkl", big)
    store.put("t10/step-000001.pkl", b"ten")
    store.put("t1/step-000001.pkl", b"one again")
    assert store.get("t1/step-000001.pkl") == b"one again"
    assert store.get("t1/step-000002.pkl") == big
    assert store.get("t1/missing") is None
    assert store.list() == ["t1/step-000001.pkl", "t1/step-000002.pkl", "t10/step-000001.pkl"]
    assert store.list("t1") == ["t1/step-000001.pkl", "t1/step-000002.pkl"]
    store.delete("t1/step-000001.pkl")
    store.delete("t1/step-000001.pkl")
    assert store.list("t1/") == ["t1/step-000002.pkl"]
    assert all(n.startswith("exp-1/") for _, n in fake.objects)
    uploads = {r.query.get("uploadType", [""])[0] for r in fake.requests
               if r.path.startswith("/upload/")}
    assert {"multipart", "resumable"} <= uploads
    with pytest.raises(ValueError):
        store.put("../escape", b"x")


def test_ensure_bucket_creates_a_private_bucket_once(fake, monkeypatch):
    from google.cloud import storage

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake.url)
    provider = make(fake)
    provider.ensure_bucket("sweeps")
    provider.ensure_bucket("sweeps")          # there already: nothing to do
    assert list(fake.buckets) == ["sweeps"]
    client = storage.Client(project=PROJECT, credentials=AnonymousCredentials())
    assert client.get_bucket("sweeps").name == "sweeps"
    creates = [r for r in fake.requests if r.method == "POST" and r.path.endswith("/b")]
    assert len(creates) == 1


def test_checkpoints_on_gcs(fake, monkeypatch):
    from google.cloud import storage

    from worker import _checkpoints

    if not hasattr(_checkpoints, "is_uri"):
        pytest.skip("worker._checkpoints does not write through open_store yet")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake.url)
    storage.Client(project=PROJECT, credentials=AnonymousCredentials()).create_bucket("ck")
    where = "gs://ck/exp/t0001"
    for step in (1, 2, 3):
        _checkpoints.save_checkpoint(where, step, {"step": step, "w": [step] * 3})
    assert _checkpoints.checkpoint_steps(where) == [2, 3]
    assert _checkpoints.load_checkpoint(where, at_most=2) == (2, {"step": 2, "w": [2, 2, 2]})
    assert _checkpoints.load_checkpoint(where, at_most=1) is None


@pytest.mark.slow
def test_modules_import_no_google_sdk_until_used():
    code = ("import sys, cloud._gcp, worker._gcs, worker._secret_gcp\n"
            "bad = [m for m in sys.modules if m.startswith('google.cloud')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_retag_moves_live_vms_to_another_experiment(fake):
    provider = make(fake)
    a, b = provider.launch(2, L4, tags={"experiment": "exp1"})
    provider.terminate([b.instance_id])
    moved = provider.retag([a.instance_id, b.instance_id], "elastune-warm")
    assert [m.instance_id for m in moved] == [a.instance_id]
    assert moved[0].tags["experiment"] == "elastune-warm"
    other = make(fake)   # a fresh process: the label says where the VM is now
    assert [i.instance_id for i in other.list("elastune-warm")] == [a.instance_id]
    assert a.instance_id not in {i.instance_id for i in other.list("exp1")}
    assert provider.cleanup("exp1") == []
