"""Package names imported on first use (PEP 562): ``import aimegraph`` and the CLI's
start pay only for what they touch, not for every module a package re-exports.

A package lists its names by home module and hands the pair this module returns to
Python as its ``__getattr__`` and ``__dir__``; a ``TYPE_CHECKING`` block imports the
same names so type checkers and IDEs see them.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``.

    ``homes`` maps each exported name to the module it is defined in, relative to
    ``package`` (``".graphs"``); the first access imports it and keeps it in the
    package's namespace. Any other name that is a subpackage or submodule (say
    ``aimegraph.nodes``) is imported as one, as an eager ``__init__`` made it an
    attribute.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name in homes:
            value = getattr(importlib.import_module(homes[name], package), name)
        elif name.startswith("__"):  # probes such as __wrapped__ are never submodules
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        else:
            value = _submodule(package, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__


def _submodule(package: str, name: str) -> Any:
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.{name}":  # the submodule exists; something it needs does not
            raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None


def moved(old: str, homes: str | Mapping[str, str]) -> Callable[[str], Any]:
    """``__getattr__`` for a module whose names moved: ``old`` stays importable for a
    release and hands each moved name on from its new module, imported when first asked
    for (so an old path never pulls a higher layer in at import time), with a
    ``DeprecationWarning`` naming the new home.

    ``homes`` is the new module of every name (a whole module moved), or a map from
    each moved name to its new module (part of a module moved).
    """

    def __getattr__(name: str) -> Any:
        home = homes if isinstance(homes, str) else homes.get(name)
        module = None if home is None or name.startswith("__") else importlib.import_module(home)
        if module is None or not hasattr(module, name):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(
            f"{old}.{name} moved to {home}.{name}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(module, name)

    return __getattr__
