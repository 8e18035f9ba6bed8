"""Reading the aime graph's ``DeltaChannel`` keys from a raw checkpoint.

``tasks`` and ``updates`` are stored as deltas (see ``AimeState``): a checkpoint
holds them only at a snapshot, otherwise they are the writes of its ancestors
since the last snapshot. ``graph.get_state`` rebuilds them itself; code that reads
``CheckpointTuple``s straight from a saver (the dashboard) rebuilds them here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import StateSnapshot

from aimegraph.state.models import Task, Usage
from aimegraph.state.reducers import append_batches, merge_task_batches, merge_tasks

DELTA_REDUCERS: dict[str, Callable[[Any, Sequence[Any]], Any]] = {
    "tasks": merge_task_batches,
    "updates": append_batches,
}


def _stored(value: Any) -> Any:
    return value.value if isinstance(value, _DeltaSnapshot) else value


def checkpoint_values(saver: BaseCheckpointSaver[Any], item: CheckpointTuple) -> dict[str, Any]:
    """The checkpoint's channel values with ``tasks`` and ``updates`` rebuilt
    (seed from the nearest snapshot, then the writes since, through the reducers)."""
    values = dict(item.checkpoint.get("channel_values", {}))
    absent = [key for key in DELTA_REDUCERS if key not in values]
    history = saver.get_delta_channel_history(config=item.config, channels=absent)
    for key in DELTA_REDUCERS:
        if key in values:
            values[key] = _stored(values[key])
            continue
        entry = history[key]
        writes = [value for _, _, value in entry["writes"]]
        seed = _stored(entry["seed"]) if "seed" in entry else None
        if seed is not None or writes:
            values[key] = DELTA_REDUCERS[key](seed, writes)
    return values


RETURN = "__return__"
"""The channel LangGraph saves a functional-API ``@task``'s result under."""


def finished_tasks(item: CheckpointTuple | None) -> dict[str, Task]:
    """The tasks the step after checkpoint ``item`` had finished when it stopped.

    Under the eager scheduler one executor step runs many tasks; each one's result
    is saved the moment it finishes as a pending write of the step (the actor
    ``@task``'s return value), but reaches the state only when the step ends.
    """
    return finished_outputs(item)[0]


def finished_outputs(item: CheckpointTuple | None) -> tuple[dict[str, Task], Usage | None]:
    """:func:`finished_tasks` and the usage those actors reported (None: none)."""
    finished: dict[str, Task] = {}
    usage: Usage | None = None
    for _, channel, value in (item.pending_writes or []) if item is not None else []:
        if channel != RETURN or not isinstance(value, dict):
            continue
        if isinstance(value.get("tasks"), dict):
            finished |= {k: t for k, t in value["tasks"].items() if isinstance(t, Task)}
        if isinstance(spent := value.get("usage"), Usage):
            usage = spent if usage is None else usage + spent
    return finished, usage


def with_finished_tasks(snapshot: StateSnapshot, saver: BaseCheckpointSaver[Any]) -> StateSnapshot:
    """``snapshot`` with :func:`finished_tasks` merged into ``tasks``: a run stopped
    mid-step (crash, interrupt) shows the tasks its step had already finished."""
    finished = finished_tasks(saver.get_tuple(snapshot.config))
    if not finished:
        return snapshot
    tasks = merge_tasks(snapshot.values.get("tasks") or {}, finished)
    return snapshot._replace(values={**snapshot.values, "tasks": tasks})
