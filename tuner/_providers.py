"""From a sweep's ``provider`` block to a running provider: local worker processes, or AWS/GCP
VMs that bootstrap themselves into workers of this experiment.

For the clouds this also sets up what the VMs need before the first launch and takes it down
after the last terminate: the broker password in the cloud's secret store (never in user data),
the object storage that holds checkpoints and the code bundle, and a last sweep for instances
of this experiment that are still alive (so no paid VM outlives the sweep, whatever ended it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from budgets import RealClock
from cloud import (
    Bootstrap,
    CloudProvider,
    LocalProvider,
    Provider,
    ProviderError,
    WarmPool,
    warm_scope,
)
from tuner._beacon import ControllerBeacon, controller_key
from tuner._config import SweepConfig
from tuner._errors import ConfigError
from worker import BrokerAddress

# How long, at most, from "stop" to a VM no longer billing: the controller's budget watchdog
# stops segments and terminates this long before spend could reach the cost budget.
LOCAL_REACTION_S = 3.0
CLOUD_REACTION_S = 30.0
CLOUD_INSTANCE_CHECK_S = 5.0


@dataclass
class Workers:
    """A provider ready to launch, and what the controller needs to use it."""

    provider: Provider
    checkpoint_root: str
    trainable: str
    instance_type: str
    settings: dict[str, Any]       # Settings fields
    teardown: list[Callable[[], Any]] = field(default_factory=list)
    # The workers outlive the sweep (a shared pool): its end forgets none of them.
    keep_workers: bool = False
    # VMs kept warm between sweeps of one setup on one broker (cloud providers).
    warm: WarmPool | None = None

    def close(self) -> None:
        """Undo the setup (delete the broker secret, terminate leaked VMs); best effort, all
        steps run even if one fails."""
        errors = []
        for step in reversed(self.teardown):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - every step must get its chance
                errors.append(exc)
        self.teardown.clear()
        if errors:
            raise errors[0]


def check_cloud_broker(sweep: SweepConfig, address: BrokerAddress | None) -> None:
    """A cloud sweep needs a broker its VMs can reach, with a password; fail before anything
    is started or written."""
    if sweep.provider.type == "local":
        return
    if sweep.provider.type == "pool":
        if address is None:
            raise ConfigError(
                "broker_url", f"a pool sweep runs on the workers that joined pool "
                f"{sweep.provider.name!r} on a broker: give that broker (--broker URL)")
        return
    if address is None:
        raise ConfigError(
            "broker_url",
            f"a {sweep.provider.type} sweep needs a broker its VMs can reach, e.g. "
            "rediss://:PASSWORD@broker.example.com:6380/0 (the embedded one listens on a "
            "local socket only)")
    if not address.password:
        # Also with insecure_broker: the VMs read the password from the cloud's secret store.
        raise ConfigError("broker_url", f"{address.redacted}: a broker that VMs reach needs a "
                          "password")
    if sweep.provider.storage is None:
        bucket = "s3://my-bucket/elastune" if sweep.provider.type == "aws" else \
            "gs://my-bucket/elastune"
        raise ConfigError("provider.storage",
                          f"a {sweep.provider.type} sweep keeps checkpoints and code in object "
                          f"storage; set e.g. storage: {bucket}")


def checkpoint_root(sweep: SweepConfig, experiment_id: str, exp_dir: Path) -> str:
    """Where the experiment's trials keep their checkpoints: a folder in the experiment
    directory, or a prefix in the cloud sweep's object storage."""
    if sweep.provider.type == "local" or sweep.provider.storage is None:
        return str(exp_dir / "checkpoints")
    return f"{sweep.provider.storage.rstrip('/')}/{experiment_id}/checkpoints"


def open_workers(sweep: SweepConfig, address: BrokerAddress, experiment_id: str, exp_dir: Path,
                 trainable: str, code_roots: list[str], preload: list[str],
                 bundle_fn: Callable[..., Any] | None, instance_type: str | None,
                 clock: RealClock, *, insecure_broker: bool = False,
                 taken: Collection[str] = ()) -> Workers:
    """``insecure_broker``: the user accepted a broker that ``check_broker`` would refuse; the
    workers are told so (``elastune worker --insecure``), or they would refuse it too.
    ``taken``: the instance ids earlier runs used (local workers are named apart from them)."""
    if sweep.provider.type == "local":
        return _local(sweep, address, experiment_id, exp_dir, trainable, code_roots, preload,
                      bundle_fn, clock, insecure_broker, taken)
    if sweep.provider.type == "pool":
        return _pool(sweep, address, experiment_id, exp_dir, trainable, bundle_fn, clock)
    return _cloud(sweep, address, experiment_id, trainable, preload, bundle_fn, instance_type,
                  clock, insecure_broker)


