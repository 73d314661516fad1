"""Where checkpoints and code bundles live: a local folder or object storage, by URI.

``/path`` or ``file:///path``: a folder on this machine (the local provider's default).
``s3://bucket/prefix``: Amazon S3 through boto3 (``AWS_ENDPOINT_URL`` points it elsewhere).
``gs://bucket/prefix``: Google Cloud Storage (``STORAGE_EMULATOR_HOST`` points it elsewhere).
Every store speaks the same four verbs over keys relative to the URI; the SDKs are imported
only when their scheme is used.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit


class ObjectStore(Protocol):
    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` at ``key`` atomically (readers see the old object or the new one)."""
        ...

    def get(self, key: str) -> bytes | None:
        """The object at ``key``, or None when there is none."""
        ...

    def list(self, prefix: str = "") -> list[str]:
        """Keys under ``prefix`` (relative to the store's root), sorted."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""
        ...


class LocalStore:
    """A folder; writes go to a temporary file that is fsynced and renamed into place."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"key {key!r} escapes the store root")
        return path

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def list(self, prefix: str = "") -> list[str]:
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        root = self.root.resolve()
        return sorted(str(p.resolve().relative_to(root)) for p in base.rglob("*")
                      if p.is_file() and not p.name.startswith("."))

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)


def open_store(uri: str | Path) -> ObjectStore:
    """The store rooted at ``uri``."""
    text = str(uri)
    parts = urlsplit(text)
    if parts.scheme in ("", "file"):
        return LocalStore(parts.path if parts.scheme == "file" else text)
    if parts.scheme == "s3":
        from worker._s3 import S3Store

        return S3Store(parts.netloc, parts.path.strip("/"))
    if parts.scheme == "gs":
        from worker._gcs import GCSStore

        return GCSStore(parts.netloc, parts.path.strip("/"))
    raise ValueError(f"storage URI {text!r}: scheme {parts.scheme!r} is not supported; "
                     "allowed: a path, file://, s3://, gs://")
