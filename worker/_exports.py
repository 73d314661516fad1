"""Lazy exports for a package's ``__init__`` (PEP 562): each name is imported from its home
module on first use, so what imports the package for one small part (the CLI reading a stored
sweep) does not load all of it.

Hand-written: ``lazy_loader`` (SPEC 1) does this for a package's own submodules only, and
``tuner`` also exports ``worker.TrialContext``. It lives here, in the package every other
one may import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy(package: str, homes: Mapping[str, str]
         ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose names live in ``homes`` (name ->
    module). A name is cached in the package once imported."""
    namespace = import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
