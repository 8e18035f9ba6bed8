"""Moved to :mod:`aimegraph.nodes.teams.common`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.nodes.teams.common")
