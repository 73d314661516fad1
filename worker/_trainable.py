"""Find the trainable a segment names: an import path, or a code bundle in the experiment's
storage (``bundle:/path/trainable.pkl`` or ``bundle:s3://bucket/prefix/code/trainable.pkl``)."""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Callable
from typing import Any

import cloudpickle

from worker._storage import ObjectStore, open_store

BUNDLE_PREFIX = "bundle:"
_cache: dict[tuple[str, float | str], Callable[..., Any]] = {}


def _is_uri(location: str) -> bool:
    return "://" in location


def _split(uri: str) -> tuple[ObjectStore, str]:
    """The store holding ``uri``'s parent, and the object's key in it."""
    parent, _, name = uri.rstrip("/").rpartition("/")
    if not name or parent.endswith(":/") or parent.endswith(":"):
        raise ValueError(f"bundle URI {uri!r} names no object (expected scheme://bucket/key)")
    return open_store(parent), name


def load_trainable(spec: str) -> Callable[..., Any]:
    if spec.startswith(BUNDLE_PREFIX):
        location = spec[len(BUNDLE_PREFIX):]
        if not _is_uri(location):
            key: tuple[str, float | str] = (location, os.path.getmtime(location))
            if key not in _cache:
                with open(location, "rb") as fh:
                    _cache[key] = cloudpickle.load(fh)
            return _cache[key]
        store, name = _split(location)
        data = store.get(name)
        if data is None:
            raise FileNotFoundError(f"code bundle {location} does not exist")
        # Keyed by content: a bundle rewritten under the same URI is loaded again.
        key = (location, hashlib.sha256(data).hexdigest())
        if key not in _cache:
            _cache[key] = cloudpickle.loads(data)
        return _cache[key]
    module_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def write_bundle(fn: Callable[..., Any], path: str) -> str:
    """Save a callable that workers cannot import by name at ``path`` (a file, or a storage URI
    such as ``s3://bucket/prefix/code/trainable.pkl``); returns the spec naming it."""
    data = cloudpickle.dumps(fn)
    if _is_uri(path):
        store, name = _split(path)
        store.put(name, data)
    else:
        folder, name = os.path.split(os.fspath(path))
        open_store(folder or ".").put(name, data)
    return BUNDLE_PREFIX + path
