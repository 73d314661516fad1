"""Spot interruption notices from the instance metadata service.

A cloud warns a spot VM before it takes it back: AWS publishes
``latest/meta-data/spot/instance-action`` (404 until then; two minutes' notice), GCE flips
``instance/preempted`` to ``TRUE`` (about 30 s). A thread on the worker polls it and, on notice,
records it in the broker (:data:`NOTICE_KEY`, by worker name), once. The controller then sends
no more work to the VM, asks its segments to stop and checkpoint while the VM still runs, and
launches the replacement before the VM is gone. Hand-written: plain GETs with the standard
library, as for the instance name; the SDKs do not read instance metadata.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error

import redis

from worker._metadata import AWS_IMDS, GCP_METADATA, _get

NOTICE_KEY = "elastune:notices"
log = logging.getLogger(__name__)


def interruption_notice(cloud: str) -> str | None:
    """The cloud's interruption notice for this VM (its text), or None while there is none."""
    if cloud == "aws":
        base = os.environ.get("ELASTUNE_METADATA_URL", AWS_IMDS)
        token = _get(f"{base}/latest/api/token",
                     {"X-aws-ec2-metadata-token-ttl-seconds": "300"}, method="PUT")
        try:
            return _get(f"{base}/latest/meta-data/spot/instance-action",
                        {"X-aws-ec2-metadata-token": token})
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
    if cloud == "gcp":
        base = os.environ.get("ELASTUNE_METADATA_URL", GCP_METADATA)
        flag = _get(f"{base}/instance/preempted", {"Metadata-Flavor": "Google"})
        return "preempted" if flag.upper() == "TRUE" else None
    raise ValueError(f"unknown cloud {cloud!r}; allowed: aws, gcp")


def watch_interruption(cloud: str, client: redis.Redis, name: str,
                       poll_s: float = 5.0) -> threading.Thread:
    """Poll for a notice every ``poll_s`` in a daemon thread; record the first one."""

    def run() -> None:
        while True:
            try:
                notice = interruption_notice(cloud)
            except Exception as exc:  # noqa: BLE001 - metadata hiccups must not end the worker
                log.debug("interruption notice: %s", exc)
                notice = None
            if notice is not None:
                log.warning("the cloud will take this VM back: %s", notice)
                client.hset(NOTICE_KEY, name, json.dumps({"ts": time.time(), "notice": notice}))
                return
            time.sleep(poll_s)

    thread = threading.Thread(target=run, name="interruption-notice", daemon=True)
    thread.start()
    return thread