def _local(sweep: SweepConfig, address: BrokerAddress, experiment_id: str, exp_dir: Path,
           trainable: str, code_roots: list[str], preload: list[str],
           bundle_fn: Callable[..., Any] | None, clock: RealClock,
           insecure_broker: bool = False, taken: Collection[str] = ()) -> Workers:
    from worker import write_bundle

    if bundle_fn is not None:
        (exp_dir / "code").mkdir(exist_ok=True)
        trainable = write_bundle(bundle_fn, str(exp_dir / "code" / "trainable.pkl"))
    provider = LocalProvider(
        address.url, slots=sweep.provider.slots, price_per_hour=sweep.provider.price_per_hour,
        workdir=os.getcwd(), log_dir=exp_dir / "logs", python_path=code_roots,
        preload=preload, prefix=f"{experiment_id}-w", clock=clock,
        insecure_broker=insecure_broker, taken=taken)
    return Workers(provider, checkpoint_root(sweep, experiment_id, exp_dir), trainable, "local",
                   {"reaction_s": LOCAL_REACTION_S,
                    "heartbeat_timeout_s": sweep.provider.heartbeat_timeout_s})


def _pool(sweep: SweepConfig, address: BrokerAddress, experiment_id: str, exp_dir: Path,
          trainable: str, bundle_fn: Callable[..., Any] | None, clock: RealClock) -> Workers:
    """The workers that joined the pool: the trainable reaches them by its import path (their
    --preload, working directory or PYTHONPATH) or, defined in a notebook or a script, as a
    code bundle. The bundle and the checkpoints live in ``provider.storage`` (object storage
    every worker reaches) or else in the experiment directory, which the workers must then
    reach at the same path (a shared filesystem)."""
    from cloud import PoolProvider
    from worker import write_bundle
    from worker._storage import open_store
    from worker._trainable import BUNDLE_PREFIX

    p = sweep.provider
    assert p.name is not None
    # Absolute: a pool worker runs in a working directory of its own (on another machine, the
    # same path on a shared filesystem), where a relative one (the default experiments/...)
    # would name another folder.
    exp_dir = exp_dir.resolve()
    if bundle_fn is not None:
        (exp_dir / "code").mkdir(exist_ok=True)
        trainable = write_bundle(bundle_fn, str(exp_dir / "code" / "trainable.pkl"))
    elif trainable.startswith(BUNDLE_PREFIX):   # a resumed sweep's stored bundle
        trainable = BUNDLE_PREFIX + str(Path(trainable[len(BUNDLE_PREFIX):]).resolve())
    if p.storage is not None:
        root = f"{p.storage.rstrip('/')}/{experiment_id}"
        try:   # at the edge: a bucket this machine cannot write to is bad input
            store = open_store(root)
            store.put("sweep.txt", f"elastune experiment {experiment_id}\n".encode())
            if trainable.startswith(BUNDLE_PREFIX):
                # (the local copy stays for `resume`; the workers read this one)
                store.put("code/trainable.pkl",
                          Path(trainable[len(BUNDLE_PREFIX):]).read_bytes())
                trainable = f"{BUNDLE_PREFIX}{root}/code/trainable.pkl"
        except (OSError, ImportError) as exc:
            raise ConfigError("provider.storage", f"cannot write to {root}: {exc}") from exc
    provider = PoolProvider(address.client(), p.name, experiment_id,
                            price_per_hour=p.price_per_hour, clock=clock)
    hint = (f"start one with: elastune worker --broker URL --pool {p.name} "
            "(see the guide on scaling out)")
    return Workers(provider, checkpoint_root(sweep, experiment_id, exp_dir), trainable, "pool",
                   {"reaction_s": LOCAL_REACTION_S, "instance_check_s": 0.5,
                    "heartbeat_timeout_s": p.heartbeat_timeout_s,
                    "boot_timeout_s": p.wait_for_workers_s, "min_workers": p.min_workers,
                    "boot_hint": hint},
                   [provider.close], keep_workers=True)


def _install_spec(extra: str) -> str:
    """What a VM pip-installs: this version of elastune with the cloud's extra (its workers
    keep checkpoints in the cloud's object storage)."""
    try:
        return f"elastune[{extra}]=={metadata.version('elastune')}"
    except metadata.PackageNotFoundError:
        return f"elastune[{extra}]"


