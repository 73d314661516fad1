"""Find the trainable a segment names: an import path, or a code bundle in the experiment dir."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

import cloudpickle

BUNDLE_PREFIX = "bundle:"
_cache: dict[tuple[str, float], Callable[..., Any]] = {}


def load_trainable(spec: str) -> Callable[..., Any]:
    if spec.startswith(BUNDLE_PREFIX):
        path = spec[len(BUNDLE_PREFIX):]
        key = (path, os.path.getmtime(path))
        if key not in _cache:
            with open(path, "rb") as fh:
                _cache[key] = cloudpickle.load(fh)
        return _cache[key]
    module_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def write_bundle(fn: Callable[..., Any], path: str) -> str:
    """Save a callable that workers cannot import by name; returns the spec naming it."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        cloudpickle.dump(fn, fh)
    os.replace(tmp, path)
    return BUNDLE_PREFIX + path
