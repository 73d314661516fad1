"""End to end on AWS: a sweep with provider ``aws`` against moto (EC2, SSM, S3 over HTTP).

The harness (tests/cloud_vms.py) plays each VM the autoscaler launches: it runs the instance's
real user data, so a real ``elastune worker`` reads the broker password from SSM, the code
bundle and checkpoints from S3, and registers under its instance id. Shown here: the cluster
follows the stored plan; a spot instance taken back mid-segment costs only that segment, which
resumes from its checkpoint on another VM; the sweep ends under both budgets; and no instance
stays up afterwards, whether the sweep finished, was stopped, or lost its controller. On GCP
(the local Compute endpoint, tests/gce_server.py), a slow VM launch leaves the controller
dispatching and watching the cost budget.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.aws_server import (  # noqa: F401 - the fixtures aws, aws_env, aws_server
    REGION,
    FakeAws,
    aws_env_fixture,
    aws_fixture,
    aws_server_fixture,
)
from tests.cloud_vms import GCE_GONE, GceVms, Vms
from tuner import tune
from tuner._store import Store
from worker._embedded import EmbeddedRedis

pytestmark = pytest.mark.slow

BUCKET = "elastune-e2e"


@pytest.fixture(name="cloud")
def cloud_fixture(aws: FakeAws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """moto as the AWS endpoint of this process and its children, a broker, and the VMs."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    vms = Vms(aws.moto_url, tmp_path / "vms")
    with EmbeddedRedis() as redis_server:
        yield aws, redis_server.address, vms
        vms.close()


def _sweep(aws: FakeAws, *, trials: int = 27, sleep: float = 0.5, **provider: object) -> dict:
    return {
        "name": "cloud-e2e",
        "trainable": "tests.trainables:quadratic",
        "metric": "score",
        "mode": "max",
        "space": {"x": {"uniform": [0.0, 1.0]}, "sleep": {"choice": [sleep]}},
        "scheduler": {"type": "sha", "min_resource": 1, "max_resource": 9,
                      "reduction_factor": 3},
        "num_trials": trials,
        "seed": 7,
        "provider": {"type": "aws", "region": REGION, "instance_types": ["g4dn.xlarge"],
                     "spot": True, "storage": f"s3://{BUCKET}/runs", "image": aws.image_id(),
                     "register_timeout_s": 60.0, **provider},
        "profile": {"seconds_per_step": sleep, "boot_s": 3.0},
    }


