"""The queue state of distributed runs, in Postgres next to their checkpoints.

Checkpoints say what a run has done; they cannot say that a run is waiting in the
broker or held by a worker. One row per thread in ``aimegraph_runs`` does:
``queued`` (submitted or resumed, no worker has it yet), ``running`` (a worker
holds the thread's lock), ``paused`` (waiting for a human) or ``finished``. Every
change is announced with ``NOTIFY aimegraph_runs`` so ``wait`` needs no polling.

This module needs psycopg only (no Celery), so the CLI's ``threads`` and ``show``
can read it with the ``[postgres]`` extra alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from aimegraph.checkpoints import (
    CheckpointConnectionError,
    CheckpointURLError,
    RunSettings,
    ThreadSummary,
    redact_url,
)
from aimegraph.checkpoints.runs import SETTINGS_KEY

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = [
    "ACTIVE_STATES",
    "ENDED_STATES",
    "RunRecord",
    "RunState",
    "ThreadExistsError",
    "active_runs",
    "connect",
    "find_run",
    "is_postgres_url",
]

RunState = Literal["queued", "running", "paused", "finished"]
ACTIVE_STATES: tuple[RunState, ...] = ("queued", "running")
ENDED_STATES: tuple[RunState, ...] = ("paused", "finished")
CHANNEL = "aimegraph_runs"
_CONNECT_TIMEOUT_S = 10
# Serialises CREATE TABLE IF NOT EXISTS across processes (it is not atomic: two
# first-time creators can both fail on the catalog's unique index).
SCHEMA_LOCK_ID = 0x61696D65_72756E73  # "aimeruns"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS aimegraph_runs (
    thread_id    text PRIMARY KEY,
    state        text NOT NULL CHECK (state IN ('queued', 'running', 'paused', 'finished')),
    status       text,
    reason       text,
    goal         text NOT NULL,
    settings     text NOT NULL,
    worker       text,
    deliveries   integer NOT NULL DEFAULT 0,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
)
"""
_COLUMNS = "thread_id, state, status, reason, goal, settings, worker, deliveries, submitted_at"


class ThreadExistsError(ValueError):
    """A run was submitted under a thread id that is already taken."""


@dataclass(frozen=True)
class RunRecord:
    """One distributed run's queue state."""

    thread_id: str
    state: RunState
    status: str | None  # the run's own status once finished (succeeded, failed, ...)
    reason: str | None
    goal: str
    settings: RunSettings
    worker: str | None
    deliveries: int  # how many times a worker has taken the run (2+ after a redelivery)
    submitted_at: datetime

    @property
    def outcome(self) -> str:
        """``paused``, the finished run's status, or the queue state while active."""
        if self.state == "finished":
            return self.status or "failed"
        return self.state

    def as_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "status": self.outcome,
            "reason": self.reason,
            "goal": self.goal,
            "model": self.settings.model,
            "worker": self.worker,
            "deliveries": self.deliveries,
            "submitted": self.submitted_at.isoformat(),
        }

    def summary(self) -> ThreadSummary:
        return ThreadSummary(
            thread_id=self.thread_id,
            goal=self.goal,
            status=self.outcome,
            updated=self.submitted_at.isoformat(),
            paused=self.state == "paused",
        )


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and str(url).lower().startswith(("postgresql://", "postgres://"))


@contextmanager
def connect(url: str) -> Iterator[Connection[Any]]:
    """An autocommit connection with the runs table in place; clear errors for a
    bad URL or an unreachable server."""
    try:
        import psycopg
    except ImportError as exc:
        raise ImportError(
            f"distributed runs need psycopg: pip install 'aimegraph[distributed]' ({exc})"
        ) from exc
    if not is_postgres_url(url):
        raise CheckpointURLError(
            f"distributed runs keep their checkpoints in Postgres; got {redact_url(url)!r}, "
            "expected postgresql://user:password@host:5432/dbname"
        )
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
    except psycopg.ProgrammingError as exc:
        raise CheckpointURLError(f"bad database URL {redact_url(url)!r}: {exc}") from exc
    except psycopg.OperationalError as exc:
        raise CheckpointConnectionError(
            f"cannot connect to the run database {redact_url(url)}: {str(exc).strip()}"
        ) from exc
    with conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_ID,))
            conn.execute(_SCHEMA)
        yield conn


def insert_queued(conn: Connection[Any], thread_id: str, goal: str, settings: RunSettings) -> None:
    """Record a new submission; ThreadExistsError if the thread id is taken."""
    row = conn.execute(
        "INSERT INTO aimegraph_runs (thread_id, state, goal, settings) "
        "VALUES (%s, 'queued', %s, %s) ON CONFLICT (thread_id) DO NOTHING RETURNING 1",
        (thread_id, goal, _settings_json(settings)),
    ).fetchone()
    if row is None:
        raise ThreadExistsError(f"thread {thread_id!r} exists; pick a new id")
    _notify(conn, thread_id)


def delete(conn: Connection[Any], thread_id: str) -> None:
    """Forget a submission whose message never reached the broker."""
    conn.execute("DELETE FROM aimegraph_runs WHERE thread_id = %s", (thread_id,))


