"""Moved to :mod:`aimegraph.eval.rollout_io`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.eval.rollout_io")
