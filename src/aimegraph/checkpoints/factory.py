"""Open a LangGraph checkpointer from a URL, and the small thread helpers around it.

Accepted URLs (``CHECKPOINT_URL_FORMS``):

``memory``
    ``InMemorySaver``: nothing persists after the process ends.
``sqlite:///relative/path.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:``
    ``SqliteSaver`` / ``AsyncSqliteSaver`` (langgraph-checkpoint-sqlite, a core
    dependency). The default, ``DEFAULT_CHECKPOINT_URL``, is
    ``.aimegraph/checkpoints.db`` under the working directory.
``postgresql://user:pass@host:port/db`` (also ``postgres://``)
    ``PostgresSaver`` / ``AsyncPostgresSaver`` over a psycopg connection pool
    (langgraph-checkpoint-postgres, extra ``aimegraph[postgres]``).

Every saver is built with ``serde=make_serializer()`` (restricted deserialisation,
see ``aimegraph.checkpoints.serde``), has its tables created before it is handed
out, and has its connection closed when the ``with`` block exits.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.base import SerializerProtocol

from aimegraph.checkpoints.lease import remember_location
from aimegraph.checkpoints.serde import make_serializer
from aimegraph.checkpoints.setup_lock import SetupLockTimeout, asetup_lock, setup_lock
from aimegraph.checkpoints.urls import (
    CHECKPOINT_URL_FORMS,
    DEFAULT_CHECKPOINT_URL,
    CheckpointConnectionError,
    CheckpointURLError,
    bad_url_message,
    parse_checkpoint_url,
    redact_url,
    sqlite_file,
    sqlite_url,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection
    from psycopg.rows import DictRow

__all__ = [
    "CHECKPOINT_URL_FORMS",
    "DEFAULT_CHECKPOINT_URL",
    "CheckpointConnectionError",
    "CheckpointURLError",
    "MissingCheckpointBackendError",
    "aopen_checkpointer",
    "new_thread_id",
    "open_checkpointer",
    "redact_url",
    "sqlite_file",
    "thread_config",
]

POSTGRES_INSTALL_HINT = "pip install 'aimegraph[postgres]'"

# The Postgres savers hold one lock per saver around every query, so a second
# pooled connection would never run in parallel; the pool is there to replace
# broken connections (server restart, idle timeout) instead of failing a long run.
_PG_POOL_OPTIONS: dict[str, Any] = {
    "min_size": 1,
    "max_size": 2,
    "num_workers": 1,
    "name": "aimegraph-checkpoints",
}
_PG_CONNECT_TIMEOUT_S = 10
_PG_TABLES = "the checkpoint tables"

# What langgraph-checkpoint-postgres requires of a connection it did not open
# itself: autocommit (it never calls commit(), and its migrations include CREATE
# INDEX CONCURRENTLY, which cannot run inside a transaction), dict rows (it reads
# row["column"]) and no server-side prepared statements (they break behind
# transaction poolers such as PgBouncer).
_PG_CONNECTION_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0}


class MissingCheckpointBackendError(ImportError):
    """The URL needs an optional dependency that is not installed."""


def _open_sqlite_connection(path: str) -> sqlite3.Connection:
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    # SqliteSaver guards the connection with its own lock, and graph nodes run in
    # worker threads, so the connection must not be pinned to the opening thread.
    return sqlite3.connect(path, check_same_thread=False)


def _missing_postgres(exc: ImportError) -> MissingCheckpointBackendError:
    return MissingCheckpointBackendError(
        "postgresql:// checkpoints need langgraph-checkpoint-postgres and psycopg "
        f"(with its pool); install them with: {POSTGRES_INSTALL_HINT} ({exc})"
    )


@contextmanager
def open_checkpointer(
    url: str | None = None, *, serde: SerializerProtocol | None = None
) -> Iterator[BaseCheckpointSaver[Any]]:
    """Open the checkpointer for ``url`` (sync savers) and close it on exit.

    Args:
        url: One of ``CHECKPOINT_URL_FORMS``; ``None`` means
            ``DEFAULT_CHECKPOINT_URL``. SQLite parent directories are created.
        serde: Serializer override; defaults to ``make_serializer()``. Pass
            ``make_serializer(extra_types=[...])`` when your own graph keeps
            custom classes in its state.

    Yields:
        A ready saver (tables set up) to pass as ``checkpointer=`` to ``compile()``.

    Raises:
        CheckpointURLError: ``url`` is not an accepted form.
        MissingCheckpointBackendError: a Postgres URL without the ``[postgres]`` extra.
        CheckpointConnectionError: the Postgres server could not be reached, or
            another process kept the table-setup lock for over two minutes.

    Example:
        >>> with open_checkpointer("sqlite:///runs.db") as saver:  # doctest: +SKIP
        ...     graph = builder.compile(checkpointer=saver)
        ...     graph.invoke(inputs, thread_config(new_thread_id()))
    """
    target = parse_checkpoint_url(url)
    serde = serde if serde is not None else make_serializer()
    if target.kind == "memory":
        yield InMemorySaver(serde=serde)
    elif target.kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with closing(_open_sqlite_connection(target.location)) as conn:
            sqlite_saver = SqliteSaver(conn, serde=serde)
            sqlite_saver.setup()
            remember_location(sqlite_saver, sqlite_url(target.location))
            yield sqlite_saver
    else:
        with _postgres_saver(target.location, serde) as pg_saver:
            remember_location(pg_saver, target.location)
            yield pg_saver


@asynccontextmanager
async def aopen_checkpointer(
    url: str | None = None, *, serde: SerializerProtocol | None = None
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Async twin of ``open_checkpointer`` for ``ainvoke``/``astream``.

    Yields ``InMemorySaver``, ``AsyncSqliteSaver`` (aiosqlite) or
    ``AsyncPostgresSaver`` (async psycopg pool) with tables set up; closes the
    connection on exit. Arguments and errors are those of ``open_checkpointer``.
    Must be entered inside a running event loop (the async savers bind to it).
    """
    target = parse_checkpoint_url(url)
    serde = serde if serde is not None else make_serializer()
    if target.kind == "memory":
        yield InMemorySaver(serde=serde)
    elif target.kind == "sqlite":
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        if target.location != ":memory:":
            Path(target.location).parent.mkdir(parents=True, exist_ok=True)
        async with aiosqlite.connect(target.location) as conn:
            sqlite_saver = AsyncSqliteSaver(conn, serde=serde)
            await sqlite_saver.setup()
            remember_location(sqlite_saver, sqlite_url(target.location))
            yield sqlite_saver
    else:
        async with _apostgres_saver(target.location, serde) as pg_saver:
            remember_location(pg_saver, target.location)
            yield pg_saver