def requeue(conn: Connection[Any], thread_id: str) -> bool:
    """Mark a paused (or stopped) run queued again; False if it is queued or
    running, or was cancelled."""
    row = conn.execute(
        "UPDATE aimegraph_runs SET state = 'queued', status = NULL, reason = NULL, "
        "updated_at = now() WHERE thread_id = %s AND state IN ('paused', 'finished') "
        "AND status IS DISTINCT FROM 'cancelled' RETURNING 1",
        (thread_id,),
    ).fetchone()
    if row is not None:
        _notify(conn, thread_id)
    return row is not None


def mark_queued(conn: Connection[Any], thread_id: str) -> None:
    """A run a worker stopped before it ended (a drain): queued for its retry."""
    conn.execute(
        "UPDATE aimegraph_runs SET state = 'queued', worker = NULL, updated_at = now() "
        "WHERE thread_id = %s",
        (thread_id,),
    )
    _notify(conn, thread_id)


def mark_running(conn: Connection[Any], thread_id: str, worker: str) -> None:
    conn.execute(
        "UPDATE aimegraph_runs SET state = 'running', worker = %s, "
        "deliveries = deliveries + 1, updated_at = now() WHERE thread_id = %s",
        (worker, thread_id),
    )
    _notify(conn, thread_id)


def mark_ended(
    conn: Connection[Any],
    thread_id: str,
    state: Literal["paused", "finished"],
    status: str | None,
    reason: str | None = None,
) -> None:
    conn.execute(
        "UPDATE aimegraph_runs SET state = %s, status = %s, reason = %s, updated_at = now() "
        "WHERE thread_id = %s",
        (state, status, reason, thread_id),
    )
    _notify(conn, thread_id)


def get(conn: Connection[Any], thread_id: str) -> RunRecord | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM aimegraph_runs WHERE thread_id = %s", (thread_id,)
    ).fetchone()
    return _record(row) if row is not None else None


def wait_until_ended(conn: Connection[Any], thread_id: str, timeout: float | None) -> RunRecord:
    """Block until the run is paused or finished (LISTEN/NOTIFY; a re-read every few
    seconds covers a notification sent before LISTEN). TimeoutError after ``timeout``."""
    conn.execute(f"LISTEN {CHANNEL}")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        record = get(conn, thread_id)
        if record is None:
            raise LookupError(f"no distributed run {thread_id!r}")
        if record.state in ENDED_STATES:
            return record
        left = 5.0 if deadline is None else min(5.0, deadline - time.monotonic())
        if left <= 0:
            raise TimeoutError(f"run {thread_id!r} is still {record.state}")
        for notice in conn.notifies(timeout=left):
            if notice.payload == thread_id:
                break


def paused_waits(conn: Connection[Any], worker: str) -> list[float]:
    """How long each run ``worker`` paused has been waiting for a human, in seconds
    (a worker's ``human_wait`` alerts: each paused run counts on the worker that
    paused it, so no two workers alert on the same wait)."""
    rows = conn.execute(
        "SELECT extract(epoch FROM now() - updated_at) FROM aimegraph_runs "
        "WHERE state = 'paused' AND worker = %s",
        (worker,),
    ).fetchall()
    return [float(seconds) for (seconds,) in rows]


def find_run(url: str | None, thread_id: str) -> RunRecord | None:
    """The distributed run of ``thread_id``; None for non-Postgres stores, plain
    (non-distributed) threads, or a database that never had distributed runs."""
    with _reader(url) as conn:
        return get(conn, thread_id) if conn is not None else None


def active_runs(url: str | None) -> list[ThreadSummary]:
    """Runs queued or held by a worker, for ``aimegraph threads`` to merge with the
    checkpointed threads (their queue state is newer than their checkpoints)."""
    with _reader(url) as conn:
        if conn is None:
            return []
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM aimegraph_runs WHERE state IN ('queued', 'running')"
        ).fetchall()
    return [_record(row).summary() for row in rows]


@contextmanager
def _reader(url: str | None) -> Iterator[Connection[Any] | None]:
    """A connection when ``url`` is a Postgres database with a runs table, else None
    (reading creates nothing)."""
    if not is_postgres_url(url):
        yield None
        return
    import psycopg

    with psycopg.connect(str(url), autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S) as conn:
        row = conn.execute("SELECT to_regclass('aimegraph_runs')").fetchone()
        yield conn if row is not None and row[0] is not None else None


def _notify(conn: Connection[Any], thread_id: str) -> None:
    conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, thread_id))


def _settings_json(settings: RunSettings) -> str:
    return str(settings.as_metadata()[SETTINGS_KEY])


def _record(row: Any) -> RunRecord:
    thread_id, state, status, reason, goal, settings, worker, deliveries, submitted = row
    parsed = RunSettings.from_metadata({SETTINGS_KEY: settings})
    if parsed is None:  # pragma: no cover - rows are only written from RunSettings
        raise ValueError(f"run {thread_id!r} has unreadable settings")
    return RunRecord(
        thread_id=thread_id,
        state=state,
        status=status,
        reason=reason,
        goal=goal,
        settings=parsed,
        worker=worker,
        deliveries=deliveries,
        submitted_at=submitted,
    )
