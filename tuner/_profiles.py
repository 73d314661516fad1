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

from tuner._config import ProfileConfig, SweepConfig
from tuner._errors import ConfigError
from tuner._measure import measure
from tuner._store import STORE_NAME, Store

log = logging.getLogger(__name__)

TRAINABLE_KEY = "trainable_key"     # store meta: the trainable's name and a hash of its code
PROFILE_SOURCE = "profile_source"   # store meta: where the first plan's step times came from
DEFAULT = "default"
SWEEP = "sweep"
MEASURED = "measured"
FROM = "from"
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
    """The ``profile:`` keys an experiment measured (:func:`tuner._measure.measure`), with
    ``boot_s`` left out: see :func:`measurement` for the boot latency by instance type. None
    before any segment finished a step."""
    found = measure(store)
    return None if found is None else found["profile"]


def measurement(folder: Path) -> dict[str, Any]:
    """What the experiment in ``folder`` measured (``profile`` and ``notes``), for ``profile:
    {from: DIR}`` and ``elastune profile DIR``; ConfigError when there is none."""
    if not (folder / STORE_NAME).is_file():
        raise ConfigError("profile.from", f"{folder} holds no experiment ({STORE_NAME} not "
                                          "found)")
    store = Store(folder, readonly=True)
    try:
        found = measure(store)
        experiment = store.experiment()["id"]
    finally:
        store.close()
    if found is None:
        raise ConfigError("profile.from", f"the experiment in {folder} finished no segment "
                                          "with a step: nothing was measured")
    return {**found, "experiment": experiment}


def earlier_profile(key: str, root: Path, exclude: Path | None = None
                    ) -> tuple[Path, dict[str, Any]] | None:
    """What the newest experiment under ``root`` that ran the trainable ``key`` (see
    :func:`trainable_key`) and finished a segment measured (:func:`tuner._measure.measure`:
    ``profile`` and ``notes``); None when there is none."""
    if not root.is_dir():
        return None
    stores = []
    for folder in root.iterdir():
        db = folder / STORE_NAME
        if db.is_file() and (exclude is None or folder.resolve() != exclude.resolve()):
            stores.append((db.stat().st_mtime, folder))
    for _, folder in sorted(stores, reverse=True)[:_SCAN_LIMIT]:
        try:
            store = Store(folder, readonly=True)
        except Exception:   # another program's file, a store being created: not ours to read
            continue
        try:
            if store.meta(TRAINABLE_KEY) != key:
                continue
            found = measure(store)
        except Exception as exc:    # an older or damaged store: skipped, said once
            log.debug("skipping %s: %s", folder, exc)
            continue
        finally:
            store.close()
        if found is not None:
            return folder, found
    return None


def profile_yaml(found: dict[str, Any], folder: Path) -> str:
    """A ``profile:`` section to paste into a sweep (what :func:`measurement` found), with
    what it rests on as comments."""
    import yaml

    notes = found["notes"]
    lines = [f"# measured by experiment {found['experiment']} ({folder}) over "
             f"{notes['segments']} finished segments"]
    for itype, (low, high) in sorted(notes.get("boot_s_by_type", {}).items()):
        lines.append(f"# boot latency on {itype}: {low:g} to {high:g} s")
    if "trials_paced" in notes:
        lines.append(f"# pace quantiles over {notes['trials_paced']} trials' first segments")
    body = yaml.safe_dump({"profile": found["profile"]}, sort_keys=False,
                          default_flow_style=None)
    return "\n".join(lines) + "\n" + body


def with_profile(sweep: SweepConfig, root: Path, exclude: Path | None = None
                 ) -> tuple[SweepConfig, str]:
    """``sweep`` with the profile it will be planned at, and where it comes from: ``"from:
    DIR"`` (its ``profile: {from: DIR}``, the keys it sets kept), ``"sweep"`` (its own
    ``profile:`` section), ``"measured: DIR"`` (the newest earlier run of the same trainable
    under ``root``) or ``"default"``."""
    given = sweep.profile.model_fields_set
    if sweep.profile.from_ is not None:
        folder = Path(sweep.profile.from_).expanduser()
        if not folder.is_absolute() and sweep.base_dir is not None:
            folder = Path(sweep.base_dir) / folder
        found = measurement(folder)
        return _merged(sweep, found, keep=given), f"{FROM}: {sweep.profile.from_}"
    if "profile" in sweep.model_fields_set:
        return sweep, SWEEP
    key = trainable_key(sweep)
    found_at = earlier_profile(key, root, exclude) if key is not None else None
    if found_at is None:
        return sweep, DEFAULT
    folder, found = found_at   # (read once: measuring reads every report of the store)
    return _merged(sweep, found, keep=set()), f"{MEASURED}: {folder}"


def _merged(sweep: SweepConfig, found: dict[str, Any], keep: set[str]) -> SweepConfig:
    """``sweep`` with the measured keys in its profile, but for those in ``keep``; the boot
    latency only where it was measured on an instance type the sweep rents."""
    from tuner._planning import instance_types_for

    measured = dict(found["profile"])
    measured.pop("boot_s", None)
    by_type = found["notes"].get("boot_s_by_type", {})
    for t in instance_types_for(sweep):
        if t.name in by_type:
            low, high = by_type[t.name]
            measured["boot_s"] = [low, high]
            break
    current = sweep.profile.model_dump(by_alias=True)
    for k, v in measured.items():
        if k not in keep:
            current[k] = v
    try:
        profile = ProfileConfig.model_validate(current)
    except ConfigError as exc:
        raise ConfigError("profile.from", f"the measured profile does not fit: {exc}") from None
    return sweep.model_copy(update={"profile": profile})


def describe(source: str) -> str:
    """One line for ``plan`` and ``run``: where the plan's step times come from."""
    if source.startswith(FROM):
        return f"profile measured by the experiment in {source.partition(': ')[2]} (from)"
    if source == SWEEP:
        return "step times from the sweep's profile section"
    if source.startswith(MEASURED):
        return (f"step times measured by an earlier run of this trainable "
                f"({source.partition(': ')[2]})")
    return ("step times from the default profile (1 s a step): give the sweep a profile "
            "section, or run it once, and later plans use what it measured")
