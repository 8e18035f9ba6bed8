"""Moved to :mod:`aimegraph.running.drain`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.running.drain")
