"""A shared pool: workers started by hand (``elastune worker --pool``) on a password-protected
TCP redis-server run the sweeps dispatched to the pool; real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from budgets import billed
from tests._redis_tcp import redis_on_loopback
from tests.aws_server import (  # noqa: F401 - the fixtures aws, aws_env, aws_server
    aws_env_fixture,
    aws_fixture,
    aws_server_fixture,
)
from tests.e2e.test_faults import assert_nothing_lost
from tuner import tune
from tuner._store import Store
from worker.records import PoolMember, members_key

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def broker() -> Iterator[str]:
    with redis_on_loopback("pw") as port:
        yield f"redis://:pw@127.0.0.1:{port}/0"


class Pool:
    """Pool workers started as a user would, each in its own process group."""

    def __init__(self, url: str, name: str, log: Path) -> None:
        self.url, self.name, self.log = url, name, log
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, worker: str, *extra: str, cwd: Path = ROOT, pythonpath: bool = True,
              insecure: bool = True) -> subprocess.Popen[bytes]:
        """``insecure``: accept the loopback broker without TLS (``--insecure``)."""
        env = dict(os.environ, ELASTUNE_BROKER_URL=self.url)
        if pythonpath:
            env["PYTHONPATH"] = str(ROOT)
        else:
            # elastune's packages, but not the tests (the trainables' module)
            code = self.log / "code-only"
            if not code.exists():
                code.mkdir()
                for package in ("tuner", "cloud", "budgets", "worker"):
                    (code / package).symlink_to(ROOT / package)
            env["PYTHONPATH"] = str(code)
        out = open(self.log / f"{worker}.log", "wb")   # noqa: SIM115 - the child's
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "--pool", self.name, "--name", worker,
             *(["--insecure"] if insecure else []), *extra], cwd=cwd, env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        self.procs[worker] = proc
        return proc

    def wait_joined(self, *workers: str, timeout: float = 30.0) -> None:
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + timeout
        while not set(workers) <= {k.decode() for k in client.hkeys(members_key(self.name))}:
            assert time.monotonic() < deadline, f"{workers} did not join"
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def pool(broker, tmp_path) -> Iterator[Pool]:
    logs = tmp_path / "worker-logs"
    logs.mkdir()
    p = Pool(broker, "gpu-a", logs)
    try:
        yield p
    finally:
        p.stop()


def _sweep(log: Path, name: str = "pooled", **provider) -> dict:
    return {"name": name, "trainable": "tests.trainables:counted", "metric": "score",
            "mode": "max", "seed": 0,
            "space": {"x": {"uniform": [0.0, 1.0]}, "sleep": 0.1, "log": str(log)},
            "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                          "reduction_factor": 3},
            "num_trials": 9, "profile": {"seconds_per_step": 0.1},
            "provider": {"type": "pool", "name": "gpu-a", "wait_for_workers": "60s",
                         **provider}}


def _wait_for_line(log: Path, text: str, timeout: float) -> None:
    """Until a worker's log says ``text`` (it fails with the log's end after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.2)


def _runs(log: Path) -> Path:
    log.mkdir(exist_ok=True)
    return log


