"""Moved to :mod:`aimegraph.eval.task_run`; kept for a release."""

from aimegraph.lazy import moved

__getattr__ = moved(__name__, "aimegraph.eval.task_run")