def _cloud(sweep: SweepConfig, address: BrokerAddress, experiment_id: str, trainable: str,
           preload: list[str], bundle_fn: Callable[..., Any] | None, instance_type: str | None,
           clock: RealClock, insecure_broker: bool = False) -> Workers:
    from worker import write_bundle

    p = sweep.provider
    assert p.storage is not None and address.password
    storage = f"{p.storage.rstrip('/')}/{experiment_id}"
    types = list(p.instance_types or []) if p.type == "aws" else list(p.machine_types or [])
    if instance_type is not None and instance_type not in types:
        types.insert(0, instance_type)
    if not types:
        raise ConfigError(f"provider.{'instance_types' if p.type == 'aws' else 'machine_types'}",
                          "name at least one instance type")
    first = instance_type or types[0]
    secret = (f"/elastune/{experiment_id}/broker" if p.type == "aws"
              else f"elastune-{experiment_id}-broker")
    provider: CloudProvider
    region = p.region
    if p.type == "aws":
        from cloud import AwsProvider

        region = region or "us-east-1"
        try:
            provider = AwsProvider(region, types, image_id=p.image, zones=p.zones,
                                   iam_instance_profile=p.iam_instance_profile,
                                   security_group_ids=p.security_group_ids or (),
                                   subnet_ids=p.subnet_ids, key_name=p.key_name, clock=clock,
                                   live_spot_prices=True)
        except ValueError as exc:  # an instance type or region the catalog cannot price
            raise ConfigError("provider.instance_types", str(exc)) from exc
    else:
        from cloud import GcpProvider

        if p.project is None:
            raise ConfigError("provider.project", "a gcp sweep needs the project id")
        zones = p.zones or ([p.zone] if p.zone else None)
        if not zones:
            raise ConfigError("provider.zone", "a gcp sweep needs a zone, e.g. us-central1-a")
        kwargs: dict[str, Any] = {}
        if p.image:
            kwargs["image"] = p.image
        if p.network:
            kwargs["network"] = p.network
        try:
            provider = GcpProvider(p.project, zones, types, service_account=p.service_account,
                                   clock=clock, **kwargs)
        except ValueError as exc:
            raise ConfigError("provider.machine_types", str(exc)) from exc
    workers = Workers(provider, f"{storage}/checkpoints", trainable, first, {
        "reaction_s": CLOUD_REACTION_S, "instance_check_s": CLOUD_INSTANCE_CHECK_S,
        "register_timeout_s": p.register_timeout_s,
        "boot_timeout_s": 2 * p.register_timeout_s,
        "heartbeat_timeout_s": p.heartbeat_timeout_s})
    try:
        provider.ensure_bucket(p.storage.split("/")[2])
        if bundle_fn is not None:
            workers.trainable = write_bundle(bundle_fn, f"{storage}/code/trainable.pkl")
        # What the VM reads: the parameter name (aws) or the secret's version path (gcp).
        secret_ref = provider.put_secret(secret, address.password) or secret
        workers.teardown.append(lambda: provider.delete_secret(secret))
        # Whatever ended the sweep, no VM of this experiment stays up and billing.
        workers.teardown.append(lambda: provider.cleanup(experiment_id))
        # VMs power off when the controller is gone (killed, or its machine lost).
        beacon = ControllerBeacon(address, controller_key(experiment_id),
                                  ttl_s=min(60.0, p.orphan_timeout_s)).start()
        workers.teardown.append(beacon.stop)
        # Which warm VMs this sweep may take up: those booted with the same setup.
        setup = {"type": p.type, "region": region, "zones": p.zones, "zone": p.zone,
                 "project": p.project, "image": p.image, "install": p.install or
                 _install_spec(p.type), "storage": p.storage, "preload": sorted(preload),
                 "iam_instance_profile": p.iam_instance_profile,
                 "security_group_ids": p.security_group_ids, "subnet_ids": p.subnet_ids,
                 "key_name": p.key_name, "service_account": p.service_account,
                 "network": p.network, "insecure_broker": insecure_broker}
        warm_client = address.client()
        workers.teardown.append(warm_client.close)
        workers.warm = WarmPool(warm_client, warm_scope(setup), p.keep_warm_s)
        provider.bootstrap = Bootstrap(
            broker_url=replace(address, password=None).url, secret_name=secret_ref,
            storage_uri=storage, install=p.install or _install_spec(p.type),
            slots=provider.slots(first), preload=tuple(preload),
            insecure_broker=insecure_broker,
            env={"ELASTUNE_CONTROLLER_KEY": beacon.key,
                 "ELASTUNE_ORPHAN_TIMEOUT_S": f"{p.orphan_timeout_s:g}"})
    except ProviderError:
        with contextlib.suppress(Exception):
            workers.close()
        raise
    return workers
