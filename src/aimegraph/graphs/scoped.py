"""Moved to :mod:`aimegraph.running.scoped_graph`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.running.scoped_graph")
