"""A planted broker password is found nowhere it should not be.

A real local sweep runs against a Redis that requires the planted password, with a trainable
that prints its environment and command line to the worker log and keeps them in its
checkpoint. Then every file of the run (the SQLite store, dumped table by table as well as
read raw; worker logs; checkpoints; the HTML report), the output of ``elastune run``,
``status``, ``ls`` and ``report``, the dashboard's API answers, and every log record the
controller wrote are searched for the password: as is, URL-encoded, JSON-escaped and base64
encoded at every alignment. The same for a cloud sweep's bootstrap, on AWS (moto) and on GCP
(the local fake of the REST APIs): user data / startup script, tags, labels, metadata, every
API request except the one that puts the password into the secret store.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import math
import secrets
import sqlite3
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml
from fastapi.testclient import TestClient

from budgets import RealClock
from tests._redis_tcp import redis_on_loopback
from tests.aws_server import (  # noqa: F401 - the fixtures aws, aws_env, aws_server
    REGION,
    FakeAws,
    aws_env_fixture,
    aws_fixture,
    aws_server_fixture,
)
from tuner._config import load_sweep
from tuner._providers import open_workers
from tuner.cli import main
from tuner.dashboard import make_app
from worker import BrokerAddress

ROOT = Path(__file__).resolve().parents[1]
# Characters that URL-encoding changes, so the encoded forms differ from the raw one.
SECRET = f"Pl@nted/{secrets.token_hex(12)}:pw+%x"
EXPERIMENT = "planted-exp"


def encoded_forms(secret: str) -> dict[str, bytes]:
    """The ways a leaked secret could be spelt in a file or a reply."""
    raw = secret.encode()
    forms = {
        "raw": raw,
        "url-encoded": quote(secret, safe="").encode(),
        "url-encoded (path)": quote(secret).encode(),
        "form-encoded": quote_plus(secret).encode(),
        "json-escaped": json.dumps(secret)[1:-1].encode(),
    }
    # Any of these, base64-encoded inside a longer text (user data, a JSON payload), starts at
    # one of three byte offsets; keep the characters that depend on the secret alone.
    for form, text in list(forms.items()):
        for name, encode in (("base64", base64.b64encode),
                             ("base64url", base64.urlsafe_b64encode)):
            for pad in range(3):
                blob = encode(b"\0" * pad + text)
                forms[f"{name}+{pad} of {form}"] = blob[
                    math.ceil(pad * 8 / 6):(pad + len(text)) * 8 // 6]
    return forms


FORMS = encoded_forms(SECRET)


def leaks(blobs: dict[str, bytes]) -> list[str]:
    """``where: form`` for every blob that holds the secret in any form."""
    return [f"{where}: {form}" for where, blob in blobs.items()
            for form, needle in FORMS.items() if needle in blob]


def files_under(folder: Path) -> dict[str, bytes]:
    blobs = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            blobs[str(path)] = path.read_bytes()
            if path.suffix == ".db":
                with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                    blobs[f"{path} (dump)"] = "\n".join(conn.iterdump()).encode()
    return blobs


def test_the_encoded_forms_find_the_secret_wherever_it_is_embedded():
    text = f"ELASTUNE_BROKER_URL=redis://:{quote(SECRET, safe='')}@10.0.0.1:6379/0\n"
    for prefix in ("", "x", "xy"):
        wrapped = f"#!/bin/bash\n{prefix}{text}".encode()
        assert leaks({"b64": base64.b64encode(wrapped)})
        assert leaks({"b64url": base64.urlsafe_b64encode(wrapped)})
    assert leaks({"plain": text.encode()}) and leaks({"json": json.dumps([SECRET]).encode()})
    assert not leaks({"redacted": BrokerAddress.parse(text.split("=", 1)[1].strip())
                      .redacted.encode()})


@pytest.fixture(scope="module")
def planted_broker():
    """A Redis on loopback that requires the planted password; its URL."""
    with redis_on_loopback(SECRET) as port:
        yield f"redis://:{quote(SECRET, safe='')}@127.0.0.1:{port}/0"


SWEEP = {
    "name": "planted",
    "trainable": "tests.trainables:careless",
    "metric": "score",
    "mode": "max",
    "space": {"x": {"uniform": [0.0, 1.0]}},
    "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 3, "reduction_factor": 3},
    "num_trials": 4,
    "seed": 3,
    "budget": {"time": "2m", "cost": 1.0},
    "provider": {"type": "local", "workers": 2},
}


@pytest.mark.slow
def test_a_local_sweep_leaves_the_broker_password_nowhere(planted_broker, tmp_path, capfd,
                                                          caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    monkeypatch.syspath_prepend(str(ROOT))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(SWEEP))
    exp = tmp_path / "runs" / EXPERIMENT
    outputs: dict[str, bytes] = {}

    def cli(name: str, *args: str) -> None:
        assert main(list(args)) == 0, capfd.readouterr().err
        out, err = capfd.readouterr()
        outputs[f"elastune {name} (stdout)"] = out.encode()
        outputs[f"elastune {name} (stderr)"] = err.encode()

    cli("run", "run", str(sweep), "--dir", str(exp), "--broker", planted_broker, "--json")
    cli("status", "status", str(exp), "--json")
    cli("ls", "ls", str(tmp_path / "runs"), "--json")
    cli("report", "report", str(exp), "-o", str(tmp_path / "report.html"))
    # A run whose broker is refused: the message names it by its redacted URL only.
    remote = planted_broker.replace("127.0.0.1", "broker.example.com")
    assert main(["run", str(sweep), "--dir", str(tmp_path / "refused"), "--broker", remote]) == 2
    out, err = capfd.readouterr()
    assert "broker_url" in err and "broker.example.com" in err and ":***@" in err
    outputs["elastune run, refused (stderr)"] = (out + err).encode()

    doc = json.loads(outputs["elastune run (stdout)"])
    assert doc["state"] == "finished" and doc["trials"]["total"] == 4
    client = TestClient(make_app(tmp_path / "runs"))
    for url in ("/", "/api/experiments", f"/e/{EXPERIMENT}", f"/api/e/{EXPERIMENT}/summary",
                f"/api/e/{EXPERIMENT}/plans", f"/api/e/{EXPERIMENT}/trials",
                f"/api/e/{EXPERIMENT}/timeline"):
        reply = client.get(url)
        if reply.status_code != 404:   # not every page exists in every version of the API
            assert reply.status_code == 200, url
            outputs[f"dashboard {url}"] = reply.content
    outputs["log records"] = "\n".join(
        f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records).encode()

    blobs = {**files_under(tmp_path), **outputs}
    # The search looked where a leak would be: the store with its plans, the worker logs with
    # the careless trainable's dump of its environment, its checkpoints, the report.
    names = "\n".join(blobs)
    assert "experiment.db (dump)" in names and "report.html" in names
    assert "checkpoints" in names and "/logs/" in names
    store = blobs[str(exp / "experiment.db") + " (dump)"].decode()
    assert "INSERT INTO" in store and "plans" in store
    logs = b"".join(b for n, b in blobs.items() if "/logs/" in n)
    assert b"ELASTUNE_WORKER_NAME" in logs
    assert not leaks(blobs), leaks(blobs)


# -- a cloud sweep's bootstrap --------------------------------------------------------------

def _cloud_sweep(provider: dict) -> object:
    return load_sweep({**SWEEP, "trainable": "tests.trainables:quadratic",
                       "provider": provider})


def _open(sweep, broker_url: str, tmp_path: Path, instance_type: str):
    return open_workers(sweep, BrokerAddress.parse(broker_url), EXPERIMENT, tmp_path,
                        "tests.trainables:quadratic", [str(ROOT)], ["tests.trainables"], None,
                        instance_type, RealClock())


@pytest.mark.slow
def test_an_aws_bootstrap_carries_no_password(aws: FakeAws, planted_broker, tmp_path,
                                              monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.url)
    sweep = _cloud_sweep({"type": "aws", "region": REGION, "instance_types": ["g4dn.xlarge"],
                          "storage": "s3://elastune-planted/runs", "image": aws.image_id()})
    workers = _open(sweep, planted_broker, tmp_path, "g4dn.xlarge")
    ec2, ssm = aws.client("ec2"), aws.client("ssm")
    parameter = f"/elastune/{EXPERIMENT}/broker"
    try:
        (inst,) = workers.provider.launch(1, "g4dn.xlarge", tags={"experiment": EXPERIMENT})
        user_data = ec2.describe_instance_attribute(
            InstanceId=inst.instance_id, Attribute="userData")["UserData"]["Value"]
        script = base64.b64decode(user_data)
        # The password's one place: a SecureString parameter, which the VM reads itself.
        (meta,) = ssm.describe_parameters()["Parameters"]
        assert (meta["Name"], meta["Type"]) == (parameter, "SecureString")
        assert ssm.get_parameter(Name=parameter, WithDecryption=True)[
            "Parameter"]["Value"] == SECRET
        blobs = {
            "user data (as stored)": user_data.encode(),
            "user data (decoded)": script,
            "instances": json.dumps(ec2.describe_instances(), default=str).encode(),
            "tags": json.dumps(ec2.describe_tags(), default=str).encode(),
            "volumes": json.dumps(ec2.describe_volumes(), default=str).encode(),
            "parameter metadata": json.dumps(meta, default=str).encode(),
            "instance record": inst.model_dump_json().encode(),
            "bootstrap": repr(workers.provider.bootstrap).encode(),
        }
        put = 0
        for i, call in enumerate(aws.calls):
            if call.action == "PutParameter":
                put += 1
                continue
            blobs[f"request {i} {call.action}"] = json.dumps(call.params).encode()
        assert put == 1
    finally:
        workers.close()
    assert b"--password-secret" in script and b"ELASTUNE_BROKER_URL=" in script
    assert b"redis://127.0.0.1:" in script and b"--insecure" not in script
    assert not ssm.describe_parameters()["Parameters"]   # deleted when the sweep ends
    assert not leaks(blobs), leaks(blobs)


def test_a_gcp_bootstrap_carries_no_password(planted_broker, tmp_path, monkeypatch):
    pytest.importorskip("google.cloud.compute_v1")
    pytest.importorskip("google.cloud.secretmanager")
    from google.api_core.retry import Retry
    from google.auth.credentials import AnonymousCredentials

    import cloud
    from tests.gce_server import FakeGoogleCloud

    project = "planted-project"
    with FakeGoogleCloud(project) as fake:
        monkeypatch.setattr(cloud, "GcpProvider", functools.partial(
            cloud.GcpProvider, api_endpoint=fake.url, credentials=AnonymousCredentials(),
            retry=Retry(initial=0.01, maximum=0.05, multiplier=2, timeout=5)))
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake.url)
        sweep = _cloud_sweep({"type": "gcp", "project": project, "zone": "us-central1-a",
                              "machine_types": ["g2-standard-4"],
                              "storage": "gs://elastune-planted/runs"})
        workers = _open(sweep, planted_broker, tmp_path, "g2-standard-4")
        try:
            (inst,) = workers.provider.launch(1, "g2-standard-4",
                                              tags={"experiment": EXPERIMENT})
            (body,) = fake.inserted()
            items = {i["key"]: i["value"] for i in body["metadata"]["items"]}
            script = items["startup-script"].encode()
            # The password's one place: a Secret Manager secret, which the VM reads itself.
            (secret,) = fake.secrets.values()
            assert secret[1] == [SECRET.encode()]
            blobs = {
                "startup script": script,
                "metadata": json.dumps(body["metadata"]).encode(),
                "labels": json.dumps(body["labels"]).encode(),
                "instance record": inst.model_dump_json().encode(),
                "listed": json.dumps([i.model_dump(mode="json")
                                      for i in workers.provider.list()]).encode(),
                "secret metadata": json.dumps(secret[0], default=str).encode(),
                "bootstrap": repr(workers.provider.bootstrap).encode(),
            }
            added = 0
            for i, r in enumerate(fake.requests):
                if r.path.endswith(":addVersion"):
                    added += 1
                    continue
                body_bytes = r.body if isinstance(r.body, bytes) else json.dumps(
                    r.body, default=str).encode()
                blobs[f"request {i} {r.method} {r.path}"] = (
                    r.path.encode() + json.dumps(r.query).encode() + body_bytes)
            assert added == 1
        finally:
            workers.close()
        assert not fake.secrets   # deleted when the sweep ends
    assert b"--password-secret gcpsm:" in script and b"redis://127.0.0.1:" in script
    assert not leaks(blobs), leaks(blobs)
