"""Reducers for AimeState: how concurrent node outputs merge into one state."""

from __future__ import annotations

from collections.abc import Mapping

from aimegraph.state.models import Task, Usage


def merge_tasks(
    current: Mapping[str, Task] | None, update: Mapping[str, Task] | None
) -> dict[str, Task]:
    """Merge by id: an update replaces the task with the same id, others are kept.

    Parallel executors each return only their own task, so their outputs
    combine without clobbering one another.
    """
    merged = dict(current or {})
    merged.update(update or {})
    return merged


def add_usage(current: Usage | None, update: Usage | None) -> Usage:
    """Sum usage records; either side may be missing."""
    return (current or Usage()) + (update or Usage())
