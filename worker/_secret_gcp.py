"""Read a GCP Secret Manager secret version (the worker's broker password on GCP).

``name`` is ``projects/P/secrets/S/versions/V`` (``V`` a number or ``latest``); without
``/versions/...`` the latest version is read. The endpoint comes from the argument or
``ELASTUNE_GCP_SECRETS_ENDPOINT``; a plain ``http://`` endpoint is a local test server and is
called with anonymous credentials, anything else with the VM's application default
credentials (its service account needs ``roles/secretmanager.secretAccessor``). Errors name the
secret, never its value. ``google-cloud-secret-manager`` is imported on first use.
"""

from __future__ import annotations

import os
import re

from worker._secrets import SecretError

ENDPOINT_ENV = "ELASTUNE_GCP_SECRETS_ENDPOINT"


def read_gcp_secret(name: str, endpoint: str | None = None) -> str:
    """The secret's value as text."""
    version = name.strip("/")
    if re.fullmatch(r"projects/[^/]+/secrets/[^/]+", version):
        version += "/versions/latest"
    if not re.fullmatch(r"projects/[^/]+/secrets/[^/]+/versions/[^/]+", version):
        raise SecretError(f"GCP secret name {name!r} is not "
                          "projects/P/secrets/S[/versions/V]")
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
    try:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
        from google.cloud import secretmanager
    except ImportError as exc:
        raise SecretError(f"reading GCP secret {version} needs google-cloud-secret-manager: "
                          f"{exc}") from None
    kwargs: dict[str, object] = {"transport": "rest"}
    if endpoint:
        from google.api_core.client_options import ClientOptions

        kwargs["client_options"] = ClientOptions(api_endpoint=endpoint)
        if endpoint.startswith("http://"):
            from google.auth.credentials import AnonymousCredentials

            kwargs["credentials"] = AnonymousCredentials()
    try:
        client = secretmanager.SecretManagerServiceClient(**kwargs)
        response = client.access_secret_version(name=version)
    except gexc.NotFound:
        raise SecretError(f"GCP secret {version} does not exist or has no enabled "
                          "version") from None
    except (gexc.PermissionDenied, gexc.Unauthenticated):
        raise SecretError(f"not allowed to read GCP secret {version}: the service account "
                          "needs roles/secretmanager.secretAccessor") from None
    except gexc.GoogleAPIError as exc:
        raise SecretError(f"cannot read GCP secret {version}: {type(exc).__name__}: "
                          f"{getattr(exc, 'message', '')}") from None
    except auth_exc.GoogleAuthError as exc:
        raise SecretError(f"no Google credentials to read GCP secret {version}: "
                          f"{type(exc).__name__}") from None
    data = bytes(response.payload.data)
    if response.payload.data_crc32c:
        import google_crc32c

        if int(google_crc32c.value(data)) != int(response.payload.data_crc32c):
            raise SecretError(f"GCP secret {version} arrived corrupted (CRC32C mismatch)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretError(f"GCP secret {version} is not UTF-8 text") from None
