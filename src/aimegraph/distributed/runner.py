"""What a worker does with one delivery of a run: take the thread's lease, work
out from the checkpoints what is left to do, do it, record how it ended; and how a
distributed run is cancelled.

Celery delivers at least once (late acks, redelivery after a worker dies or after
the visibility timeout), so a delivery must be safe to repeat. The checkpoints
decide: a thread with no checkpoint starts, one that has not ended continues from
its last checkpoint, a paused one continues only with an answer to a pending
interrupt (or, once a human wait's deadline has passed, with its default), an
ended one is left alone. Runs use ``durability="sync"``: a step's
checkpoint and every finished task's writes are in Postgres before the next step
starts, so a redelivery never repeats finished work.

The lease is the one every entry point takes (``aimegraph.checkpoints.lease``: a
Postgres advisory lock per thread, held by a session of its own), so a worker,
``aimegraph resume`` and the dashboard never run one thread at once. A worker
shutting down drains its runs (:func:`drain_runs`): each stops at its next step
boundary and its delivery is retried, on another worker or after the restart.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphDrained
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Command, StateSnapshot

from aimegraph.checkpoints import has_ended, open_checkpointer, run_config, run_state
from aimegraph.checkpoints.lease import (
    ThreadBusyError,
    ThreadLease,
    hold_thread,
    request_cancel,
)
from aimegraph.distributed import records
from aimegraph.distributed.records import RunRecord
from aimegraph.imports import import_object

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = [
    "DEFAULT_GRAPH_BUILDER",
    "GraphBuilder",
    "RunDrainedError",
    "ThreadBusyError",
    "cancel_distributed",
    "drain_runs",
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


class RunDrainedError(RuntimeError):
    """The run stopped at a step boundary before it ended (the worker is shutting
    down, or its lease's session ended): it is queued again, to be retried."""


# The leases of the runs in hand. No lock: drain_runs runs in a signal handler, and
# set.add, set.discard and tuple(set) are each atomic under the GIL.
_ACTIVE: set[ThreadLease] = set()


def drain_runs(reason: str = "worker shutdown") -> int:
    """Ask every run this process is executing to stop at its next step boundary
    (``RunControl.request_drain``); returns how many were asked. Safe to call
    from a signal handler."""
    leases = tuple(_ACTIVE)
    for lease in leases:
        lease.control.request_drain(reason)
    return len(leases)


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
    wake_at: Callable[[float], None] | None = None,
) -> RunRecord | None:
    """Run (or continue) ``thread_id`` while holding its lease; returns its record
    afterwards, None when no run was submitted under that id.

    ``resume`` maps interrupt ids to answers; ids no longer pending (the answer was
    applied by a worker that died later) are ignored. ``store`` is the worker's
    long-term memory, given to ``build_graph`` when it takes one (see
    :func:`takes_store`): the run recalls past runs and records its episodes there
    unless its config says ``memory="off"``. ``wake_at`` is called with the first
    deadline (epoch seconds) of the human waits a paused run waits on with a timeout
    (``escalation_timeout_s``, ``approval_timeout_s``, ``ask_human_timeout_s``): a
    delivery then, with no answer, resumes the overdue ones with their defaults.

    Raises:
        ThreadBusyError: another runner holds the thread (retry later).
        RunDrainedError: the run was stopped before it ended (it is queued again).
    """
    with hold_thread(checkpoints, thread_id) as lease, records.connect(checkpoints) as conn:
        record = records.get(conn, thread_id)
        if record is None:
            log.warning("no distributed run %r: message dropped", thread_id)
            return None
        if record.status == "cancelled":  # cancelled while queued: revoked
            return record
        _ACTIVE.add(lease)
        try:
            with open_checkpointer(checkpoints) as saver:
                deadline = _run(saver, conn, record, worker, build_graph, resume, store, lease)
            if deadline is not None and wake_at is not None:
                wake_at(deadline)
        except GraphDrained as exc:
            records.mark_queued(conn, thread_id)
            raise RunDrainedError(f"run {thread_id!r} stopped: {exc.reason}") from exc
        except Exception as exc:  # a bad model spec, tool import, a graph error...
            reason = f"worker error: {type(exc).__name__}: {exc}"
            records.mark_ended(conn, thread_id, "finished", "failed", reason)
            raise
        finally:
            _ACTIVE.discard(lease)
        return records.get(conn, thread_id)
    # The lease goes with its session: released here, or by Postgres when the
    # worker dies and its connection ends.


