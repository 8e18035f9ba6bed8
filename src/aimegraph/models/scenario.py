"""Moved to :mod:`aimegraph.models.offline.scenario`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.models.offline.scenario")
