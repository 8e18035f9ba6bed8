"""Moved to :mod:`aimegraph.nodes.teams.broadcast`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.nodes.teams.broadcast")