def test_a_sweep_runs_on_the_pools_workers_which_outlive_it(pool, broker, tmp_path):
    log = _runs(tmp_path / "log")
    for w in ("pw1", "pw2"):
        pool.start(w)
    pool.wait_joined("pw1", "pw2")
    result = tune(_sweep(log, price_per_hour=3.6, billing_minimum_s=0), time_budget="3m",
                  cost_budget=None, experiment_dir=tmp_path / "exp", broker_url=broker,
                  insecure_broker=True)
    assert result.state == "finished"
    store = assert_nothing_lost(tmp_path / "exp", log)
    by_worker = {r["instance_id"] for r in store.segments()}
    assert by_worker == {"pw1", "pw2"}                  # it started no worker of its own
    assert all(p.poll() is None for p in pool.procs.values())   # they outlive the sweep
    doc = json.loads(subprocess.run(
        [sys.executable, "-m", "tuner.cli", "status", str(tmp_path / "exp"), "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    workers = {w["name"]: w for w in doc["workers"]}
    assert set(workers) == {"pw1", "pw2"}
    assert sum(w["segments_run"] for w in workers.values()) == len(store.segments())
    assert all(w["slots"] == 1 and w["host"] for w in workers.values())
    # Billed per second (no minimum) from the first work each took to the sweep's end.
    first = {w: min(s["submitted_at"] for s in store.segments() if s["instance_id"] == w)
             for w in workers}
    ended = {r["instance_id"]: r["terminated_at"] for r in store.instances()}
    assert result.spend_usd == pytest.approx(
        sum(billed(3.6, ended[w] - t, 0.0) for w, t in first.items()))
    assert all(t >= store.experiment()["started_at"] for t in first.values())
    # SIGTERM drains: each worker finishes and exits 0.
    for proc in pool.procs.values():
        proc.send_signal(signal.SIGTERM)
    assert [proc.wait(timeout=60) for proc in pool.procs.values()] == [0, 0]


def test_a_worker_joining_mid_sweep_takes_work_within_a_second(pool, broker, tmp_path):
    log = _runs(tmp_path / "log")
    pool.start("pw1")
    pool.wait_joined("pw1")
    sweep = _sweep(log)
    sweep["space"]["sleep"] = 0.3
    box: dict = {}
    run = threading.Thread(target=lambda: box.update(result=tune(
        sweep, time_budget="3m", cost_budget=None, experiment_dir=tmp_path / "exp",
        broker_url=broker, insecure_broker=True)))
    run.start()
    deadline = time.monotonic() + 60
    while not list(log.glob("*.txt")):
        assert time.monotonic() < deadline, "the sweep did not start"
        time.sleep(0.05)
    pool.start("pw2")
    pool.wait_joined("pw2")
    joined = PoolMember.model_validate_json(redis.Redis.from_url(broker).hget(
        members_key("gpu-a"), "pw2")).joined_at
    run.join(timeout=180)
    assert box["result"].state == "finished"
    store = Store(tmp_path / "exp", readonly=True)
    on_new = [s for s in store.segments() if s["instance_id"] == "pw2"]
    assert on_new, "the worker that joined took no work"
    assert min(s["submitted_at"] for s in on_new) - joined < 1.5
    # The pool is the cluster: the plan was made again for its new size.
    sizes = [max(stage["workers"] for stage in p["timeline"]) for p in store.plans()]
    assert sizes[0] == 1 and 2 in sizes[1:], sizes


def test_a_worker_killed_mid_segment_costs_that_segment_only(pool, broker, tmp_path):
    log = _runs(tmp_path / "log")
    for w in ("pw1", "pw2", "pw3"):
        pool.start(w)
    pool.wait_joined("pw1", "pw2", "pw3")
    killed: list[str] = []

    def kill_one(snapshot):
        if killed or snapshot["running_segments"] < 2 or not list(log.glob("*.txt")):
            return
        os.killpg(pool.procs["pw1"].pid, signal.SIGKILL)
        killed.append("pw1")

    sweep = _sweep(log)
    sweep["space"]["sleep"] = 0.3
    result = tune(sweep, time_budget="3m", cost_budget=None, experiment_dir=tmp_path / "exp",
                  broker_url=broker, insecure_broker=True, observer=kill_one)
    assert killed and result.state == "finished"
    store = assert_nothing_lost(tmp_path / "exp", log)
    assert set(result.trials["state"]) <= {"completed", "pruned"}
    lost = [s for s in store.segments() if s["instance_id"] == "pw1" and s["state"] != "done"]
    assert lost and {s["state"] for s in lost} <= {"lost", "stale"}
    assert {r["instance_id"]: r["state"] for r in store.instances()}["pw1"] == "terminated"


def test_a_frozen_worker_that_comes_back_writes_nothing_into_a_segment_given_away(
        pool, broker, tmp_path):
    log = _runs(tmp_path / "log")
    for w in ("pw1", "pw2"):
        pool.start(w)
    pool.wait_joined("pw1", "pw2")
    frozen: list[int] = []

    def freeze_then_thaw(snapshot):
        if not frozen and snapshot["running_segments"] >= 2 and list(log.glob("*.txt")):
            os.killpg(pool.procs["pw1"].pid, signal.SIGSTOP)
            frozen.append(time.monotonic())
        elif len(frozen) == 1 and time.monotonic() - frozen[0] > 12:   # past its liveness
            os.killpg(pool.procs["pw1"].pid, signal.SIGCONT)
            frozen.append(time.monotonic())

    sweep = _sweep(log)
    sweep["space"]["sleep"] = 0.5
    sweep["num_trials"] = 18
    result = tune(sweep, time_budget="3m", cost_budget=None, experiment_dir=tmp_path / "exp",
                  broker_url=broker, insecure_broker=True, observer=freeze_then_thaw)
    assert len(frozen) == 2, "the worker was not frozen and thawed during the sweep"
    assert result.state == "finished"
    store = assert_nothing_lost(tmp_path / "exp", log)
    given_away = [s for s in store.segments() if s["instance_id"] == "pw1"
                  and s["state"] in ("lost", "stale")]
    assert given_away
    # Thawed, it found its segment revoked: no checkpoint, and the log says why.
    _wait_for_line(pool.log / "pw1.log", "was given to another worker", 20)


def test_a_worker_frozen_past_the_sweeps_end_writes_nothing_when_it_wakes(
        pool, broker, tmp_path):
    from tuner._executor import revoked_key

    log = _runs(tmp_path / "log")
    for w in ("pw1", "pw2"):
        pool.start(w)
    pool.wait_joined("pw1", "pw2")
    frozen: list[float] = []

    def freeze(snapshot):
        if not frozen and snapshot["running_segments"] >= 2 and list(log.glob("*.txt")):
            os.killpg(pool.procs["pw1"].pid, signal.SIGSTOP)
            frozen.append(time.monotonic())

    sweep = _sweep(log)
    sweep["space"]["sleep"] = 0.5
    result = tune(sweep, time_budget="3m", cost_budget=None, experiment_dir=tmp_path / "exp",
                  broker_url=broker, insecure_broker=True, observer=freeze)
    assert frozen and result.state == "finished"
    store = Store(tmp_path / "exp", readonly=True)
    given_away = [s for s in store.segments() if s["instance_id"] == "pw1"
                  and s["state"] in ("lost", "stale")]
    assert given_away
    # The sweep is over; its fence outlives it (with a TTL) for the worker still frozen.
    client = redis.Redis.from_url(broker)
    key = revoked_key(store.experiment()["id"])
    assert client.sismember(key, given_away[0]["segment_id"]) and client.ttl(key) > 0
    checkpoints = {p: p.stat().st_mtime_ns for p in (tmp_path / "exp").rglob("*")
                   if "checkpoints" in p.parts and p.is_file()}
    os.killpg(pool.procs["pw1"].pid, signal.SIGCONT)
    _wait_for_line(pool.log / "pw1.log", "was given to another worker", 30)
    assert checkpoints == {p: p.stat().st_mtime_ns for p in (tmp_path / "exp").rglob("*")
                           if "checkpoints" in p.parts and p.is_file()}
    assert_nothing_lost(tmp_path / "exp", log)


def test_two_sweeps_share_a_pool_without_starving_either(pool, broker, tmp_path):
    for w in ("pw1", "pw2"):
        pool.start(w)
    pool.wait_joined("pw1", "pw2")
    results: dict[str, object] = {}

    def run(name: str) -> None:
        sweep = _sweep(_runs(tmp_path / f"log-{name}"), name=name)
        sweep["space"]["sleep"] = 0.3
        sweep["num_trials"] = 27
        results[name] = tune(sweep, time_budget="3m", cost_budget=None,
                             experiment_dir=tmp_path / name, broker_url=broker,
                             insecure_broker=True)

    first = threading.Thread(target=run, args=("one",))
    first.start()
    time.sleep(3.0)          # the first has the whole pool by now
    second = threading.Thread(target=run, args=("two",))
    second.start()
    first.join(timeout=240)
    second.join(timeout=240)
    assert {r.state for r in results.values()} == {"finished"}
    one = Store(tmp_path / "one", readonly=True).segments()
    two = Store(tmp_path / "two", readonly=True).segments()
    one_end = max(s["finished_at"] for s in one)
    # The second got slots while the first still ran (its fair share), not after it.
    assert min(s["started_at"] for s in two if s["started_at"]) < one_end - 1.0
    # No slot ever ran two segments at once: per worker, the segments of both sweeps are
    # disjoint in time.
    for w in ("pw1", "pw2"):
        spans = sorted((s["started_at"], s["finished_at"]) for s in one + two
                       if s["instance_id"] == w and s["started_at"] and s["finished_at"])
        assert all(a[1] <= b[0] + 0.05 for a, b in zip(spans, spans[1:], strict=False)), w


def test_a_two_gpu_segment_runs_on_the_worker_that_has_two(pool, broker, tmp_path):
    log = _runs(tmp_path / "log")
    pool.start("one-gpu")
    pool.start("two-gpus", "--gpus", "0,1")
    pool.wait_joined("one-gpu", "two-gpus")
    sweep = _sweep(log)
    sweep["gpus_per_trial"] = 2
    sweep["num_trials"] = 3
    result = tune(sweep, time_budget="3m", cost_budget=None, experiment_dir=tmp_path / "exp",
                  broker_url=broker, insecure_broker=True)
    assert result.state == "finished"
    segs = Store(tmp_path / "exp", readonly=True).segments()
    assert {s["instance_id"] for s in segs} == {"two-gpus"} and {s["gpus"] for s in segs} == {2}


def test_a_segment_too_wide_for_every_worker_waits_visibly_then_exits_2(pool, broker,
                                                                          tmp_path):
    pool.start("one-gpu")
    pool.wait_joined("one-gpu")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(json.dumps({**_sweep(_runs(tmp_path / "log"), wait_for_workers="6s"),
                                 "gpus_per_trial": 2}))
    run = subprocess.Popen([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--dir",
                            str(tmp_path / "exp"), "--broker", broker, "--insecure",
                            "--time-budget", "2m"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        said = None
        deadline = time.monotonic() + 60
        while said is None and run.poll() is None:
            assert time.monotonic() < deadline
            out = subprocess.run([sys.executable, "-m", "tuner.cli", "status",
                                  str(tmp_path / "exp"), "--json"], cwd=ROOT,
                                 capture_output=True, text=True)
            if out.returncode == 0:
                doc = json.loads(out.stdout)
                said = doc["message"] if doc["state"] == "running" else None
            time.sleep(0.2)
        assert said is not None and "with 2 GPUs" in said and "has 1" in said, said
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 2, err[-2000:]
    assert "gpus_per_trial" in err and "largest has 1" in err
    assert Store(tmp_path / "exp", readonly=True).segments() == []


def test_a_pool_with_no_worker_fails_after_wait_for_workers_saying_how_to_start_one(
        broker, tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(json.dumps({**_sweep(_runs(tmp_path / "log")),
                                 "provider": {"type": "pool", "name": "nobody-here",
                                              "wait_for_workers": "3s"}}))
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "run", str(sweep), "--broker",
                          broker, "--insecure", "--time-budget", "2m"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "elastune worker --broker URL --pool nobody-here" in out.stderr


def test_a_worker_that_cannot_import_the_trainable_leaves_and_costs_no_failure(
        pool, broker, tmp_path):
    log = _runs(tmp_path / "log")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lost = pool.start("no-code", cwd=elsewhere, pythonpath=False)
    pool.wait_joined("no-code")
    result_box: dict = {}
    run = threading.Thread(target=lambda: result_box.update(result=tune(
        _sweep(log), time_budget="3m", cost_budget=None, experiment_dir=tmp_path / "exp",
        broker_url=broker, insecure_broker=True)))
    run.start()
    assert lost.wait(timeout=60) == 0        # it left the pool, loudly, and stopped
    assert "cannot load 'tests.trainables:counted'" in (pool.log / "no-code.log").read_text()
    pool.start("with-code")
    run.join(timeout=180)
    result = result_box["result"]
    assert result.state == "finished"
    assert (result.trials["failures"] == 0).all()
    store = Store(tmp_path / "exp", readonly=True)
    assert {s["state"] for s in store.segments() if s["instance_id"] == "no-code"} == {"lost"}


def _tls_redis_server() -> str | None:
    """A redis-server on the PATH outside this environment (Debian's is built with TLS; the
    embedded one, which the environment's bin may hold too, is not), or None."""
    import shutil

    ours = os.path.realpath(os.path.join(sys.prefix, "bin"))
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and os.path.realpath(d) != ours)
    return shutil.which("redis-server", path=path)


@pytest.fixture
def tls_broker(tmp_path) -> Iterator[tuple[str, Path]]:
    """A password-protected redis-server on rediss:// with a self-signed certificate for
    127.0.0.1; yields the URL and the certificate (the CA to trust)."""
    from tests._redis_tcp import free_port

    server = _tls_redis_server()
    if server is None:
        pytest.skip("no redis-server on the PATH (Debian's redis-server has TLS)")
    folder = tmp_path / "tls"
    folder.mkdir()
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    port = free_port()
    conf = folder / "redis.conf"
    conf.write_text(f"port 0\ntls-port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\n"
                    f"dir {folder}\nrequirepass pw\ntls-cert-file {cert}\ntls-key-file {key}\n"
                    f"tls-ca-cert-file {cert}\ntls-auth-clients no\n")
    proc = subprocess.Popen([server, str(conf)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        client = redis.Redis(host="127.0.0.1", port=port, password="pw", ssl=True,
                             ssl_ca_certs=str(cert))
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None:
                    said = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                    if "tls" in said.lower():
                        pytest.skip(f"{server} has no TLS: {said.strip()[-200:]}")
                    raise AssertionError(f"{server} exited at start: {said[-2000:]}") from None
                assert time.monotonic() < deadline, "the TLS redis-server did not start"
                time.sleep(0.05)
        yield f"rediss://:pw@127.0.0.1:{port}/0", cert
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_pool_on_a_tls_broker_with_a_self_signed_certificate(tls_broker, tmp_path,
                                                               monkeypatch):
    url, cert = tls_broker
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))     # the private CA, for both sides
    logs = tmp_path / "worker-logs"
    logs.mkdir()
    workers = Pool(url, "tls-pool", logs)
    try:
        workers.start("tw1", insecure=False)
        client = redis.Redis.from_url(url, ssl_ca_certs=str(cert))
        deadline = time.monotonic() + 30
        while not client.hexists(members_key("tls-pool"), "tw1"):
            assert time.monotonic() < deadline, (logs / "tw1.log").read_text()[-2000:]
            time.sleep(0.05)
        log = _runs(tmp_path / "log")
        sweep = _sweep(log)
        sweep["provider"]["name"] = "tls-pool"
        sweep["num_trials"] = 3
        result = tune(sweep, time_budget="2m", cost_budget=None,
                      experiment_dir=tmp_path / "exp", broker_url=url)   # (no --insecure)
        assert result.state == "finished"
        assert {s["instance_id"] for s in Store(tmp_path / "exp", readonly=True).segments()} \
            == {"tw1"}
    finally:
        workers.stop()


@pytest.fixture
def bucket(aws, monkeypatch) -> str:
    """An S3 bucket on the local S3 server; this process and the workers it starts reach it
    through AWS_ENDPOINT_URL, with the fixture's fake credentials."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    aws.client("s3").create_bucket(Bucket="pool-store")
    return "pool-store"


def test_a_notebook_trainable_and_its_checkpoints_reach_pool_workers_through_storage(
        pool, broker, bucket, aws, tmp_path):
    offset = 0.25

    def train(params, ctx):   # a closure: no worker can import it by name
        state = ctx.restore() or {"done": 0}
        for step in ctx.steps():
            state["done"] += 1
            ctx.report(step, score=params["x"] + offset, done=float(state["done"]))
        ctx.checkpoint(state)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for w in ("sw1", "sw2"):     # no tests package, and a working directory of their own
        pool.start(w, cwd=elsewhere, pythonpath=False)
    pool.wait_joined("sw1", "sw2")
    sweep = _sweep(tmp_path / "unused", storage=f"s3://{bucket}/sweeps")
    sweep.update(trainable=train, space={"x": {"uniform": [0.0, 1.0]}})
    result = tune(sweep, time_budget="3m", cost_budget=None, experiment_dir=tmp_path / "exp",
                  broker_url=broker, insecure_broker=True)
    assert result.state == "finished", result.message
    store = Store(tmp_path / "exp", readonly=True)
    exp_id = store.experiment()["id"]
    keys = [o["Key"] for o in aws.client("s3").list_objects_v2(
        Bucket=bucket, Prefix="sweeps/")["Contents"]]
    assert f"sweeps/{exp_id}/code/trainable.pkl" in keys
    assert any(k.startswith(f"sweeps/{exp_id}/checkpoints/") for k in keys)
    assert not (tmp_path / "exp" / "checkpoints").exists()
    # Promoted trials went on from their checkpoints (every step counted once), whichever
    # worker ran the segment before.
    reports = store.reports()
    assert max(r["step"] for r in reports) == 9
    assert all(json.loads(r["metrics"])["done"] == r["step"] for r in reports)
    assert {s["instance_id"] for s in store.segments()} == {"sw1", "sw2"}
