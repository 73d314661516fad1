"""``elastune worker``: a Celery worker whose slots are its GPUs, on one queue of its own."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time

from celery import signals

from worker._app import make_app
from worker._broker import (
    RIDE_OUT_S,
    BrokerAddress,
    BrokerURLError,
    check_broker,
    stop_waiting,
)
from worker._interruption import watch_interruption
from worker._lifetime import die_with_parent
from worker._metadata import instance_name
from worker._pool import join_pool, leave_pool
from worker._secrets import read_secret
from worker._slots import SlotPool, slots_key
from worker._task import MAIN_PID_ENV, POOL_ENV, set_client
from worker._watchdog import watch_controller

REGISTRY_KEY = "elastune:workers"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="elastune worker")
    p.add_argument("--broker", default=os.environ.get("ELASTUNE_BROKER_URL"),
                   help="Redis URL (or set ELASTUNE_BROKER_URL, which keeps it out of `ps`)")
    p.add_argument("--queue", default=None, help="queue to consume (default: the worker name)")
    p.add_argument("--slots", type=int, default=None,
                   help="GPU slots of this worker (default: the number of --gpus, else 1)")
    p.add_argument("--gpus", default=None, metavar="IDS",
                   help="the GPUs this worker may use, e.g. 0,1 (a segment sees its share "
                        "of them as CUDA_VISIBLE_DEVICES)")
    p.add_argument("--pool", default=None, metavar="NAME",
                   help="join the shared pool NAME: run segments of any sweep whose provider "
                        "is {type: pool, name: NAME}, until stopped (SIGTERM drains)")
    p.add_argument("--name", default=None, help="worker name (default: host-pid)")
    p.add_argument("--preload", action="append", default=[],
                   help="module to import before taking work (the trainable's module); the "
                        "working directory is on the import path, as for `elastune run`")
    p.add_argument("--password-secret", default=None, metavar="URI",
                   help="read the broker password from a secret store: env:VAR, file:PATH, "
                        "ssm:/NAME?region=R or gcpsm:projects/P/secrets/S/versions/V")
    p.add_argument("--name-from-metadata", choices=["aws", "gcp"], default=None,
                   help="take the worker name (and queue) from the VM's instance metadata")
    p.add_argument("--controller-key", default=os.environ.get("ELASTUNE_CONTROLLER_KEY"),
                   help="the controller's heartbeat key; exit when it has been gone for "
                        "--orphan-timeout-s (VM workers, so the VM powers off)")
    p.add_argument("--orphan-timeout-s", type=float,
                   default=float(os.environ.get("ELASTUNE_ORPHAN_TIMEOUT_S", "300")))
    p.add_argument("--insecure", action="store_true",
                   help="accept a broker without a password, or a remote one without TLS "
                        "(rediss://); refused otherwise")
    p.add_argument("--loglevel", default="WARNING")
    p.add_argument("--parent-pid", type=int, default=None,
                   help="exit when this process (the controller that started us) exits")
    args = p.parse_args(argv)
    if not args.broker:
        p.error("--broker is required (or set ELASTUNE_BROKER_URL)")
    try:
        args.gpus = ([int(g) for g in args.gpus.split(",")] if args.gpus else [])
    except ValueError:
        p.error(f"--gpus must be GPU indices like 0,1; got {args.gpus!r}")
    if args.gpus and (len(set(args.gpus)) != len(args.gpus) or min(args.gpus) < 0):
        p.error(f"--gpus must be distinct indices >= 0; got {args.gpus}")
    if args.slots is None:
        args.slots = len(args.gpus) or 1
    if args.slots < 1:
        p.error(f"--slots must be >= 1, got {args.slots}")
    if args.gpus and args.slots != len(args.gpus):
        p.error(f"--slots {args.slots} and --gpus {args.gpus}: one slot per GPU")
    if args.pool is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", args.pool):
        p.error(f"--pool must be a name of letters, digits, '.', '_' and '-'; got {args.pool!r}")
    if not args.orphan_timeout_s > 0:
        p.error(f"--orphan-timeout-s must be > 0, got {args.orphan_timeout_s}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    # The URL (and so the password) is held in ``address`` from here on; the trainable this
    # process runs, and whatever it starts, do not inherit it.
    os.environ.pop("ELASTUNE_BROKER_URL", None)
    try:
        address = BrokerAddress.parse(args.broker)
        if args.password_secret:
            address = address.with_password(read_secret(args.password_secret))
            if args.password_secret.startswith("env:"):
                os.environ.pop(args.password_secret[4:], None)   # as for the URL above
        check_broker(address, insecure=args.insecure)
    except BrokerURLError as exc:
        print(f"elastune worker: error: {exc}", file=sys.stderr)
        return 2
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    if args.name_from_metadata and not args.name:
        args.name = instance_name(args.name_from_metadata)
    name = args.name or f"{socket.gethostname()}-{os.getpid()}"
    queue = args.queue or name
    os.environ["ELASTUNE_WORKER_NAME"] = name
    os.environ[MAIN_PID_ENV] = str(os.getpid())
    if args.pool:
        os.environ[POOL_ENV] = args.pool
    # `python -m worker` has the working directory on sys.path, the `elastune` script does not:
    # put it there, so a trainable beside the user finds its module as it does for `run`.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in args.preload:
        importlib.import_module(module)
    app = make_app(address)
    client = address.client(ride_out_s=RIDE_OUT_S)
    SlotPool(client, name).reset(args.slots, args.gpus or None)
    if args.controller_key:
        watch_controller(address.client(), args.controller_key, args.orphan_timeout_s,
                         worker=name)
    if args.name_from_metadata:
        watch_interruption(args.name_from_metadata, address.client(ride_out_s=RIDE_OUT_S), name,
                           poll_s=float(os.environ.get("ELASTUNE_NOTICE_POLL_S", "5")))

    main_pid = os.getpid()
    keep_alive: list[threading.Event] = []
    # Started under `nohup` (hangups ignored): Celery installs its restart-on-hangup handler
    # when not on a terminal, so logging out would restart the worker; keep ignoring it.
    hangup_ignored = signal.getsignal(signal.SIGHUP) is signal.SIG_IGN

    @signals.worker_process_init.connect(weak=False)
    def _child_init(**_: object) -> None:
        if os.getpid() != main_pid:
            # A prefork pool process goes with its worker. The solo pool sends this signal in
            # the worker's own process, which follows its parent only when --parent-pid asks.
            die_with_parent()
        set_client(address.client(ride_out_s=RIDE_OUT_S))

    @signals.worker_ready.connect(weak=False)
    def _ready(**_: object) -> None:
        if hangup_ignored:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        client.hset(REGISTRY_KEY, name, json.dumps({
            "queue": queue, "slots": args.slots, "pid": os.getpid(),
            "host": socket.gethostname(), "ts": time.time()}))
        if args.pool:
            # Taking work now: the sweeps on the pool see it at their next look.
            keep_alive.append(join_pool(client, args.pool, name, queue, args.slots, args.gpus))

    @signals.worker_shutting_down.connect(weak=False)
    def _shutting_down(**_: object) -> None:
        stop_waiting()   # a segment still running ends now if the broker is gone

    @signals.worker_shutdown.connect(weak=False)
    def _gone(**_: object) -> None:
        try:
            # Not the patient client: a worker shutting down because its controller (and the
            # broker with it) died must not wait out a broker that will not come back.
            for done in keep_alive:
                done.set()
            gone = address.client()
            if args.pool:
                leave_pool(gone, args.pool, name)
            gone.hdel(REGISTRY_KEY, name)
            gone.delete(slots_key(name))
        except Exception:  # the broker may be gone first; registration is advisory
            pass

    set_client(client)
    pool = ["-P", "solo"] if args.slots == 1 else ["-P", "prefork", "-c", str(args.slots)]
    app.worker_main(argv=[
        "worker", "-Q", queue, "-n", f"{name}@%h", "-l", args.loglevel,
        "--without-gossip", "--without-mingle", "--without-heartbeat", *pool,
    ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
