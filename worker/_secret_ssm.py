"""Read a secret from AWS SSM Parameter Store (a SecureString, decrypted) with boto3.

A worker VM reads the broker password here with its instance profile, so the password never
travels in user data. Errors name the parameter and the reason, never the value.
"""

from __future__ import annotations

from worker._secrets import SecretError

_MAX_ATTEMPTS = 5
_HINTS = {
    "ParameterNotFound": "no such parameter (was the sweep's secret deleted, or is the "
                         "region wrong?)",
    "ParameterVersionNotFound": "no such version of the parameter",
    "AccessDeniedException": "these credentials may not read it (the instance profile needs "
                             "ssm:GetParameter on it and kms:Decrypt on its key)",
    "AccessDenied": "these credentials may not read it",
    "UnrecognizedClientException": "the AWS credentials are not valid",
    "InvalidKeyId": "its KMS key cannot be used to decrypt it",
}


def read_ssm(name: str, region: str | None = None, endpoint_url: str | None = None) -> str:
    """The decrypted value of SSM parameter ``name`` in ``region`` (boto3's default region
    when None); ``endpoint_url`` (or ``AWS_ENDPOINT_URL``) points boto3 elsewhere."""
    where = f"SSM parameter {name}" + (f" in {region}" if region else "")
    try:
        import boto3
        from botocore.config import Config
    except ImportError:  # pragma: no cover - boto3 is a dependency
        raise SecretError(f"cannot read {where}: boto3 is not installed") from None
    try:
        client = boto3.client("ssm", region_name=region, endpoint_url=endpoint_url,
                              config=Config(retries={"mode": "standard",
                                                     "total_max_attempts": _MAX_ATTEMPTS}))
        reply = client.get_parameter(Name=name, WithDecryption=True)
        return str(reply["Parameter"]["Value"])
    except Exception as exc:
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            code = str((response.get("Error") or {}).get("Code") or "error")
            reason = f"{code}: {_HINTS.get(code, 'AWS refused the request')}"
        elif type(exc).__name__ == "NoRegionError":
            reason = "no AWS region (add ?region=REGION to the ssm: URI)"
        elif type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
            reason = "no AWS credentials (on a VM: attach an instance profile)"
        elif type(exc).__module__.split(".")[0] in ("botocore", "boto3"):
            reason = type(exc).__name__
        else:
            raise
        # Not chained: the secret store's reply stays out of tracebacks and logs.
        raise SecretError(f"cannot read {where}: {reason}") from None
