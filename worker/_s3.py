"""Amazon S3 as an :class:`~worker._storage.ObjectStore`: checkpoints and code bundles on AWS.

Keys are relative to ``s3://bucket/prefix``. A ``PutObject`` is atomic (readers see the old
object or the new one), so no temporary key is needed. boto3 reads credentials the usual way
(on a VM: its instance profile) and honours ``AWS_ENDPOINT_URL`` (S3-compatible stores,
tests); botocore's ``standard`` retry mode handles throttling with jittered backoff. Failures
surface as ``OSError`` subclasses that name the bucket and key, as a folder's would.
"""

from __future__ import annotations

import posixpath
from typing import Any

DEFAULT_MAX_ATTEMPTS = 5


def _is_aws(exc: BaseException) -> bool:
    """A failure reported by S3 or botocore (anything else is a bug to surface as it is)."""
    return (isinstance(getattr(exc, "response", None), dict)
            or type(exc).__module__.split(".")[0] in ("botocore", "boto3"))


class S3Store:
    """``s3://bucket/prefix`` through boto3 (imported when the first store is made)."""

    def __init__(self, bucket: str, prefix: str = "", *, region: str | None = None,
                 endpoint_url: str | None = None, client: Any = None) -> None:
        if not bucket:
            raise ValueError("an S3 store needs a bucket: s3://BUCKET/prefix")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if client is None:
            import boto3
            from botocore.config import Config

            client = boto3.client(
                "s3", region_name=region, endpoint_url=endpoint_url,
                config=Config(retries={"mode": "standard",
                                       "total_max_attempts": DEFAULT_MAX_ATTEMPTS}))
        self._s3 = client

    def __repr__(self) -> str:
        return f"S3Store('s3://{self.bucket}/{self.prefix}')"

    def _key(self, key: str) -> str:
        parts = key.split("/")
        if not key or key.startswith("/") or ".." in parts:
            raise ValueError(f"key {key!r} escapes the store root")
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, exc: Exception, verb: str, key: str) -> OSError:
        where = f"s3://{self.bucket}/{key}"
        response = getattr(exc, "response", None)
        if not isinstance(response, dict):
            return OSError(f"S3 {verb} {where} failed: {type(exc).__name__}: {exc}")
        code = str((response.get("Error") or {}).get("Code") or "")
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        text = f"S3 {verb} {where} failed: {code or status}"
        if code == "NoSuchBucket":
            return FileNotFoundError(f"{text}: bucket {self.bucket} does not exist")
        if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                    "ExpiredToken", "AllAccessDisabled"):
            return PermissionError(f"{text}: these credentials may not {verb} here (the VM's "
                                   "instance profile needs s3:GetObject, s3:PutObject, "
                                   "s3:ListBucket and s3:DeleteObject on this bucket)")
        return OSError(text)

    def put(self, key: str, data: bytes) -> None:
        full = self._key(key)
        try:
            self._s3.put_object(Bucket=self.bucket, Key=full, Body=data)
        except Exception as exc:
            if not _is_aws(exc):
                raise
            raise self._fail(exc, "put", full) from exc

    def get(self, key: str) -> bytes | None:
        full = self._key(key)
        try:
            reply = self._s3.get_object(Bucket=self.bucket, Key=full)
        except Exception as exc:
            code = str(((getattr(exc, "response", None) or {}).get("Error") or {}).get("Code"))
            if code in ("NoSuchKey", "404"):
                return None
            if not _is_aws(exc):
                raise
            raise self._fail(exc, "get", full) from exc
        with reply["Body"] as body:
            return body.read()

    def list(self, prefix: str = "") -> list[str]:
        """Keys under the folder ``prefix`` (as a folder's listing: ``"a"`` holds ``"a/b"``,
        not ``"ab"``), sorted; names starting with a dot are left out."""
        root = f"{self.prefix}/" if self.prefix else ""
        search = root
        if prefix.strip("/"):
            search = self._key(prefix.strip("/")) + "/"
        keys = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=search):
                keys += [obj["Key"][len(root):] for obj in page.get("Contents", [])]
        except Exception as exc:
            if not _is_aws(exc):
                raise
            raise self._fail(exc, "list", search) from exc
        return sorted(k for k in keys if k and not posixpath.basename(k).startswith("."))

    def delete(self, key: str) -> None:
        full = self._key(key)
        try:
            self._s3.delete_object(Bucket=self.bucket, Key=full)
        except Exception as exc:
            code = str(((getattr(exc, "response", None) or {}).get("Error") or {}).get("Code"))
            if code in ("NoSuchKey", "404"):
                return
            if not _is_aws(exc):
                raise
            raise self._fail(exc, "delete", full) from exc
