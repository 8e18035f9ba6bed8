"""One process at a time creates a Postgres database's tables.

LangGraph's Postgres savers and stores create their tables with migrations that
are not safe to run from two processes at once on a fresh database: both insert
the same version rows (``UniqueViolation`` on ``checkpoint_migrations_pkey`` or
``store_migrations_pkey``), both create the same types (``pg_type_typname_nsp_index``),
or they deadlock. Workers started together would lose all but one. So every
part's ``setup()`` (checkpointer, memory store) runs under one session-level
advisory lock per database, and a process that finds it taken waits its turn.

The lock is polled with ``pg_try_advisory_lock`` rather than waited for with
``pg_advisory_lock``: ``setup()`` runs ``CREATE INDEX CONCURRENTLY``, which waits
for every open transaction, including a blocked lock call, and the two would wait
for each other forever (Postgres does not detect that deadlock). The lock is held
on a connection of its own (autocommit, idle between polls), never on the one
running the migrations.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection

__all__ = ["SetupLockTimeout", "asetup_lock", "setup_lock"]

SETUP_LOCK_ID = 0x61696D65_67726170  # "aimegrap": any fixed 64-bit key
SETUP_LOCK_TIMEOUT_S = 120.0
_POLL_S = 0.1
_TRY = "SELECT pg_try_advisory_lock(%s)"
_UNLOCK = "SELECT pg_advisory_unlock(%s)"


class SetupLockTimeout(ConnectionError):
    """Another process held the setup lock for longer than ``SETUP_LOCK_TIMEOUT_S``."""


@contextmanager
def setup_lock(guard: Connection[Any], where: str, what: str) -> Iterator[None]:
    """Hold the setup lock of ``guard``'s database for the block.

    Args:
        guard: An autocommit connection that runs nothing else meanwhile.
        where: The database, for the error message (a redacted URL).
        what: What is being set up, for the error message ("the checkpoint tables").

    Raises:
        SetupLockTimeout: the lock stayed taken for ``SETUP_LOCK_TIMEOUT_S``.
    """
    deadline = time.monotonic() + SETUP_LOCK_TIMEOUT_S
    while not _taken(guard.execute(_TRY, (SETUP_LOCK_ID,)).fetchone()):
        if time.monotonic() > deadline:
            raise SetupLockTimeout(_timed_out(where, what))
        time.sleep(_POLL_S)
    try:
        yield
    finally:
        guard.execute(_UNLOCK, (SETUP_LOCK_ID,))


@asynccontextmanager
async def asetup_lock(guard: AsyncConnection[Any], where: str, what: str) -> AsyncIterator[None]:
    """Async twin of :func:`setup_lock`."""
    deadline = time.monotonic() + SETUP_LOCK_TIMEOUT_S
    while not _taken(await (await guard.execute(_TRY, (SETUP_LOCK_ID,))).fetchone()):
        if time.monotonic() > deadline:
            raise SetupLockTimeout(_timed_out(where, what))
        await asyncio.sleep(_POLL_S)
    try:
        yield
    finally:
        await guard.execute(_UNLOCK, (SETUP_LOCK_ID,))


def _taken(row: Any) -> bool:
    return row is not None and bool(row[0])


def _timed_out(where: str, what: str) -> str:
    return (
        f"gave up after {SETUP_LOCK_TIMEOUT_S:.0f} s waiting for another process to "
        f"finish creating {what} in {where}"
    )