def _live_instances(aws: FakeAws) -> list[str]:
    reply = aws.client("ec2").describe_instances(
        Filters=[{"Name": "tag-key", "Values": ["elastune-managed"]},
                 {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    return [i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"]]


def _cloud_ls(experiment: str | None = None) -> list[dict]:
    """``elastune cloud ls --provider aws --json`` as a user runs it."""
    args = [sys.executable, "-m", "tuner.cli", "cloud", "ls", "--provider", "aws",
            "--region", REGION, "--json"]
    if experiment:
        args += ["--experiment", experiment]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["instances"]


def _wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _running_segment_past_rung0(exp: Path) -> dict | None:
    """A segment running on a VM that resumes a trial from a checkpoint (start step > 0) and
    has reported at least one step: the one to take the VM from under."""
    if not (exp / "experiment.db").exists():
        return None
    store = Store(exp, readonly=True)
    try:
        if not store.query("SELECT name FROM sqlite_master WHERE name = 'segments'"):
            return None
        for seg in store.segments():
            if seg["state"] != "running" or seg["start_step"] == 0:
                continue
            steps = [r["step"] for r in store.reports(seg["trial_id"])]
            if any(s > seg["start_step"] for s in steps):
                return seg
    finally:
        store.close()
    return None


def test_a_sweep_on_aws_follows_the_plan_and_survives_a_spot_interruption(cloud, tmp_path):
    aws, broker, vms = cloud
    exp = tmp_path / "exp"
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = tune(_sweep(aws), time_budget="25s", cost_budget=2.0,
                                 experiment_dir=exp, broker_url=broker.url)
        except BaseException as exc:  # surfaced by the assertions below
            out["error"] = exc

    controller = threading.Thread(target=run)
    controller.start()
    seg = _wait(lambda: _running_segment_past_rung0(exp), 180, "a resumed segment running")
    victim = seg["instance_id"]
    aws.interrupt_spot(victim)
    controller.join(timeout=240)
    assert not controller.is_alive(), "the sweep did not end"
    assert "error" not in out, out.get("error")
    result = out["result"]

    # Finished, under both budgets.
    assert result.state == "finished", result.status
    assert result.budget_respected and result.status["spend_usd"] <= 2.0
    store = Store(exp, readonly=True)

    # The interrupted segment is PREEMPTED (not a failure) and re-ran from its checkpoint on
    # another VM; the trial's own state shows every step ran once, restored, not restarted.
    segs = store.segments(seg["trial_id"])
    lost = next(s for s in segs if s["segment_id"] == seg["segment_id"])
    assert lost["state"] == "preempted"
    rerun = [s for s in segs if s["start_step"] == seg["start_step"] and s["state"] == "done"]
    assert rerun and all(s["instance_id"] != victim for s in rerun)
    trial = store.trial(seg["trial_id"])
    assert trial["state"] != "failed"
    instances = {i["instance_id"]: i for i in store.instances()}
    assert instances[victim]["preempted"]

    # Every VM was a real worker: its user data carried no password, and it read it from SSM.
    assert vms.vms and all(broker.password not in vm.script for vm in vms.vms.values())
    assert victim in vms.vms and vms.vms[victim].killed
    # An instance the harness never booted ran nothing and is gone: on a busy machine the
    # replacement for the VM taken back may be launched and then ended with the sweep before
    # it has booted.
    unbooted = set(instances) - set(vms.vms)
    assert set(vms.vms) <= set(instances)
    assert not unbooted & {s["instance_id"] for s in store.segments()}
    assert all(instances[i]["state"] == "terminated" for i in unbooted), instances

    # Planned against actual: the plan is stored, and the cluster never outgrew it (one
    # replacement for the VM the cloud took back aside), and reached its peak.
    plans = store.plans()
    assert plans
    planned_peak = max(r["workers"] for p in plans for r in p["rungs"])
    actual = [r["workers"] for r in store.query("SELECT workers FROM spend ORDER BY ts")]
    print("planned peak", planned_peak, "actual", actual, "instances", len(store.instances()))
    assert actual and max(actual) <= planned_peak + 1
    assert len(instances) >= min(planned_peak, 2)

    # Nothing stays up: not in EC2, not for `elastune cloud ls`, no worker process.
    assert _live_instances(aws) == []
    assert _cloud_ls(result.experiment_id) == []
    assert vms.wait_all_gone(30)
    # The broker password's parameter is gone too.
    names = [p["Name"] for p in aws.client("ssm").describe_parameters()["Parameters"]]
    assert not [n for n in names if result.experiment_id in n]
    assert not vms.errors


def test_an_exploratory_spot_sweep_runs_the_survivors_on_on_demand_vms(cloud, tmp_path):
    aws, broker, vms = cloud
    exp = tmp_path / "exp"
    result = tune(_sweep(aws, spot="exploratory"), time_budget="40s", cost_budget=2.0,
                  experiment_dir=exp, broker_url=broker.url)
    assert result.state == "finished", result.status
    assert result.budget_respected
    store = Store(exp, readonly=True)
    instances = {i["instance_id"]: i for i in store.instances()}
    # Both markets, each VM billed at its own: spot for the first rungs, on-demand for the
    # last rung's survivors, which ran on on-demand VMs only.
    assert any(i["spot"] for i in instances.values())
    assert any(not i["spot"] for i in instances.values())
    last = [s for s in store.segments() if s["stop_step"] == 9 and s["state"] == "done"]
    assert len(last) == 3
    assert not any(instances[s["instance_id"]]["spot"] for s in last)
    prices = {bool(i["spot"]): i["price_per_hour"] for i in instances.values()}
    assert prices[True] < prices[False]
    # What EC2 was asked for: spot requests for the spot VMs only.
    reply = aws.client("ec2").describe_instances(InstanceIds=list(instances))
    lifecycle = {i["InstanceId"]: i.get("InstanceLifecycle") for r in reply["Reservations"]
                 for i in r["Instances"]}
    assert {iid for iid, kind in lifecycle.items() if kind == "spot"} == {
        iid for iid, i in instances.items() if i["spot"]}
    assert _live_instances(aws) == []
    assert vms.wait_all_gone(30)
    assert not vms.errors


def _start_controller(aws: FakeAws, broker, tmp_path: Path, **provider: object):
    """``elastune run sweep.yaml`` as its own process (so the test can stop or kill it)."""
    sweep = _sweep(aws, sleep=1.0, **provider)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    exp = tmp_path / "exp"
    log = open(tmp_path / "controller.log", "wb")  # noqa: SIM115 - closed by the caller
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", "run", str(path), "--dir", str(exp),
         "--broker", broker.url, "--time-budget", "45s", "--cost-budget", "2", "--json"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, exp, log


def _segments_running(exp: Path, n: int = 1) -> bool:
    if not (exp / "experiment.db").exists():
        return False
    store = Store(exp, readonly=True)
    try:
        if not store.query("SELECT name FROM sqlite_master WHERE name = 'segments'"):
            return False
        return len([s for s in store.segments() if s["state"] == "running"]) >= n
    finally:
        store.close()


def test_elastune_stop_leaves_no_instance(cloud, tmp_path):
    aws, broker, vms = cloud
    proc, exp, log = _start_controller(aws, broker, tmp_path)
    try:
        _wait(lambda: _segments_running(exp, 2), 120, "two segments running on VMs")
        assert _live_instances(aws)
        stop = subprocess.run([sys.executable, "-m", "tuner.cli", "stop", str(exp)],
                              capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    status = json.loads((tmp_path / "controller.log").read_text().strip().splitlines()[-1])
    assert status["state"] == "stopped"
    assert _live_instances(aws) == []
    assert _cloud_ls() == []
    assert vms.wait_all_gone(30)
    assert all(vm.killed for vm in vms.vms.values())
    store = Store(exp, readonly=True)
    assert store.instances() and all(i["terminated_at"] for i in store.instances())


def test_a_killed_controller_leaves_no_instance(cloud, tmp_path):
    aws, broker, vms = cloud
    proc, exp, log = _start_controller(aws, broker, tmp_path, orphan_timeout_s=3.0)
    try:
        _wait(lambda: _segments_running(exp, 2), 120, "two segments running on VMs")
        booted = set(vms.vms)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        log.close()
    assert booted and _live_instances(aws)           # nobody is left to terminate them...
    # ...so each VM's worker notices its controller is gone and the VM powers itself off.
    _wait(lambda: not _live_instances(aws), 90, "the orphaned VMs to power off")
    assert _cloud_ls() == []
    assert vms.wait_all_gone(30)
    assert all(vms.vms[i].powered_off for i in booted)
    assert "controller gone" in "".join(vms.vms[i].log for i in booted)
    # The broker secret of the killed sweep is still there; `elastune cloud cleanup` removes
    # it (and only it: another experiment's stays).
    ssm = aws.client("ssm")
    ours = [p["Name"] for p in ssm.describe_parameters()["Parameters"]
            if p["Name"].startswith("/elastune/")]
    assert len(ours) == 1
    experiment = ours[0].split("/")[2]
    ssm.put_parameter(Name="/elastune/another/broker", Value="x", Type="SecureString")
    out = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "cloud", "cleanup", "--provider", "aws",
         "--region", REGION, "--experiment", experiment, "--json"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["terminated"] == [] and doc["secrets_deleted"] == ours
    left = [p["Name"] for p in ssm.describe_parameters()["Parameters"]]
    assert ours[0] not in left and "/elastune/another/broker" in left


def test_a_spot_interruption_notice_moves_the_segment_before_the_vm_goes(cloud, tmp_path):
    aws, broker, vms = cloud
    exp = tmp_path / "exp"
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = tune(_sweep(aws, trials=9, sleep=1.0), time_budget="60s",
                                 cost_budget=2.0, experiment_dir=exp, broker_url=broker.url)
        except BaseException as exc:  # surfaced by the assertions below
            out["error"] = exc

    def last_rung_running() -> dict | None:
        seg = _running_segment_past_rung0(exp)
        return seg if seg is not None and seg["start_step"] == 3 else None

    controller = threading.Thread(target=run)
    controller.start()
    seg = _wait(last_rung_running, 180, "the last rung's segment running")
    victim = seg["instance_id"]
    vms.give_notice(victim)                  # EC2's two-minute warning, on the VM's IMDS

    def evacuated() -> dict | None:
        store = Store(exp, readonly=True)
        try:
            row = next(s for s in store.segments(seg["trial_id"])
                       if s["segment_id"] == seg["segment_id"])
        finally:
            store.close()
        return row if row["state"] == "preempted" else None

    moved = _wait(evacuated, 60, "the segment stopped ahead of the interruption")
    aws.interrupt_spot(victim)               # then the cloud takes the VM
    controller.join(timeout=240)
    assert not controller.is_alive(), "the sweep did not end"
    assert "error" not in out, out.get("error")
    result = out["result"]
    assert result.state == "finished", result.status

    # It stopped mid-segment with a checkpoint, and the trial went on from that checkpoint on
    # another VM: no step run twice, none skipped, no failure counted.
    assert seg["start_step"] < moved["last_step"] < 9
    assert moved["checkpoint_step"] == moved["last_step"]
    store = Store(exp, readonly=True)
    later = [s for s in store.segments(seg["trial_id"]) if s["start_step"] == moved["last_step"]]
    assert later and later[0]["state"] == "done" and later[0]["instance_id"] != victim
    steps = [r["step"] for r in store.reports(seg["trial_id"])]
    assert steps == list(range(1, 10))
    trial = store.trial(seg["trial_id"])
    assert trial["state"] == "completed" and trial["failures"] == 0
    instances = {i["instance_id"]: i for i in store.instances()}
    assert instances[victim]["preempted"]
    assert _live_instances(aws) == []
    assert vms.wait_all_gone(30)


def test_a_resumed_cloud_sweep_adopts_the_vms_its_killed_controller_left(cloud, tmp_path):
    from budgets import billed

    aws, broker, vms = cloud
    proc, exp, log = _start_controller(aws, broker, tmp_path, orphan_timeout_s=120.0)
    try:
        _wait(lambda: _segments_running(exp, 2), 120, "two segments running on VMs")
        time.sleep(1.5)                      # a spend record with the VMs up
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        log.close()
    left = set(_live_instances(aws))
    assert left, "no VM outlived the controller"
    resumed_at = time.time()
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "resume", str(exp), "--broker",
                          broker.url, "--json"], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "finished"

    store = Store(exp, readonly=True)
    instances = {i["instance_id"]: i for i in store.instances()}
    # Adopted, not replaced: the VMs the killed controller left ran the resumed run's
    # segments, and no VM was launched that EC2 does not know from the store.
    later = [s for s in store.segments() if s["submitted_at"] >= resumed_at]
    assert later and {s["instance_id"] for s in later} & left
    assert set(vms.vms) == set(instances)
    assert all(not vms.vms[i].powered_off for i in left)   # no VM had to power itself off
    # Spend is continuous: what the store says was spent is what EC2 bills for every
    # instance, launch to termination, each counted once.
    bill = sum(billed(i["price_per_hour"], i["terminated_at"] - i["launched_at"], 60.0)
               for i in instances.values())
    assert doc["spend_usd"] == pytest.approx(bill, abs=5e-4)
    assert sum(i["cost_usd"] for i in instances.values()) == pytest.approx(bill, abs=5e-4)
    # Nothing stays up.
    assert _live_instances(aws) == []
    assert vms.wait_all_gone(30)


def test_a_sweeps_vms_kept_warm_are_taken_up_by_the_next_sweep_and_billed_once(cloud,
                                                                                tmp_path):
    from budgets import billed

    aws, broker, vms = cloud
    # Long enough for the second sweep to start and take the VMs up with TAKE_MARGIN_S (20 s)
    # to spare; no longer, since the test waits for the VMs to leave at that deadline.
    keep_s = 40
    first = tune(_sweep(aws, trials=9, keep_warm=f"{keep_s}s"), time_budget="30s", cost_budget=2.0,
                 experiment_dir=tmp_path / "a", broker_url=broker.url)
    assert first.state == "finished", first.status
    store_a = Store(tmp_path / "a", readonly=True)
    a = {i["instance_id"]: i for i in store_a.instances()}
    ended = store_a.experiment()["finished_at"]
    warm = {iid for iid, i in a.items() if "kept_warm_until" in i["tags"]}
    # Its idle VMs stayed up, moved out of the sweep (its cleanup left them), paid by it up to
    # the deadline: the sweep's spend is its instances billed launch to deadline.
    assert warm and set(_live_instances(aws)) == warm
    assert {i["instance_id"] for i in _cloud_ls("elastune-warm")} == warm
    for iid in warm:
        until = float(a[iid]["tags"]["kept_warm_until"])
        assert a[iid]["terminated_at"] == pytest.approx(until)
        assert until == pytest.approx(ended + keep_s, abs=2)
    bill_a = sum(billed(i["price_per_hour"], i["terminated_at"] - i["launched_at"], 60.0)
                 for i in a.values())
    assert first.spend_usd == pytest.approx(bill_a, abs=5e-4) and first.spend_usd <= 2.0

    second = tune(_sweep(aws, trials=9), time_budget="30s", cost_budget=2.0,
                  experiment_dir=tmp_path / "b", broker_url=broker.url)
    assert second.state == "finished", second.status
    store = Store(tmp_path / "b", readonly=True)
    b = {i["instance_id"]: i for i in store.instances()}
    taken = {iid for iid, i in b.items() if i["tags"].get("warm_from") == first.experiment_id}
    # Taken up, not booted again: each VM ran its startup script once, and ran the second
    # sweep's segments.
    assert taken and taken <= warm, (
        f"none taken up; the second sweep's first launch came "
        f"{min(i['launched_at'] for i in b.values()) - ended:.1f} s after the first ended")
    assert taken & {s["instance_id"] for s in store.segments() if s["state"] == "done"}
    assert set(vms.vms) == set(a) | set(b)
    # Billed once: the second sweep pays a taken VM only past the deadline the first paid up
    # to (here none: it ended first, and gave the VMs back until that deadline).
    for iid in taken:
        paid = float(b[iid]["tags"]["paid_until"])
        assert b[iid]["cost_usd"] == pytest.approx(
            billed(b[iid]["price_per_hour"], b[iid]["terminated_at"] - paid, 0.0), abs=5e-4)
    assert second.spend_usd == pytest.approx(sum(i["cost_usd"] for i in b.values()), abs=5e-4)
    # Not taken up again, each warm VM leaves at its deadline: nothing stays up.
    last = max(float(a[iid]["tags"]["kept_warm_until"]) for iid in warm)
    _wait(lambda: not _live_instances(aws), last - time.time() + 30, "the warm VMs to go")
    assert vms.wait_all_gone(30)
    assert all(vms.vms[iid].powered_off for iid in warm)
    assert not vms.errors


def test_a_slow_gcp_launch_leaves_dispatch_and_the_cost_budget_running(tmp_path, monkeypatch):
    """Two VMs up, then one is lost and its replacement takes a minute to create: segments go
    on finishing on the VM that is up meanwhile, and the budget, which runs out during the
    launch, stops the sweep on time; the late VM is terminated once its launch returns."""
    pytest.importorskip("google.cloud.compute_v1")
    from google.api_core.retry import Retry
    from google.auth.credentials import AnonymousCredentials

    import cloud
    from budgets import PriceBook
    from tests.gce_server import FakeGoogleCloud

    project, machine, delay = "e2e-project", "g2-standard-4", 60.0
    per_s = PriceBook().get("gcp", machine, "us-central1").hourly(False) / 3600.0
    # Both first VMs' 60 s minimums and the replacement's fit (180 s at most, launched within
    # 70 s of the start); the reaction time's look-ahead (30 s) passes the budget 60-70 s in,
    # while the replacement is still being created.
    budget = round(220 * per_s, 6)
    exp = tmp_path / "exp"
    out: dict = {}
    with FakeGoogleCloud(project) as fake, EmbeddedRedis() as redis_server:
        monkeypatch.setattr(cloud, "GcpProvider", functools.partial(
            cloud.GcpProvider, api_endpoint=fake.url, credentials=AnonymousCredentials(),
            retry=Retry(initial=0.05, maximum=0.5, multiplier=2, timeout=30)))
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake.url)
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", project)
        vms = GceVms(fake, tmp_path / "vms")
        sweep = {
            "name": "gcp-slow-launch", "trainable": "tests.trainables:quadratic",
            "metric": "score", "mode": "max",
            "space": {"x": {"uniform": [0.0, 1.0]}, "sleep": {"choice": [0.5]}},
            "scheduler": {"type": "sha", "min_resource": 1, "max_resource": 9,
                          "reduction_factor": 3},
            "num_trials": 81, "seed": 7,
            "provider": {"type": "gcp", "project": project, "zone": "us-central1-a",
                         "machine_types": [machine], "storage": "gs://elastune-e2e/runs",
                         "scaling": "static", "workers": 2, "register_timeout_s": 60.0},
            "profile": {"seconds_per_step": 0.5, "boot_s": 3.0},
        }

        def run() -> None:
            try:
                out["result"] = tune(sweep, time_budget="150s", cost_budget=budget,
                                     experiment_dir=exp, broker_url=redis_server.address.url)
            except BaseException as exc:  # surfaced by the assertions below
                out["error"] = exc

        def done_segments() -> int:
            if not _segments_running(exp, 0):
                return 0
            store = Store(exp, readonly=True)
            try:
                return sum(s["state"] == "done" for s in store.segments())
            finally:
                store.close()

        controller = threading.Thread(target=run)
        controller.start()
        try:
            _wait(lambda: len(vms.running()) == 2 and done_segments() >= 3, 120,
                  "two VMs up and segments done")
            fake.insert_delay_s = delay          # from now on a VM takes a minute to create
            lost = sorted(vm.instance_id for vm in vms.running())[-1]
            fake.set_status(lost, "TERMINATED")  # stopped under the sweep: it is replaced
            _wait(lambda: len(fake.inserted()) == 3, 30, "the replacement's insert")
            asked = time.time()
            controller.join(timeout=240)
        finally:
            vms.close()
        assert not controller.is_alive(), "the sweep did not end"
        assert "error" not in out, out.get("error")
        left = {n: i["status"] for n, i in fake.read_instances().items()
                if i["status"] not in GCE_GONE}
    result = out["result"]
    store = Store(exp, readonly=True)
    assert store.experiment()["message"] == "budget"
    assert result.budget_respected and result.spend_usd <= budget
    # While the replacement was being created, the VM that was up kept getting work.
    meanwhile = [s for s in store.segments() if s["state"] == "done"
                 and asked <= s["submitted_at"] and s["finished_at"] < asked + delay]
    started = store.experiment()["started_at"]
    print("replacement asked at", round(asked - started, 1), "s; sweep ended at",
          round(store.experiment()["finished_at"] - started, 1), "s; spend", result.spend_usd,
          "of", budget, "; segments done meanwhile", len(meanwhile))
    assert len(meanwhile) >= 2, f"{len(meanwhile)} segments ran during the slow launch"
    # The budget stopped dispatch before the launch came back...
    assert max(s["submitted_at"] for s in store.segments()) < asked + delay - 1
    # ...and the VM it brought was terminated (nothing left running, in GCE or the store).
    instances = store.instances()
    assert len(instances) == 3 and all(i["terminated_at"] for i in instances)
    late = max(instances, key=lambda i: i["launched_at"])
    assert late["terminated_at"] >= asked + delay - 1
    assert not left, left
    assert not vms.errors
