"""The pool's deployment examples as a user copies them: the Kubernetes Deployment and the
systemd unit in ``examples/`` start ``elastune worker`` with arguments its own parser accepts,
join a pool, take the broker URL from a secret and drain on SIGTERM; the scaling-out guide
shows both files as they are, and its worker commands parse too."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from worker._main import _parse

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "examples" / "k8s-pool-workers.yaml"
UNIT = ROOT / "examples" / "elastune-worker.service"
GUIDE = ROOT / "docs" / "guides" / "scaling-out.md"
URL = "rediss://:pw@broker.example.internal:6380/0"


@pytest.fixture(autouse=True)
def broker_from_env(monkeypatch):
    # As in the examples: the URL comes from the environment, not the command line.
    monkeypatch.setenv("ELASTUNE_BROKER_URL", URL)


def _worker_args(argv: list[str]):
    """``elastune worker ARGS`` (the script by any path) parsed by the worker's parser."""
    assert Path(argv[0]).name == "elastune" and argv[1] == "worker", argv
    assert not any(a.startswith("--broker") for a in argv), "the URL belongs in a secret"
    args = _parse(argv[2:])
    assert args.broker == URL
    assert args.pool, f"{argv} joins no pool"
    return args


def _deployment() -> dict:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d is not None]
    deployments = [d for d in docs if d.get("kind") == "Deployment"]
    assert len(deployments) == 1
    return deployments[0]


def test_the_kubernetes_deployment_runs_pool_workers_that_drain():
    dep = _deployment()
    assert dep["apiVersion"] == "apps/v1"
    spec = dep["spec"]
    assert spec["replicas"] >= 1
    pod = spec["template"]
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    # Longer than Kubernetes' default 30 s, so a segment can finish before the SIGKILL.
    assert pod["spec"]["terminationGracePeriodSeconds"] > 30
    [container] = pod["spec"]["containers"]
    argv = [str(a) for a in container["command"] + container.get("args", [])]
    args = _worker_args(argv)
    assert args.pool == "gpu-a" and args.preload == ["yourmodule"] and args.slots == 1
    # One slot per GPU the pod is given.
    assert container["resources"]["limits"]["nvidia.com/gpu"] == args.slots
    env = {e["name"]: e for e in container["env"]}
    broker = env["ELASTUNE_BROKER_URL"]
    assert "value" not in broker
    ref = broker["valueFrom"]["secretKeyRef"]
    assert ref["name"] and ref["key"]
    # The broker's certificate comes from the same secret, where SSL_CERT_FILE points.
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert set(mounts) <= set(volumes)
    cert = Path(env["SSL_CERT_FILE"]["value"])
    [ca] = [n for n, m in mounts.items() if cert.parent == Path(m["mountPath"])]
    assert volumes[ca]["secret"]["secretName"] == ref["name"]
    assert {i["path"] for i in volumes[ca]["secret"]["items"]} == {cert.name}


def _unit() -> dict[str, dict[str, list[str]]]:
    """The unit's sections, each key with its values (systemd allows a key more than once)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None, line
        key, value = line.split("=", 1)
        # systemd has no comments after a value: a '#' there would be part of it.
        assert "#" not in value, line
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_systemd_unit_runs_a_pool_worker_that_drains_and_restarts_on_failure():
    unit = _unit()
    service = unit["Service"]
    [exec_start] = service["ExecStart"]
    args = _worker_args(shlex.split(exec_start))
    assert Path(shlex.split(exec_start)[0]).is_absolute()   # systemd wants a full path
    assert args.slots == len(args.gpus) == 2
    assert service["EnvironmentFile"] and service["EnvironmentFile"][0].startswith("/")
    assert service["Restart"] == ["on-failure"]
    assert service["KillSignal"] == ["SIGTERM"]
    # SIGTERM to the worker's main process only; the drain may take longer than the 90 s
    # systemd waits by default.
    assert service["KillMode"] == ["mixed"]
    assert int(service["TimeoutStopSec"][0]) > 90
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_the_guide_shows_the_examples_as_they_are_and_its_worker_commands_parse():
    guide = GUIDE.read_text()
    for path in (MANIFEST, UNIT):
        rel = path.relative_to(ROOT)
        shown = re.search(rf'```\w+ title="{re.escape(str(rel))}"\n(.*?)```', guide, re.S)
        assert shown, f"the guide does not show {rel}"
        assert shown.group(1) == path.read_text(), f"the guide's copy of {rel} differs"
    commands = [line.split("#")[0].strip()
                for block in re.findall(r"```bash\n(.*?)```", guide, re.S)
                for line in block.replace("\\\n", " ").splitlines()
                if re.search(r"\belastune worker\b", line) and "[" not in line]
    assert len(commands) >= 1
    for command in commands:
        argv = shlex.split(command)
        _worker_args(argv[argv.index("worker") - 1:])
