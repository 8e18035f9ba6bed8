"""Moved to :mod:`aimegraph.models.offline.echo`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.models.offline.echo")
