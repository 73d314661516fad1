"""Who am I? The VM's name from the cloud's instance metadata service.

A worker on a VM takes its instance id (AWS, IMDSv2) or instance name (GCP) as its worker name
and queue, so the controller, which knows instances by these ids, can route work to it.
Hand-written: two GETs with the standard library; the SDKs do not expose IMDS for this.
"""

from __future__ import annotations

import os
import urllib.request

AWS_IMDS = "http://169.254.169.254"
GCP_METADATA = "http://metadata.google.internal/computeMetadata/v1"


def _get(url: str, headers: dict[str, str], method: str = "GET", timeout: float = 2.0) -> str:
    req = urllib.request.Request(url, headers=headers, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - fixed http URLs
        return resp.read().decode().strip()


def instance_name(cloud: str) -> str:
    """This VM's instance id (``aws``) or name (``gcp``); ``ELASTUNE_METADATA_URL`` overrides
    the metadata endpoint (tests)."""
    if cloud == "aws":
        base = os.environ.get("ELASTUNE_METADATA_URL", AWS_IMDS)
        token = _get(f"{base}/latest/api/token",
                     {"X-aws-ec2-metadata-token-ttl-seconds": "300"}, method="PUT")
        return _get(f"{base}/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token})
    if cloud == "gcp":
        base = os.environ.get("ELASTUNE_METADATA_URL", GCP_METADATA)
        return _get(f"{base}/instance/name", {"Metadata-Flavor": "Google"})
    raise ValueError(f"unknown cloud {cloud!r}; allowed: aws, gcp")
