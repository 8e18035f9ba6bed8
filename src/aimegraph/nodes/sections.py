"""Moved to :mod:`aimegraph.memory.sections`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.memory.sections")
