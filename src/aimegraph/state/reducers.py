"""Reducers for AimeState: how concurrent node outputs merge into one state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aimegraph.state.models import ProgressUpdate, Task, Usage


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


def merge_task_batches(
    current: Mapping[str, Task] | None, batches: Sequence[Mapping[str, Task] | None]
) -> dict[str, Task]:
    """``merge_tasks`` over a batch of writes, the reducer shape ``DeltaChannel`` calls.

    Folding dict updates is batching-invariant, as ``DeltaChannel`` requires when it
    replays a thread's writes in larger batches than they were made.
    """
    merged = dict(current or {})
    for update in batches:
        merged.update(update or {})
    return merged


def append_batches(
    current: Sequence[ProgressUpdate] | None, batches: Sequence[Sequence[ProgressUpdate] | None]
) -> list[ProgressUpdate]:
    """``operator.add`` over a batch of list writes (for a ``DeltaChannel``)."""
    appended = list(current or [])
    for update in batches:
        appended.extend(update or [])
    return appended


def add_usage(current: Usage | None, update: Usage | None) -> Usage:
    """Sum usage records; either side may be missing."""
    return (current or Usage()) + (update or Usage())


def merge_facts(
    current: Mapping[str, str] | None, update: Mapping[str, str] | None
) -> dict[str, str]:
    """The working-memory whiteboard: merge by key, a later value replaces an earlier one."""
    return {**(current or {}), **(update or {})}
