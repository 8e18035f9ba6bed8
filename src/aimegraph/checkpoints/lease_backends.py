"""Where a thread's lease, cancel requests and posted answers live: SQLite flocks,
Postgres locks, this process (the answers' own records: :mod:`.lease_answers`)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aimegraph.checkpoints.lease_answers import (
    ANSWERS_SCHEMA,
    Delivery,
    FileMailbox,
    Posted,
    ProcessMailbox,
    pg_post,
    pg_posted,
    pg_settle,
)
from aimegraph.checkpoints.urls import CheckpointConnectionError, redact_url

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["THREAD_LOCK_KEY"]


class _Held(Protocol):
    """One acquired lease, as its backend keeps it."""

    def cancel_requested(self) -> bool:
        """Whether a cancel was requested; raises when the lease itself is gone."""

    def posted_answers(self) -> list[Posted]:
        """The answers posted for the thread and not yet taken, oldest first."""

    def settle_answer(self, key: str, *, applied: bool) -> bool:
        """Take the posted answer ``key``: applied, or dropped (its poster is told);
        False when its poster withdrew it first."""

    def release(self) -> None: ...


class _Backend(Protocol):
    def try_acquire(self, thread_id: str, holder: str) -> _Held | None: ...

    def post_answer(self, thread_id: str, answers: dict[str, Any], sender: str) -> Delivery: ...

    def holders(self, thread_ids: list[str]) -> dict[str, str]: ...

    def request_cancel(self, thread_id: str, reason: str) -> None: ...

    def cancel_pending(self, thread_id: str) -> str | None: ...

    def clear_cancel(self, thread_id: str) -> None: ...


def _digest(thread_id: str) -> str:
    return hashlib.sha256(thread_id.encode()).hexdigest()[:32]


@dataclass
class _FileHeld:
    fd: int
    cancel_file: Path
    mailbox: FileMailbox

    def cancel_requested(self) -> bool:
        return self.cancel_file.exists()

    def posted_answers(self) -> list[Posted]:
        return self.mailbox.posted()

    def settle_answer(self, key: str, *, applied: bool) -> bool:
        return self.mailbox.settle(key, applied=applied)

    def release(self) -> None:
        os.close(self.fd)  # closing the descriptor drops the flock


class _FileLeases:
    """``flock`` on one file per thread. A reader checks a lock with a shared
    ``flock`` it drops at once; a holder takes an exclusive one."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, thread_id: str, suffix: str) -> Path:
        return self.directory / f"{_digest(thread_id)}{suffix}"

    def try_acquire(self, thread_id: str, holder: str) -> _Held | None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path(thread_id, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        return _FileHeld(fd, self._path(thread_id, ".cancel"), self._mailbox(thread_id))

    def _mailbox(self, thread_id: str) -> FileMailbox:
        return FileMailbox(self.directory, _digest(thread_id))

    def post_answer(self, thread_id: str, answers: dict[str, Any], sender: str) -> Delivery:
        return self._mailbox(thread_id).post(answers, sender)

    def holders(self, thread_ids: list[str]) -> dict[str, str]:
        found = {}
        for thread_id in thread_ids:
            try:
                fd = os.open(self._path(thread_id, ".lock"), os.O_RDONLY)
            except FileNotFoundError:
                continue  # never held
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                found[thread_id] = os.pread(fd, 200, 0).decode(errors="replace") or "a process"
            finally:
                os.close(fd)
        return found

    def request_cancel(self, thread_id: str, reason: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._path(thread_id, ".cancel").write_text(reason, encoding="utf-8")

    def cancel_pending(self, thread_id: str) -> str | None:
        try:
            return self._path(thread_id, ".cancel").read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def clear_cancel(self, thread_id: str) -> None:
        self._path(thread_id, ".cancel").unlink(missing_ok=True)


@dataclass
class _ProcessLeases:
    """Leases of stores only this process sees."""

    held: dict[str, str] = field(default_factory=dict)
    cancels: dict[str, str] = field(default_factory=dict)
    answers: ProcessMailbox = field(default_factory=ProcessMailbox)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def try_acquire(self, thread_id: str, holder: str) -> _Held | None:
        with self.lock:
            if thread_id in self.held:
                return None
            self.held[thread_id] = f"{holder}, thread {threading.current_thread().name}"
        return _ProcessHeld(self, thread_id)

    def holders(self, thread_ids: list[str]) -> dict[str, str]:
        with self.lock:
            return {t: self.held[t] for t in thread_ids if t in self.held}

    def request_cancel(self, thread_id: str, reason: str) -> None:
        with self.lock:
            self.cancels[thread_id] = reason

    def cancel_pending(self, thread_id: str) -> str | None:
        with self.lock:
            return self.cancels.get(thread_id)

    def clear_cancel(self, thread_id: str) -> None:
        with self.lock:
            self.cancels.pop(thread_id, None)

    def post_answer(self, thread_id: str, answers: dict[str, Any], sender: str) -> Delivery:
        return self.answers.post(thread_id, answers, sender)


@dataclass
class _ProcessHeld:
    leases: _ProcessLeases
    thread_id: str

    def cancel_requested(self) -> bool:
        return self.leases.cancel_pending(self.thread_id) is not None

    def posted_answers(self) -> list[Posted]:
        return self.leases.answers.posted_for(self.thread_id)

    def settle_answer(self, key: str, *, applied: bool) -> bool:
        return self.leases.answers.settle(self.thread_id, key, applied=applied)

    def release(self) -> None:
        with self.leases.lock:
            self.leases.held.pop(self.thread_id, None)


# Shared with the distributed runs (aimegraph.distributed.runner): one key space.
THREAD_LOCK_KEY = "hashtextextended('aimegraph-thread:' || %s, 0)"
_TRY_LOCK_SQL = f"SELECT pg_try_advisory_lock({THREAD_LOCK_KEY})"
_UNLOCK_SQL = f"SELECT pg_advisory_unlock({THREAD_LOCK_KEY})"
_HOLDERS_SQL = f"""
SELECT t.thread_id, a.application_name
FROM unnest(%s::text[]) AS t(thread_id)
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
 AND ((l.classid::bigint << 32) | l.objid::bigint) = {THREAD_LOCK_KEY.replace("%s", "t.thread_id")}
JOIN pg_stat_activity a ON a.pid = l.pid
"""
_CANCELS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS aimegraph_cancels (thread_id text PRIMARY KEY, "
    "reason text NOT NULL, requested_at timestamptz NOT NULL DEFAULT now())"
)
# Serialises CREATE TABLE IF NOT EXISTS across processes (as the runs table's).
_CANCELS_SCHEMA_LOCK_ID = 0x61696D65_63616E63  # "aimecanc"
# A holder whose machine vanished (no FIN) is noticed by the server within ~25 s.
_KEEPALIVES = (
    ("tcp_keepalives_idle", "10"),
    ("tcp_keepalives_interval", "5"),
    ("tcp_keepalives_count", "3"),
)
_CONNECT_TIMEOUT_S = 10


@dataclass
class _PostgresHeld:
    conn: Connection[Any]
    thread_id: str

    def cancel_requested(self) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM aimegraph_cancels WHERE thread_id = %s", (self.thread_id,)
        ).fetchone()
        return row is not None

    def posted_answers(self) -> list[Posted]:
        return pg_posted(self.conn, self.thread_id)

    def settle_answer(self, key: str, *, applied: bool) -> bool:
        return pg_settle(self.conn, key, applied=applied)

    def release(self) -> None:
        import psycopg

        # Unlocked before the close: the server ends a closed session after the client has
        # gone, so its lock would still show, and refuse another holder, for a moment.
        try:
            self.conn.execute(_UNLOCK_SQL, (self.thread_id,))
        except psycopg.Error:
            pass  # a dead session: its lock went with it
        finally:
            self.conn.close()


class _PostgresLeases:
    """Session-level advisory locks, each on a connection of its own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._schema_ready = False

    def _connect(self, name: str = "aimegraph") -> Connection[Any]:
        import psycopg

        try:
            return psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=_CONNECT_TIMEOUT_S,
                application_name=name[:63],
            )
        except psycopg.OperationalError as exc:
            raise CheckpointConnectionError(
                f"cannot connect to {redact_url(self.url)} for the thread lease: {str(exc).strip()}"
            ) from exc

    def _ensure_schema(self, conn: Connection[Any]) -> None:
        if self._schema_ready:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CANCELS_SCHEMA_LOCK_ID,))
            conn.execute(_CANCELS_SCHEMA)
            conn.execute(ANSWERS_SCHEMA)
        self._schema_ready = True

    def try_acquire(self, thread_id: str, holder: str) -> _Held | None:
        conn = self._connect(f"aimegraph {holder}")
        try:
            for name, value in _KEEPALIVES:
                conn.execute(f"SET {name} = {value}")
            row = conn.execute(_TRY_LOCK_SQL, (thread_id,)).fetchone()
            if row is None or not row[0]:
                conn.close()
                return None
            self._ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        return _PostgresHeld(conn, thread_id)

    def holders(self, thread_ids: list[str]) -> dict[str, str]:
        with self._connect() as conn:
            rows = conn.execute(_HOLDERS_SQL, (thread_ids,)).fetchall()
        return {t: (name.removeprefix("aimegraph ") or "a session") for t, name in rows}

    def request_cancel(self, thread_id: str, reason: str) -> None:
        with self._connect() as conn:
            self._ensure_schema(conn)
            conn.execute(
                "INSERT INTO aimegraph_cancels (thread_id, reason) VALUES (%s, %s) "
                "ON CONFLICT (thread_id) DO UPDATE SET reason = EXCLUDED.reason",
                (thread_id, reason),
            )

    def cancel_pending(self, thread_id: str) -> str | None:
        with self._connect() as conn:
            row = conn.execute("SELECT to_regclass('aimegraph_cancels')").fetchone()
            if row is None or row[0] is None:
                return None
            found = conn.execute(
                "SELECT reason FROM aimegraph_cancels WHERE thread_id = %s", (thread_id,)
            ).fetchone()
        return str(found[0]) if found is not None else None

    def clear_cancel(self, thread_id: str) -> None:
        with self._connect() as conn:
            row = conn.execute("SELECT to_regclass('aimegraph_cancels')").fetchone()
            if row is not None and row[0] is not None:
                conn.execute("DELETE FROM aimegraph_cancels WHERE thread_id = %s", (thread_id,))

    def post_answer(self, thread_id: str, answers: dict[str, Any], sender: str) -> Delivery:
        conn = self._connect()
        try:
            self._ensure_schema(conn)
            return pg_post(conn, thread_id, answers, sender)
        except BaseException:
            conn.close()
            raise
