"""Reading the aime graph's state from raw checkpoints: what ``graph.get_state``
does not show.

``tasks``, ``updates`` and ``spans`` are stored as deltas (see ``AimeState``): a checkpoint
holds them only at a snapshot, otherwise they are the writes of its ancestors
since the last snapshot. ``graph.get_state`` rebuilds them itself; code that reads
``CheckpointTuple``s straight from a saver (the dashboard) rebuilds them here.

A step that has not ended (paused for a human, stopped by a crash) has work
``get_state`` leaves out: the tasks it finished and the calls its actors made.
:func:`with_finished_tasks` adds them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import StateSnapshot

from aimegraph.state.models import Task, Usage
from aimegraph.state.reducers import append_batches, merge_task_batches, merge_tasks

DELTA_REDUCERS: dict[str, Callable[[Any, Sequence[Any]], Any]] = {
    "tasks": merge_task_batches,
    "updates": append_batches,
    "spans": append_batches,
}


def _stored(value: Any) -> Any:
    return value.value if isinstance(value, _DeltaSnapshot) else value


def checkpoint_values(saver: BaseCheckpointSaver[Any], item: CheckpointTuple) -> dict[str, Any]:
    """The checkpoint's channel values with ``tasks``, ``updates`` and ``spans`` rebuilt
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


def finished_outputs(item: CheckpointTuple | None) -> list[dict[str, Any]]:
    """The outputs of the actors the step after checkpoint ``item`` had finished
    when it stopped.

    Under the eager scheduler one executor step runs many tasks; each one's result
    is saved the moment it finishes as a pending write of the step (the actor
    ``@task``'s return value), but reaches the state only when the step ends. With
    streamed plans the planner's step does the same, and its planner subgraph's output
    (the plan, saved as its ``plan`` @task's result) is among them.
    """
    writes = (item.pending_writes or []) if item is not None else []
    return [
        value
        for _, channel, value in writes
        if channel == RETURN and isinstance(value, dict) and isinstance(value.get("tasks"), dict)
    ]


def finished_tasks(item: CheckpointTuple | None) -> dict[str, Task]:
    """The tasks the step after checkpoint ``item`` had finished when it stopped
    (see :func:`finished_outputs`)."""
    return _tasks_of(finished_outputs(item))


def _tasks_of(outputs: Sequence[dict[str, Any]]) -> dict[str, Task]:
    finished: dict[str, Task] = {}
    for output in outputs:
        for task_id, task in output["tasks"].items():
            # The streaming planner's plan (its @task's output, which may be saved after
            # tasks it streamed had finished) never hides their progress.
            earlier = finished.get(task_id)
            if isinstance(task, Task) and not (
                task.status == "pending" and earlier is not None and earlier.status != "pending"
            ):
                finished[task_id] = task
    return finished


def step_usage(saver: BaseCheckpointSaver[Any], snapshot: StateSnapshot) -> Usage:
    """What the step ``snapshot`` stopped in has used that its state does not count
    yet: the outputs of the actors it had finished and the usage of those still at
    work (:func:`working_usage`); nothing when no step is left to run."""
    if not snapshot.next:
        return Usage()
    item = saver.get_tuple(snapshot.config)
    done = sum((o.get("usage") or Usage() for o in finished_outputs(item)), Usage())
    return done + working_usage(saver, snapshot, _returned(item))


def _returned(item: CheckpointTuple | None) -> list[str]:
    """The ids of the step's calls that returned (their outputs are pending writes)."""
    writes = (item.pending_writes or []) if item is not None else []
    return [task_id for task_id, channel, _ in writes if channel == RETURN]


def working_usage(
    saver: BaseCheckpointSaver[Any], snapshot: StateSnapshot, returned: Collection[str] = ()
) -> Usage:
    """What the actors still at work in ``snapshot``'s step have used so far (those
    running, paused for a human, or cut off by a crash), as far as their own
    checkpoints say (see :func:`_working_actors`)."""
    return sum(
        (_usage_of(values) for values in _working_actors(saver, snapshot, returned).values()),
        Usage(),
    )


