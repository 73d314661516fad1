"""Google Cloud Storage as an :class:`worker._storage.ObjectStore` (``gs://bucket/prefix``).

Keys are relative to ``prefix``. A GCS object upload is atomic (readers see the old object or
the new one), which is what ``put`` promises; ``list`` treats its argument as a folder
(``"a"`` holds ``"a/b"``, not ``"ab"``) and leaves out dot-files, like the local store.
With ``STORAGE_EMULATOR_HOST`` set (``http://host:port``) the client talks to that server with
anonymous credentials and the project from ``GOOGLE_CLOUD_PROJECT`` (or ``test``); otherwise
it uses the VM's (or the user's) application default credentials. ``google-cloud-storage`` is
imported on first use.
"""

from __future__ import annotations

import os
from typing import Any

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


class GCSStore:
    """Objects under ``gs://<bucket>/<prefix>/``."""

    def __init__(self, bucket: str, prefix: str = "", *, project: str | None = None,
                 client: Any = None) -> None:
        if not bucket:
            raise ValueError("a gs:// storage URI needs a bucket: gs://bucket/prefix")
        self.bucket_name = bucket
        self.prefix = prefix.strip("/")
        self._project = project
        self._client = client
        self._bucket: Any = None

    def _get_bucket(self) -> Any:
        if self._bucket is None:
            if self._client is None:
                from google.cloud import storage

                project = self._project or os.environ.get("GOOGLE_CLOUD_PROJECT")
                if os.environ.get(EMULATOR_ENV):
                    from google.auth.credentials import AnonymousCredentials

                    self._client = storage.Client(project=project or "test",
                                                  credentials=AnonymousCredentials())
                else:
                    self._client = storage.Client(project=project)
            self._bucket = self._client.bucket(self.bucket_name)
        return self._bucket

    def _key(self, key: str) -> str:
        parts = key.strip("/").split("/")
        if not key.strip("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"key {key!r} is not a relative object path")
        return f"{self.prefix}/{key.strip('/')}" if self.prefix else key.strip("/")

    def put(self, key: str, data: bytes) -> None:
        from google.cloud.storage.retry import DEFAULT_RETRY

        blob = self._get_bucket().blob(self._key(key))
        # Rewriting a key with the same bytes is harmless, so retrying an upload is safe.
        blob.upload_from_string(bytes(data), content_type="application/octet-stream",
                                retry=DEFAULT_RETRY)

    def get(self, key: str) -> bytes | None:
        from google.api_core.exceptions import NotFound

        try:
            return bytes(self._get_bucket().blob(self._key(key)).download_as_bytes())
        except NotFound:
            return None

    def list(self, prefix: str = "") -> list[str]:
        root = f"{self.prefix}/" if self.prefix else ""
        folder = f"{self._key(prefix)}/" if prefix.strip("/") else root
        bucket = self._get_bucket()
        names = (blob.name for blob in bucket.client.list_blobs(bucket, prefix=folder))
        # As the local store's listing: no folder placeholders, no dot-files.
        return sorted(name[len(root):] for name in names
                      if not name.endswith("/") and not name.rsplit("/", 1)[-1].startswith("."))

    def delete(self, key: str) -> None:
        from google.api_core.exceptions import NotFound

        try:
            self._get_bucket().blob(self._key(key)).delete()
        except NotFound:
            pass
