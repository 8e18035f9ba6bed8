"""Moved to :mod:`aimegraph.nodes.memory`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.nodes.memory")
