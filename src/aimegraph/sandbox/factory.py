"""Choosing the sandbox from a setting (``AimeConfig.sandbox``)."""

from __future__ import annotations

from typing import Any

from aimegraph.imports import import_object
from aimegraph.sandbox.bubblewrap import BubblewrapSandbox
from aimegraph.sandbox.protocol import Sandbox
from aimegraph.sandbox.unconfined import UnconfinedSandbox

__all__ = ["SANDBOX_NAMES", "open_sandbox"]

SANDBOX_NAMES = ("auto", "bubblewrap", "none")
"""The built-in choices; anything else is a ``module:attr`` of the user's."""


def open_sandbox(spec: str | Sandbox = "auto", *, network: bool = False) -> Sandbox:
    """The sandbox ``spec`` names.

    Args:
        spec: ``"auto"``: bubblewrap; where it cannot run, code tools refuse each call
            with one line saying what to install or set. ``"bubblewrap"``: the same, but
            a missing mechanism is an error now, when the tools are built. ``"none"``:
            no confinement (a warning on every job). ``"module:attr"``: your own
            :class:`~aimegraph.sandbox.protocol.Sandbox`, or a class or function that
            makes one with no arguments. A sandbox object is returned as it is.
        network: let bubblewrap jobs use the host's network (your own sandbox decides
            this for itself).

    Raises:
        ValueError: ``spec`` is malformed or names no sandbox.
        SandboxUnavailable: ``"bubblewrap"`` cannot run here.
    """
    if not isinstance(spec, str):
        return spec
    if spec in ("auto", "bubblewrap"):
        sandbox = BubblewrapSandbox(network=network)
        if spec == "bubblewrap":
            sandbox.check()
        return sandbox
    if spec == "none":
        return UnconfinedSandbox()
    value: Any = import_object(
        spec,
        malformed=f"sandbox must be one of {', '.join(SANDBOX_NAMES)} or module:attr; got {spec!r}",
        failed="cannot import the sandbox",
    )
    # A class passes the protocol's attribute check too: make the instance.
    if isinstance(value, type) or (not isinstance(value, Sandbox) and callable(value)):
        value = value()
    if not isinstance(value, Sandbox):
        raise ValueError(
            f"{spec!r} is not a sandbox (it needs a name, check() and run()): {value!r}"
        )
    return value
