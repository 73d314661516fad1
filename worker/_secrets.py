"""Read the broker password from where the controller put it, never from a command line.

URIs: ``env:VAR`` (an environment variable), ``file:/path`` (a file, e.g. mode 0600),
``ssm:/name?region=us-east-1`` (an AWS SSM Parameter Store SecureString, via boto3) and
``gcpsm:projects/P/secrets/S/versions/latest`` (a GCP Secret Manager version). The cloud SDKs
are imported only when their scheme is used.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


class SecretError(RuntimeError):
    """The secret could not be read (the message names the URI's scheme and name, never a value)."""


def read_secret(uri: str) -> str:
    scheme, _, rest = uri.partition(":")
    if scheme == "env":
        value = os.environ.get(rest)
        if value is None:
            raise SecretError(f"environment variable {rest} is not set")
        return value
    if scheme == "file":
        try:
            return Path(rest).read_text().strip()
        except OSError as exc:
            raise SecretError(f"cannot read secret file {rest}: {exc.strerror}") from None
    if scheme == "ssm":
        from worker._secret_ssm import read_ssm

        parts = urlsplit(uri)
        query = parse_qs(parts.query)
        region = query.get("region", [None])[0]
        endpoint = query.get("endpoint", [None])[0]
        return read_ssm(parts.path, region=region, endpoint_url=endpoint)
    if scheme == "gcpsm":
        from worker._secret_gcp import read_gcp_secret

        parts = urlsplit(uri)
        endpoint = parse_qs(parts.query).get("endpoint", [None])[0]
        return read_gcp_secret(parts.path, endpoint=endpoint)
    raise SecretError(f"unknown secret scheme {scheme!r}; allowed: env, file, ssm, gcpsm")
