"""Moved to :mod:`aimegraph.nodes.teams.sequential`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.nodes.teams.sequential")
