"""Moved to :mod:`aimegraph.nodes.actor_factory`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.nodes.actor_factory")
