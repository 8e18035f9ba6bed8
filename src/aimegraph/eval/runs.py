"""Moved to :mod:`aimegraph.eval.listing`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.eval.listing")
