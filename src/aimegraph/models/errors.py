"""The error a model spec that cannot be resolved raises.

Its own module so that the loaders :mod:`aimegraph.models.resolve` dispatches to
(``local``, ``local_server``) can raise it without importing the resolver back.
"""

from __future__ import annotations


class ModelSpecError(ValueError):
    """A model spec cannot be resolved; the message says what to change."""