def _run(
    saver: BaseCheckpointSaver[Any],
    conn: Connection[Any],
    record: RunRecord,
    worker: str,
    build_graph: GraphBuilder,
    resume: Mapping[str, Any] | None,
    store: BaseStore | None,
    lease: ThreadLease,
) -> float | None:
    """Carry the run on; the first deadline of the human waits it ends paused on, if
    any (each new wait is announced to the run's ``notify_webhook``)."""
    from aimegraph.notify import announce_waits
    from aimegraph.steering import invoke_held, settle_pending_cancel
    from aimegraph.waits import wait_deadlines

    thread_id = record.thread_id
    if store is not None and takes_store(build_graph):
        graph = build_graph(record.settings, saver, store=store)
    else:
        graph = build_graph(record.settings, saver)
    settle_pending_cancel(graph, thread_id)
    snapshot = graph.get_state(run_config(thread_id))
    inputs = _next_inputs(snapshot, record.goal, resume)
    if inputs is _NOTHING_TO_DO:
        if record.state in ("running", "queued"):  # a dead worker's run that had ended
            _record_end(conn, thread_id, snapshot)
        return None  # a pause's wake-up was asked for by the delivery that paused it
    records.mark_running(conn, thread_id, worker)
    record.settings.config.workspace.mkdir(parents=True, exist_ok=True)
    known = {i.id for i in snapshot.interrupts}
    invoke_held(graph, inputs, run_config(thread_id, record.settings), lease, durability="sync")
    snapshot = graph.get_state(run_config(thread_id))
    _record_end(conn, thread_id, snapshot)
    announce_waits(record.settings.config, thread_id, snapshot.interrupts, known)
    return min(wait_deadlines(snapshot.interrupts).values(), default=None)


def cancel_distributed(
    checkpoints: str, record: RunRecord, *, wait: bool = False, reason: str | None = None
) -> str:
    """Cancel a distributed run: a queued one is revoked (its delivery finds it
    cancelled and drops it), a paused or stopped one ends ``cancelled`` at once, one
    a worker is running stops at its next step (``"requested"``; ``wait`` waits
    until it has). Returns ``"cancelled"`` or ``"requested"``.

    Raises:
        LookupError: the run has ended already.
    """
    from aimegraph.steering import end_cancelled, reader_graph

    thread_id = record.thread_id
    if record.state == "finished":
        raise LookupError(f"nothing to cancel: the run has ended ({record.outcome})")
    try:
        lease = hold_thread(checkpoints, thread_id)
    except ThreadBusyError:
        request_cancel(checkpoints, thread_id, reason)
        if not wait:
            return "requested"
        with records.connect(checkpoints) as conn:
            records.wait_until_ended(conn, thread_id, None)
        return "cancelled"
    with lease, open_checkpointer(checkpoints) as saver, records.connect(checkpoints) as conn:
        graph = reader_graph(saver)
        snapshot = graph.get_state(run_config(thread_id))
        if snapshot.created_at and not has_ended(snapshot):
            end_cancelled(graph, thread_id, reason)
        records.mark_ended(conn, thread_id, "finished", "cancelled", reason or "cancelled")
    return "cancelled"


_NOTHING_TO_DO = object()


def _next_inputs(snapshot: StateSnapshot, goal: str, resume: Mapping[str, Any] | None) -> Any:
    from aimegraph.waits import overdue_answers

    if not snapshot.created_at:  # no checkpoint yet: start the run
        return {"goal": goal}
    if snapshot.interrupts:
        pending = {i.id for i in snapshot.interrupts}
        answers = {k: v for k, v in (resume or {}).items() if k in pending}
        answers = answers or overdue_answers(snapshot.interrupts)  # unanswered in time
        return Command(resume=answers) if answers else _NOTHING_TO_DO
    return _NOTHING_TO_DO if has_ended(snapshot) else None


def _record_end(conn: Connection[Any], thread_id: str, snapshot: StateSnapshot) -> None:
    state = run_state(snapshot)
    if state == "paused":
        records.mark_ended(conn, thread_id, "paused", None)
    else:
        reason = snapshot.values.get("reason")
        records.mark_ended(conn, thread_id, "finished", state, str(reason) if reason else None)
