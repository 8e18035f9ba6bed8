"""Moved to :mod:`aimegraph.running.loop`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.running.loop")
