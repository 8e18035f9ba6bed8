"""Objects named ``module:attr`` on a command line or in settings (tools, agent
units, metrics, graph builders), imported one way with one kind of error."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any


def import_object(
    spec: str, *, malformed: str, failed: str, error: type[ValueError] = ValueError
) -> Any:
    """The object ``spec`` names as ``module:attr`` (``attr`` may be dotted, e.g.
    ``myapp.agents:Team.units``). The module is also looked for in the current
    directory, as ``python -m`` would find it (see :func:`import_module`).

    Raises:
        error: ``spec`` is not ``module:attr`` (the message is ``malformed``), or the
            module or attribute cannot be imported (``"{failed} {spec!r}: {reason}"``).
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise error(malformed)
    try:
        value: Any = import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise error(f"{failed} {spec!r}: {exc}") from exc
    return value


def import_module(name: str) -> ModuleType:
    """``importlib.import_module(name)``, also finding modules in the current directory.

    ``python -m aimegraph.cli`` puts the current directory on ``sys.path``; the
    ``aimegraph`` script (and a Celery worker) does not, so ``--tools mytools:x``
    next to the user would not be found. When the module is missing and the
    current directory is not searched, it is added at the end of ``sys.path`` (so
    it never shadows an installed module) and the import tried again.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not (name == missing or name.startswith(missing + ".")) or _cwd_searched():
            raise
    sys.path.append(os.getcwd())
    importlib.invalidate_caches()
    return importlib.import_module(name)


def _cwd_searched() -> bool:
    cwd = os.path.realpath(os.getcwd())
    return any(os.path.realpath(entry or os.curdir) == cwd for entry in sys.path)