@contextmanager
def _postgres_saver(url: str, serde: SerializerProtocol) -> Iterator[BaseCheckpointSaver[Any]]:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool
    except ImportError as exc:
        raise _missing_postgres(exc) from exc
    # Connect once directly first: a wrong password or host then fails at once
    # with the server's reason, where the pool would only report a timeout.
    try:
        guard = psycopg.connect(url, autocommit=True, connect_timeout=_PG_CONNECT_TIMEOUT_S)
    except psycopg.ProgrammingError as exc:  # libpq rejected the URL itself
        raise CheckpointURLError(bad_url_message(url, str(exc).strip())) from exc
    except psycopg.OperationalError as exc:
        raise CheckpointConnectionError(_unreachable(url, exc)) from exc
    with guard:
        pool: ConnectionPool[Connection[DictRow]] = ConnectionPool(
            url,
            kwargs={**_PG_CONNECTION_KWARGS, "row_factory": dict_row},
            check=ConnectionPool.check_connection,
            open=False,
            **_PG_POOL_OPTIONS,
        )
        with pool:  # opens the pool, and closes it on exit even when wait() fails
            pool.wait(timeout=_PG_CONNECT_TIMEOUT_S)
            saver = PostgresSaver(pool, serde=serde)
            try:
                with setup_lock(guard, redact_url(url), _PG_TABLES):
                    saver.setup()
            except SetupLockTimeout as exc:
                raise CheckpointConnectionError(str(exc)) from exc
            guard.close()
            yield saver


@asynccontextmanager
async def _apostgres_saver(
    url: str, serde: SerializerProtocol
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    try:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError as exc:
        raise _missing_postgres(exc) from exc
    try:
        guard = await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=_PG_CONNECT_TIMEOUT_S
        )
    except psycopg.ProgrammingError as exc:
        raise CheckpointURLError(bad_url_message(url, str(exc).strip())) from exc
    except psycopg.OperationalError as exc:
        raise CheckpointConnectionError(_unreachable(url, exc)) from exc
    async with guard:
        pool: AsyncConnectionPool[AsyncConnection[DictRow]] = AsyncConnectionPool(
            url,
            kwargs={**_PG_CONNECTION_KWARGS, "row_factory": dict_row},
            check=AsyncConnectionPool.check_connection,
            open=False,
            **_PG_POOL_OPTIONS,
        )
        async with pool:
            await pool.wait(timeout=_PG_CONNECT_TIMEOUT_S)
            saver = AsyncPostgresSaver(pool, serde=serde)
            try:
                async with asetup_lock(guard, redact_url(url), _PG_TABLES):
                    await saver.setup()
            except SetupLockTimeout as exc:
                raise CheckpointConnectionError(str(exc)) from exc
            await guard.close()
            yield saver


def _unreachable(url: str, exc: Exception) -> str:
    return f"cannot connect to the checkpoint database {redact_url(url)}: {str(exc).strip()}"


def thread_config(thread_id: str, **configurable: Any) -> RunnableConfig:
    """Return the run config that selects (or starts) the checkpoint thread ``thread_id``.

    Extra keyword arguments go into ``configurable`` as well, e.g.
    ``thread_config("t1", checkpoint_id=...)`` to resume from an older checkpoint.
    """
    if not thread_id:
        raise ValueError("thread_id must be a non-empty string")
    return {"configurable": {**configurable, "thread_id": thread_id}}


def new_thread_id(prefix: str = "") -> str:
    """Return a fresh thread id: ``prefix`` + 12 hex digits of a random UUID4.

    48 random bits keep ids short enough to type on the command line
    (``aimegraph resume 3f9c0a1b2d4e``) while collisions stay negligible for
    any realistic number of threads in one database.
    """
    return f"{prefix}{uuid.uuid4().hex[:12]}"
