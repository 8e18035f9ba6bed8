"""Objects named ``module:attr`` on a command line or in settings (tools, agent
units, metrics, graph builders), imported one way with one kind of error."""

from __future__ import annotations

import importlib
from typing import Any


def import_object(
    spec: str, *, malformed: str, failed: str, error: type[ValueError] = ValueError
) -> Any:
    """The object ``spec`` names as ``module:attr`` (``attr`` may be dotted, e.g.
    ``myapp.agents:Team.units``).

    Raises:
        error: ``spec`` is not ``module:attr`` (the message is ``malformed``), or the
            module or attribute cannot be imported (``"{failed} {spec!r}: {reason}"``).
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise error(malformed)
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise error(f"{failed} {spec!r}: {exc}") from exc
    return value
