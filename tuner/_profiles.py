"""Where a sweep's step times come from: its own ``profile:`` section, the profile measured by an
earlier run of the same trainable in the experiments root, or the default profile.

``plan`` and ``run`` both start from :func:`with_profile`, so a preview and the sweep it
previews plan from the same step times, and a trainable run before is planned at what it took.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import inspect
import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from budgets import fit_segment_times
from tuner._config import SweepConfig
from tuner._store import STORE_NAME, Store
from worker.records import SegmentState

log = logging.getLogger(__name__)

TRAINABLE_KEY = "trainable_key"     # store meta: the trainable's name and a hash of its code
PROFILE_SOURCE = "profile_source"   # store meta: where the first plan's step times came from
DEFAULT = "default"
SWEEP = "sweep"
MEASURED = "measured"
_SCAN_LIMIT = 200                    # the newest experiments of a root looked at


def trainable_key(sweep: SweepConfig) -> str | None:
    """The trainable's name and a hash of its code (its module's source file, or a callable's
    own source): a changed trainable is another trainable. None when its code cannot be read."""
    target = sweep.trainable
    if callable(target) and not isinstance(target, str):
        try:
            code = inspect.getsource(target).encode()
        except (OSError, TypeError):
            return None
        name = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"
        return f"{name} {hashlib.sha256(code).hexdigest()[:16]}"
    module = str(target).partition(":")[0]
    path = _module_file(module, [Path.cwd(), *([sweep.base_dir] if sweep.base_dir else [])])
    if path is None:
        return None
    return f"{target} {hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"


def _module_file(module: str, roots: Iterable[Path]) -> Path | None:
    """The source file of ``module``, looked up under ``roots`` (and their parents, as a sweep
    file inside the trainable's package finds it) and then ``sys.path``, without importing it
    or its packages."""
    path = [str(b) for r in roots for b in (r, r.parent)] + sys.path
    spec = None
    for depth, part in enumerate(module.split(".")):
        if depth and (spec is None or not spec.submodule_search_locations):
            return None
        where = path if depth == 0 else list(spec.submodule_search_locations)
        spec = importlib.machinery.PathFinder.find_spec(part, where)
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and Path(origin).is_file() else None


def measured_profile(store: Store) -> dict[str, Any] | None:
    """The ``profile:`` keys an experiment measured: seconds per step and, when its trials'
    first segments took longer than their steps explain, the first step's relative cost
    (:func:`budgets.fit_segment_times` over its finished segments). None before any ended."""
    rows = store.query(
        "SELECT start_step, last_step, started_at, finished_at FROM segments WHERE state = ? "
        "AND last_step > start_step AND started_at IS NOT NULL AND finished_at IS NOT NULL",
        (SegmentState.DONE,))
    fit = fit_segment_times((r["last_step"] - r["start_step"],
                             max(0.0, r["finished_at"] - r["started_at"]), r["start_step"] == 0)
                            for r in rows)
    if fit is None:
        return None
    rate, first = fit
    profile: dict[str, Any] = {"seconds_per_step": float(f"{rate:.4g}")}
    if first > 0:
        profile["step_costs"] = [float(f"{(rate + first) / rate:.4g}")]
    return profile


def earlier_profile(key: str, root: Path, exclude: Path | None = None
                    ) -> tuple[Path, dict[str, Any]] | None:
    """The profile measured by the newest experiment under ``root`` that ran the trainable
    ``key`` (see :func:`trainable_key`) and finished a segment; None when there is none."""
    if not root.is_dir():
        return None
    found = []
    for folder in root.iterdir():
        db = folder / STORE_NAME
        if db.is_file() and (exclude is None or folder.resolve() != exclude.resolve()):
            found.append((db.stat().st_mtime, folder))
    for _, folder in sorted(found, reverse=True)[:_SCAN_LIMIT]:
        try:
            store = Store(folder, readonly=True)
        except Exception:   # another program's file, a store being created: not ours to read
            continue
        try:
            if store.meta(TRAINABLE_KEY) != key:
                continue
            profile = measured_profile(store)
        except Exception as exc:    # an older or damaged store: skipped, said once
            log.debug("skipping %s: %s", folder, exc)
            continue
        finally:
            store.close()
        if profile is not None:
            return folder, profile
    return None


def with_profile(sweep: SweepConfig, root: Path, exclude: Path | None = None
                 ) -> tuple[SweepConfig, str]:
    """``sweep`` with the step times it will be planned at, and where they come from:
    ``"sweep"`` (its own ``profile:`` section), ``"measured: DIR"`` (an earlier run of the same
    trainable under ``root``; its other profile keys stay the defaults) or ``"default"``."""
    if "profile" in sweep.model_fields_set:
        return sweep, SWEEP
    key = trainable_key(sweep)
    found = earlier_profile(key, root, exclude) if key is not None else None
    if found is None:
        return sweep, DEFAULT
    folder, measured = found
    profile = sweep.profile.model_copy(update={
        "seconds_per_step": measured["seconds_per_step"],
        "step_costs": tuple(measured.get("step_costs", ()))})
    return sweep.model_copy(update={"profile": profile}), f"{MEASURED}: {folder}"


def describe(source: str) -> str:
    """One line for ``plan`` and ``run``: where the plan's step times come from."""
    if source == SWEEP:
        return "step times from the sweep's profile section"
    if source.startswith(MEASURED):
        return (f"step times measured by an earlier run of this trainable "
                f"({source.partition(': ')[2]})")
    return ("step times from the default profile (1 s a step): give the sweep a profile "
            "section, or run it once, and later plans use what it measured")
