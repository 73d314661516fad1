"""The startup script a fresh VM runs (EC2 user data, GCE ``startup-script`` metadata).

It installs the project into a virtual environment and starts one ``elastune worker`` named
after the VM (its instance id or name, read from the metadata service), against the
controller's broker. When the script ends for any reason the VM shuts itself down.
The script carries no secret: the worker reads the broker password from
the cloud's secret store (SSM Parameter Store on AWS, Secret Manager on GCP) with the VM's own
identity (instance profile / service account). Checkpoints and the code bundle live under
``storage_uri``; the controller names them in each segment.
"""

from __future__ import annotations

import shlex
from typing import Literal

from cloud._provider import Bootstrap
from worker.records import TIMEOUT_EXIT_CODE

Cloud = Literal["aws", "gcp"]


def secret_uri(cloud: Cloud, secret_name: str, region: str | None = None) -> str:
    """The worker's ``--password-secret`` URI for a secret in this cloud's store."""
    if cloud == "aws":
        name = secret_name if secret_name.startswith("/") else f"/{secret_name}"
        return f"ssm:{name}" + (f"?region={region}" if region else "")
    return f"gcpsm:{secret_name}"


def startup_script(bootstrap: Bootstrap, cloud: Cloud, region: str | None = None) -> str:
    """A bash script for user data / startup-script metadata. Contains no password."""
    if "@" in bootstrap.broker_url.partition("://")[2].partition("/")[0]:
        raise ValueError("Bootstrap.broker_url must not carry credentials; the VM reads the "
                         "password from the secret store")
    q = shlex.quote
    env_lines = "".join(f"export {k}={q(v)}\n" for k, v in sorted(bootstrap.env.items()))
    flags = "".join(f" --preload {q(m)}" for m in bootstrap.preload)
    if bootstrap.insecure_broker:
        flags += " --insecure"   # the user accepted a broker without TLS on the controller
    return f"""#!/bin/bash
# elastune worker bootstrap: install, then run one worker named after this VM.
set -euo pipefail
exec >>/var/log/elastune-worker.log 2>&1
# Whatever ends this script (a failed install, a crash, the worker leaving because its
# controller is gone), the VM powers off: EC2 then terminates it (launched with
# InstanceInitiatedShutdownBehavior=terminate), GCE stops it. No idle VM keeps billing.
trap 'shutdown -h now' EXIT
export ELASTUNE_BROKER_URL={q(bootstrap.broker_url)}
export ELASTUNE_STORAGE_URI={q(bootstrap.storage_uri)}
{env_lines}if [ ! -x /opt/elastune/bin/elastune ]; then
  python3 -m venv /opt/elastune
  /opt/elastune/bin/pip install --quiet --upgrade pip
  /opt/elastune/bin/pip install --quiet {q(bootstrap.install)}
fi
# Exit status {TIMEOUT_EXIT_CODE}: the worker gave up on a trainable that hung past its segment
# timeout; it starts again on the same VM (and registers again) rather than costing a boot.
status={TIMEOUT_EXIT_CODE}
while [ "$status" -eq {TIMEOUT_EXIT_CODE} ]; do
  status=0
  /opt/elastune/bin/elastune worker --name-from-metadata {cloud} \\
    --password-secret {q(secret_uri(cloud, bootstrap.secret_name, region))} \\
    --slots {int(bootstrap.slots)}{flags} || status=$?
done
"""
