"""Where the answers posted for a thread's holder live, beside its lease: JSON files
beside the SQLite lock, rows of ``aimegraph_answers`` in Postgres, a table in this
process (see :func:`aimegraph.checkpoints.lease.hand_answer`).

Each posted answer is taken once: the holder either applies it (it is gone) or drops
it (the wait it answers had ended; it stays, marked, until its poster has read that),
and each of those moves is atomic against the poster withdrawing it.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from psycopg import Connection

AnswerOutcome = Literal["posted", "applied", "dropped"]
"""Where a posted answer is: waiting for the holder, taken to carry the run on, or
dropped by the holder (the wait it answers had ended)."""


@dataclass(frozen=True)
class Posted:
    """An answer posted for the process holding a thread: resume values by interrupt id."""

    key: str
    answers: dict[str, Any]
    sender: str


class Delivery(Protocol):
    """A posted answer, as its poster follows it."""

    def outcome(self) -> AnswerOutcome: ...

    def withdraw(self) -> bool:
        """Take the answer back; False when the holder took it first."""

    def close(self) -> None:
        """Forget the answer (a dropped one's record, a connection)."""


def answer_key() -> str:
    """A posted answer's key: unique, and sorting in the order answers were posted."""
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}"


# -- SQLite: files beside the lock


@dataclass(frozen=True)
class FileMailbox:
    """A thread's posted answers: one JSON file each beside its lock, renamed into place
    whole; the holder deletes one it applies and renames one it drops."""

    directory: Path
    digest: str

    def answer_path(self, key: str) -> Path:
        return self.directory / f"{self.digest}.answer-{key}"

    def dropped_path(self, key: str) -> Path:
        return self.directory / f"{self.digest}.dropped-{key}"

    def posted(self) -> list[Posted]:
        found = []
        for path in sorted(self.directory.glob(f"{self.digest}.answer-*")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue  # withdrawn meanwhile
            key = path.name.split(".answer-", 1)[1]
            found.append(Posted(key, dict(data["answers"]), str(data["sender"])))
        return found

    def settle(self, key: str, *, applied: bool) -> bool:
        try:
            if applied:
                self.answer_path(key).unlink()
            else:
                self.answer_path(key).rename(self.dropped_path(key))
        except FileNotFoundError:
            return False  # withdrawn
        return True

    def post(self, answers: dict[str, Any], sender: str) -> Delivery:
        self.directory.mkdir(parents=True, exist_ok=True)
        key = answer_key()
        draft = self.directory / f"{self.digest}.posting-{key}"
        draft.write_text(json.dumps({"answers": answers, "sender": sender}), encoding="utf-8")
        draft.rename(self.answer_path(key))
        return _FileDelivery(self, key)


@dataclass(frozen=True)
class _FileDelivery:
    mailbox: FileMailbox
    key: str

    def outcome(self) -> AnswerOutcome:
        if self.mailbox.answer_path(self.key).exists():
            return "posted"
        # Renamed, never copied: a dropped answer is under one name or the other.
        return "dropped" if self.mailbox.dropped_path(self.key).exists() else "applied"

    def withdraw(self) -> bool:
        try:
            self.mailbox.answer_path(self.key).unlink()
        except FileNotFoundError:
            return False
        return True

    def close(self) -> None:
        self.mailbox.dropped_path(self.key).unlink(missing_ok=True)


# -- this process


@dataclass
class ProcessMailbox:
    """The posted answers of the threads of stores only this process sees."""

    posted: dict[str, dict[str, Posted]] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def post(self, thread_id: str, answers: dict[str, Any], sender: str) -> Delivery:
        key = answer_key()
        with self.lock:
            self.posted.setdefault(thread_id, {})[key] = Posted(key, answers, sender)
        return _ProcessDelivery(self, thread_id, key)

    def posted_for(self, thread_id: str) -> list[Posted]:
        with self.lock:
            posted = self.posted.get(thread_id, {})
            return [posted[key] for key in sorted(posted)]

    def settle(self, thread_id: str, key: str, *, applied: bool) -> bool:
        with self.lock:
            if self.posted.get(thread_id, {}).pop(key, None) is None:
                return False
            if not applied:
                self.dropped.add(key)
        return True


@dataclass(frozen=True)
class _ProcessDelivery:
    mailbox: ProcessMailbox
    thread_id: str
    key: str

    def outcome(self) -> AnswerOutcome:
        with self.mailbox.lock:
            if self.key in self.mailbox.posted.get(self.thread_id, {}):
                return "posted"
            return "dropped" if self.key in self.mailbox.dropped else "applied"

    def withdraw(self) -> bool:
        with self.mailbox.lock:
            return self.mailbox.posted.get(self.thread_id, {}).pop(self.key, None) is not None

    def close(self) -> None:
        with self.mailbox.lock:
            self.mailbox.dropped.discard(self.key)


# -- Postgres: a table

ANSWERS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS aimegraph_answers (key text PRIMARY KEY, "
    "thread_id text NOT NULL, answers jsonb NOT NULL, sender text NOT NULL, "
    "state text NOT NULL DEFAULT 'posted', posted_at timestamptz NOT NULL DEFAULT now())"
)


def pg_posted(conn: Connection[Any], thread_id: str) -> list[Posted]:
    rows = conn.execute(
        "SELECT key, answers, sender FROM aimegraph_answers "
        "WHERE thread_id = %s AND state = 'posted' ORDER BY key",
        (thread_id,),
    ).fetchall()
    return [Posted(key, dict(answers), sender) for key, answers, sender in rows]


def pg_settle(conn: Connection[Any], key: str, *, applied: bool) -> bool:
    settle = (
        "DELETE FROM aimegraph_answers"
        if applied
        else "UPDATE aimegraph_answers SET state = 'dropped'"
    )
    row = conn.execute(f"{settle} WHERE key = %s AND state = 'posted' RETURNING 1", (key,))
    return row.fetchone() is not None


def pg_post(
    conn: Connection[Any], thread_id: str, answers: dict[str, Any], sender: str
) -> Delivery:
    """Post on ``conn`` (the table exists), which the delivery then owns."""
    from psycopg.types.json import Jsonb

    key = answer_key()
    conn.execute(
        "INSERT INTO aimegraph_answers (key, thread_id, answers, sender) VALUES (%s, %s, %s, %s)",
        (key, thread_id, Jsonb(answers), sender),
    )
    return _PostgresDelivery(conn, key)


@dataclass(frozen=True)
class _PostgresDelivery:
    conn: Connection[Any]
    key: str

    def outcome(self) -> AnswerOutcome:
        row = self.conn.execute(
            "SELECT state FROM aimegraph_answers WHERE key = %s", (self.key,)
        ).fetchone()
        return "applied" if row is None else "dropped" if row[0] == "dropped" else "posted"

    def withdraw(self) -> bool:
        row = self.conn.execute(
            "DELETE FROM aimegraph_answers WHERE key = %s AND state = 'posted' RETURNING 1",
            (self.key,),
        ).fetchone()
        return row is not None

    def close(self) -> None:
        try:
            self.conn.execute("DELETE FROM aimegraph_answers WHERE key = %s", (self.key,))
        finally:
            self.conn.close()
