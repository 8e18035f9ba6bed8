"""Moved to :mod:`aimegraph.running.scope`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.running.scope")
