"""Moved to :mod:`aimegraph.eval.harness`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.eval.harness")
