"""What a worker does with one delivery of a run: take the thread's lock, work out
from the checkpoints what is left to do, do it, record how it ended.

Celery delivers at least once (late acks, redelivery after a worker dies or after
the visibility timeout), so a delivery must be safe to repeat. The checkpoints
decide: a thread with no checkpoint starts, one stopped mid-way continues from its
last checkpoint, a paused one continues only with an answer to a pending
interrupt, an ended one is left alone. Runs use ``durability="sync"``: a step's
checkpoint and every finished task's writes are in Postgres before the next step
starts, so a redelivery never repeats finished work.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Command, StateSnapshot

from aimegraph.checkpoints import open_checkpointer, run_config, run_state
from aimegraph.distributed import records
from aimegraph.distributed.records import RunRecord
from aimegraph.imports import import_object

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = [
    "DEFAULT_GRAPH_BUILDER",
    "GraphBuilder",
    "ThreadBusyError",
    "execute_run",
    "load_graph_builder",
    "takes_store",
]

log = logging.getLogger(__name__)

GraphBuilder = Callable[..., CompiledStateGraph[Any, Any, Any]]
DEFAULT_GRAPH_BUILDER = "aimegraph.steering:run_graph"
"""How a worker builds a run's graph unless ``aimegraph worker --graph`` names another
callable ``(RunSettings, checkpointer, store=None) -> compiled graph`` (e.g. to add
your tools). It gets the worker's memory store as ``store=`` when it has a ``store``
parameter (or ``**kwargs``); a builder without one is called as
``(settings, checkpointer)`` and its runs have no long-term memory."""

# Session-level advisory lock per thread, in its own key space (the text is hashed
# to the 64-bit key by Postgres itself).
_LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended('aimegraph-thread:' || %s, 0))"


class ThreadBusyError(RuntimeError):
    """Another worker holds the thread's lock (it is running the thread now)."""


def load_graph_builder(path: str) -> GraphBuilder:
    """Import ``module:attribute``; ValueError with the reason when it cannot."""
    builder = import_object(
        path,
        malformed=f"graph builder {path!r} must look like 'package.module:function'",
        failed="cannot load graph builder",
    )
    if not callable(builder):
        raise ValueError(f"graph builder {path!r} is not callable")
    return builder  # type: ignore[no-any-return]


def takes_store(builder: GraphBuilder) -> bool:
    """Whether ``builder`` accepts ``store=`` (older two-argument builders do not)."""
    try:
        parameters = inspect.signature(builder).parameters.values()
    except (TypeError, ValueError):  # no signature to read (some builtins, C callables)
        return False
    return any(
        (p.name == "store" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD
        for p in parameters
    )


def execute_run(
    checkpoints: str,
    thread_id: str,
    worker: str,
    build_graph: GraphBuilder,
    resume: Mapping[str, Any] | None = None,
    store: BaseStore | None = None,
) -> RunRecord | None:
    """Run (or continue) ``thread_id`` while holding its lock; returns its record
    afterwards, None when no run was submitted under that id.

    ``resume`` maps interrupt ids to answers; ids no longer pending (the answer was
    applied by a worker that died later) are ignored. ``store`` is the worker's
    long-term memory, given to ``build_graph`` when it takes one (see
    :func:`takes_store`): the run recalls past runs and records its episodes there
    unless its config says ``memory="off"``.

    Raises:
        ThreadBusyError: another worker holds the thread (retry later).
    """
    with records.connect(checkpoints) as conn:
        locked = conn.execute(_LOCK_SQL, (thread_id,)).fetchone()
        if locked is None or not locked[0]:
            raise ThreadBusyError(f"thread {thread_id!r} is held by another worker")
        record = records.get(conn, thread_id)
        if record is None:
            log.warning("no distributed run %r: message dropped", thread_id)
            return None
        with open_checkpointer(checkpoints) as saver:
            try:
                _run(saver, conn, record, worker, build_graph, resume, store)
            except Exception as exc:  # a bad model spec, tool import, a graph error...
                reason = f"worker error: {type(exc).__name__}: {exc}"
                records.mark_ended(conn, thread_id, "finished", "failed", reason)
                raise
        return records.get(conn, thread_id)
    # The lock goes with the connection: released here, or by Postgres when the
    # worker dies and its session ends.


def _run(
    saver: BaseCheckpointSaver[Any],
    conn: Connection[Any],
    record: RunRecord,
    worker: str,
    build_graph: GraphBuilder,
    resume: Mapping[str, Any] | None,
    store: BaseStore | None,
) -> None:
    thread_id = record.thread_id
    if store is not None and takes_store(build_graph):
        graph = build_graph(record.settings, saver, store=store)
    else:
        graph = build_graph(record.settings, saver)
    snapshot = graph.get_state(run_config(thread_id))
    inputs = _next_inputs(snapshot, record.goal, resume)
    if inputs is _NOTHING_TO_DO:
        if record.state == "running":  # a dead worker's run that had ended
            _record_end(conn, thread_id, snapshot)
        return
    records.mark_running(conn, thread_id, worker)
    record.settings.config.workspace.mkdir(parents=True, exist_ok=True)
    graph.invoke(inputs, run_config(thread_id, record.settings), durability="sync")
    _record_end(conn, thread_id, graph.get_state(run_config(thread_id)))


_NOTHING_TO_DO = object()


def _next_inputs(snapshot: StateSnapshot, goal: str, resume: Mapping[str, Any] | None) -> Any:
    if not snapshot.created_at:  # no checkpoint yet: start the run
        return {"goal": goal}
    if snapshot.interrupts:
        pending = {i.id for i in snapshot.interrupts}
        answers = {k: v for k, v in (resume or {}).items() if k in pending}
        return Command(resume=answers) if answers else _NOTHING_TO_DO
    return None if snapshot.next else _NOTHING_TO_DO


def _record_end(conn: Connection[Any], thread_id: str, snapshot: StateSnapshot) -> None:
    state = run_state(snapshot)
    if state == "paused":
        records.mark_ended(conn, thread_id, "paused", None)
    else:
        reason = snapshot.values.get("reason")
        records.mark_ended(conn, thread_id, "finished", state, str(reason) if reason else None)
