"""Moved to :mod:`aimegraph.graphs.team_modes`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.graphs.team_modes")