def _usage_of(values: Mapping[str, Any]) -> Usage:
    usage = values.get("usage")
    return usage if isinstance(usage, Usage) else Usage()


def _working_actors(
    saver: BaseCheckpointSaver[Any], snapshot: StateSnapshot, returned: Collection[str]
) -> dict[str, Mapping[str, Any]]:
    """The newest state of each actor still at work in ``snapshot``'s step, by
    namespace.

    Each such actor checkpoints in a namespace under its step's task,
    ``executor:<task>`` (one ``Send`` per task) or ``executor:<task>|actor:<call>``
    (the eager runner's ``@task`` calls); an actor whose call has ``returned`` (the
    ids of those calls) is in :func:`finished_outputs` instead. Only the outermost
    namespace of each actor counts: a team's state already holds its finished
    members' usage.
    """
    working = {task.id for task in snapshot.tasks if task.result is None}
    if not working:
        return {}
    thread: RunnableConfig = {
        "configurable": {"thread_id": snapshot.config["configurable"]["thread_id"]}
    }
    step_began = snapshot.config["configurable"]["checkpoint_id"]
    stop_early = _lists_newest_first(saver)
    newest: dict[str, Mapping[str, Any]] = {}
    for child in saver.list(thread):
        if stop_early and child.config["configurable"]["checkpoint_id"] < step_began:
            break  # older than the step: so is everything after it
        ns = child.config["configurable"].get("checkpoint_ns", "")
        ids = [segment.partition(":")[2] for segment in ns.split("|")] if ns else []
        if ns in newest or not ids or ids[0] not in working or set(ids[1:]) & set(returned):
            continue
        newest[ns] = child.checkpoint.get("channel_values", {})
    return {
        ns: values
        for ns, values in newest.items()
        if not any(ns.startswith(other + "|") for other in newest)
    }


def _lists_newest_first(saver: BaseCheckpointSaver[Any]) -> bool:
    """Whether ``saver.list`` orders every namespace together by checkpoint id, newest
    first (LangGraph's SQL savers; the in-memory one lists namespace by namespace).
    Checkpoint ids grow with time, and a step's checkpoints are made after it began."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    if isinstance(saver, SqliteSaver):
        return True
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        return False
    return isinstance(saver, PostgresSaver)


def with_finished_tasks(snapshot: StateSnapshot, saver: BaseCheckpointSaver[Any]) -> StateSnapshot:
    """``snapshot`` as its step stands: the tasks the step had already finished
    merged into ``tasks``, and into ``usage`` their usage and that of the actors
    still at work (:func:`working_usage`). A run paused for a human or stopped
    mid-step (crash) shows its tasks and usage so far, as a finished step would."""
    if not snapshot.next:
        return snapshot
    item = saver.get_tuple(snapshot.config)
    outputs = finished_outputs(item)
    actors = _working_actors(saver, snapshot, _returned(item))
    working = sum((_usage_of(state) for state in actors.values()), Usage())
    usage = sum((o.get("usage") or Usage() for o in outputs), working)
    values = dict(snapshot.values)
    if usage != Usage():
        values["usage"] = (values.get("usage") or Usage()) + usage
    tasks = merge_tasks(values.get("tasks") or {}, _tasks_of(outputs))
    if started := _started(tasks, actors.values()):
        tasks = merge_tasks(tasks, started)
    if tasks != (values.get("tasks") or {}):
        values["tasks"] = tasks
    return snapshot._replace(values=values)


def _started(tasks: Mapping[str, Task], actors: Iterable[Mapping[str, Any]]) -> dict[str, Task]:
    """The tasks an actor is at work on that the state still has as pending: the eager
    scheduler writes a task's start with its result, when its step ends."""
    at_work = {task.id for state in actors if isinstance(task := state.get("task"), Task)}
    return {
        task_id: task.model_copy(update={"status": "in_progress"})
        for task_id, task in tasks.items()
        if task_id in at_work and task.status == "pending"
    }
