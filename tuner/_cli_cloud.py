"""``elastune cloud ls|cleanup``: find (and terminate) VMs that elastune launched, by tag.

Every instance carries the experiment id as a tag (AWS) or label (GCP), so leaks are found
even when the controller that launched them is gone.
"""

from __future__ import annotations

from typing import Any

from tuner._errors import ConfigError
from worker.records import Instance, InstanceState


def cloud_provider(kind: str, region: str | None, zone: str | None, project: str | None) -> Any:
    if kind == "aws":
        if zone is not None:
            raise ConfigError("--zone", "is for gcp; aws takes --region")
        from cloud import AwsProvider

        return AwsProvider(region or "us-east-1", [])
    if kind == "gcp":
        if project is None:
            raise ConfigError("--project", "gcp needs the project id")
        if zone is None:
            raise ConfigError("--zone", "gcp needs a zone, e.g. us-central1-a")
        from cloud import GcpProvider

        return GcpProvider(project, [zone], [])
    raise ConfigError("--provider", f"is {kind!r}; allowed: aws, gcp")


def instance_row(inst: Instance) -> dict[str, Any]:
    return {"instance_id": inst.instance_id, "experiment": inst.tags.get("experiment"),
            "instance_type": inst.instance_type, "spot": inst.spot, "zone": inst.zone,
            "state": str(inst.state), "preempted": inst.preempted,
            "launched_at": inst.launched_at}


def live(instances: list[Instance]) -> list[Instance]:
    return [i for i in instances if i.state != InstanceState.TERMINATED]
