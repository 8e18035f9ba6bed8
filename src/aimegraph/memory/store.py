"""Open a LangGraph store from a URL, with a vector index over the project's embeddings.

Accepted URLs (``STORE_URL_FORMS``):

``memory``
    ``InMemoryStore`` with a vector index: nothing persists after the process ends,
    and there is no TTL.
``sqlite:///relative/path.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:``
    LangGraph's ``SqliteStore`` / ``AsyncSqliteStore`` with the sqlite-vec vector
    index (langgraph-checkpoint-sqlite, a core dependency). The default,
    ``DEFAULT_STORE_URL``, is ``.aimegraph/memory.db``, beside the checkpoints.
``postgresql://user:pass@host:port/db`` (also ``postgres://``)
    ``PostgresStore`` / ``AsyncPostgresStore`` (extra ``aimegraph[postgres]``).
    Vector search needs the pgvector extension; where the server does not have it,
    the store is opened key-value only, with a warning, and retrieval ranks the
    newest items of a namespace in process instead (:mod:`aimegraph.memory.episodes`).

The index embeds each item's ``text`` field with the embeddings given
(``"hashing"``, the offline default, ``"minilm"`` with the ``[semantic]`` extra,
or any LangChain ``Embeddings``). ``ttl_days`` ages items out where the store
has a TTL (SQLite and Postgres): expired items are swept when the store opens
and every ``sweep_interval_minutes`` while it is open.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, IndexConfig, TTLConfig
from langgraph.store.memory import InMemoryStore

from aimegraph.checkpoints.setup_lock import asetup_lock, setup_lock
from aimegraph.checkpoints.urls import CheckpointURLError, parse_checkpoint_url, redact_url
from aimegraph.knowledge.embeddings import EmbeddingsSpec, resolve_embeddings

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection

__all__ = [
    "DEFAULT_STORE_URL",
    "STORE_URL_FORMS",
    "StoreConnectionError",
    "VectorIndexMissingWarning",
    "aopen_store",
    "default_store_url",
    "index_config",
    "open_store",
]

DEFAULT_STORE_URL = "sqlite:///.aimegraph/memory.db"
"""Where memory goes when no URL is given: beside ``.aimegraph/checkpoints.db``."""

STORE_URL_FORMS: tuple[str, ...] = (
    "memory",
    "sqlite:///relative/path.db",
    "sqlite:////absolute/path.db",
    "sqlite:///:memory:",
    "postgresql://user:password@host:5432/dbname",
)

INDEXED_FIELD = "text"
"""The value field every memory item carries for the vector index."""

_SWEEP_INTERVAL_MINUTES = 60
POSTGRES_INSTALL_HINT = "pip install 'aimegraph[postgres]'"
_PG_CONNECT_TIMEOUT_S = 10
_PG_TABLES = "the memory store's tables"
_HAS_PGVECTOR = "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"


class StoreConnectionError(ConnectionError):
    """The store's Postgres server could not be reached (the message has the URL,
    redacted)."""


class VectorIndexMissingWarning(UserWarning):
    """The store cannot have a vector index here (Postgres without pgvector, an
    SQLite that cannot load sqlite-vec): it is key-value only."""


def index_config(embeddings: EmbeddingsSpec = None) -> IndexConfig:
    """The vector index LangGraph stores build over the ``text`` field of each item."""
    embedder: Embeddings = resolve_embeddings(embeddings)
    dims = len(embedder.embed_query("dimension probe"))
    return {"dims": dims, "embed": embedder, "fields": [INDEXED_FIELD]}


def _ttl(ttl_days: float | None) -> TTLConfig | None:
    if ttl_days is None:
        return None
    if ttl_days <= 0:
        raise ValueError("ttl_days must be positive")
    return {
        "default_ttl": ttl_days * 24 * 60,
        "refresh_on_read": False,
        "sweep_interval_minutes": _SWEEP_INTERVAL_MINUTES,
    }


def _store_url(url: str | None) -> tuple[str, str]:
    try:
        target = parse_checkpoint_url(DEFAULT_STORE_URL if url is None else url)
    except CheckpointURLError as exc:
        raise ValueError(
            f"unknown store URL {redact_url(url or '')!r}; use one of: {', '.join(STORE_URL_FORMS)}"
        ) from exc
    if target.kind == "sqlite" and target.location != ":memory:":
        Path(target.location).parent.mkdir(parents=True, exist_ok=True)
    return target.kind, target.location


@contextmanager
def open_store(
    url: str | None = None,
    *,
    embeddings: EmbeddingsSpec = None,
    ttl_days: float | None = None,
) -> Iterator[BaseStore]:
    """Open the store for ``url`` (sync) with its tables set up, and close it on exit.

    Args:
        url: One of ``STORE_URL_FORMS``; ``None`` means ``DEFAULT_STORE_URL``.
        embeddings: What the vector index embeds with: ``"hashing"`` (default),
            ``"minilm"`` or an ``Embeddings`` instance.
        ttl_days: Items expire this many days after they are written (SQLite and
            Postgres; ignored by the in-memory store, which has no TTL).

    Yields:
        A ``BaseStore`` to pass as ``build_aime_graph(store=...)``.

    Raises:
        StoreConnectionError: the Postgres server could not be reached.
        SetupLockTimeout: another process kept creating the Postgres tables for
            over two minutes (processes opening a fresh database together set it
            up one at a time, see :mod:`aimegraph.checkpoints.setup_lock`).
    """
    kind, location = _store_url(url)
    index = index_config(embeddings)
    ttl = _ttl(ttl_days)
    if kind == "memory":
        yield InMemoryStore(index=index)
    elif kind == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        driver = _vector_sqlite(location)
        with closing(
            driver.connect(location, check_same_thread=False, isolation_level=None)
        ) as conn:
            store = SqliteStore(conn, index=index if _can_load(driver) else None, ttl=ttl)
            store.setup()
            yield from _swept(store)
    else:
        try:
            from langgraph.store.postgres import PoolConfig, PostgresStore
        except ImportError as exc:
            raise ImportError(f"postgresql:// stores need {POSTGRES_INSTALL_HINT} ({exc})") from exc
        from psycopg_pool import ConnectionPool

        # A pool that checks each connection before lending it, so the store
        # reconnects after the server restarts (a single connection stays broken).
        # (PoolConfig's other keys go to psycopg_pool's ConnectionPool as they are.)
        pool = cast(
            PoolConfig,
            {"min_size": 1, "max_size": 2, "timeout": 10, "check": ConnectionPool.check_connection},
        )
        where = redact_url(location)
        with _pg_guard(location) as guard:
            has_vector = guard.execute(_HAS_PGVECTOR).fetchone()
            with PostgresStore.from_conn_string(
                location, index=_pg_index(where, index, has_vector), ttl=ttl, pool_config=pool
            ) as pg_store:
                with setup_lock(guard, where, _PG_TABLES):
                    pg_store.setup()
                guard.close()
                yield from _swept(pg_store)


def _swept(store: Any) -> Iterator[BaseStore]:
    """Sweep expired items now and periodically while the store is open."""
    if store.ttl_config:
        store.sweep_ttl()
        store.start_ttl_sweeper()
    try:
        yield store
    finally:
        if store.ttl_config:
            store.stop_ttl_sweeper(timeout=1)


@asynccontextmanager
async def aopen_store(
    url: str | None = None,
    *,
    embeddings: EmbeddingsSpec = None,
    ttl_days: float | None = None,
) -> AsyncIterator[BaseStore]:
    """Async twin of :func:`open_store` (``AsyncSqliteStore``, ``AsyncPostgresStore``),
    for ``ainvoke``/``astream``; enter it inside the running event loop."""
    kind, location = _store_url(url)
    index = index_config(embeddings)
    ttl = _ttl(ttl_days)
    if kind == "memory":
        yield InMemoryStore(index=index)
    elif kind == "sqlite":
        import aiosqlite
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        driver = _vector_sqlite(location)

        def connect() -> Any:
            return driver.connect(location, check_same_thread=False, isolation_level=None)

        async with aiosqlite.Connection(connect, iter_chunk_size=64) as conn:
            store = AsyncSqliteStore(conn, index=index if _can_load(driver) else None, ttl=ttl)
            await store.setup()
            async for ready in _aswept(store):
                yield ready
    else:
        try:
            from langgraph.store.postgres.aio import AsyncPostgresStore
        except ImportError as exc:
            raise ImportError(f"postgresql:// stores need {POSTGRES_INSTALL_HINT} ({exc})") from exc
        where = redact_url(location)
        async with await _apg_guard(location) as guard:
            has_vector = await (await guard.execute(_HAS_PGVECTOR)).fetchone()
            async with AsyncPostgresStore.from_conn_string(
                location, index=_pg_index(where, index, has_vector), ttl=ttl
            ) as pg_store:
                async with asetup_lock(guard, where, _PG_TABLES):
                    await pg_store.setup()
                await guard.close()
                async for ready in _aswept(pg_store):
                    yield ready


async def _aswept(store: Any) -> AsyncIterator[BaseStore]:
    if store.ttl_config:
        await store.sweep_ttl()
        await store.start_ttl_sweeper()
    try:
        yield store
    finally:
        if store.ttl_config:
            await store.stop_ttl_sweeper()


def _can_load(driver: ModuleType) -> bool:
    return hasattr(driver.Connection, "enable_load_extension")


def _vector_sqlite(location: str) -> ModuleType:
    """An sqlite3 module that can load sqlite-vec: the standard one when its Python
    was built with extension loading (Debian's, most distributions'), else
    pysqlite3 (``pysqlite3-binary``, a dependency on Linux x86-64). Without
    either, the store is key-value only, with a warning."""
    if _can_load(sqlite3):
        return sqlite3
    try:
        import pysqlite3.dbapi2 as pysqlite  # type: ignore[import-not-found]
    except ImportError:
        warnings.warn(
            f"this Python's sqlite3 cannot load extensions and pysqlite3 is not installed: "
            f"the memory store {location} is key-value only and retrieval ranks the newest "
            "items in process (pip install pysqlite3-binary for the sqlite-vec index)",
            VectorIndexMissingWarning,
            stacklevel=4,
        )
        return sqlite3
    return cast(ModuleType, pysqlite)


def _pg_guard(url: str) -> Connection[Any]:
    """An autocommit connection for the setup lock and the pgvector check; a server
    that cannot be reached is a StoreConnectionError."""
    import psycopg

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=_PG_CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        raise StoreConnectionError(_unreachable(url, exc)) from exc


async def _apg_guard(url: str) -> AsyncConnection[Any]:
    import psycopg

    try:
        return await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=_PG_CONNECT_TIMEOUT_S
        )
    except psycopg.OperationalError as exc:
        raise StoreConnectionError(_unreachable(url, exc)) from exc


def _unreachable(url: str, exc: Exception) -> str:
    return f"cannot connect to the memory store {redact_url(url)}: {str(exc).strip()}"


def _pg_index(where: str, index: IndexConfig, has_vector: Any) -> Any:
    """The index when the server can load pgvector (``has_vector``: the row of
    ``_HAS_PGVECTOR``), else None (with a warning)."""
    if has_vector is not None and has_vector[0]:
        return index
    warnings.warn(
        f"{where} has no pgvector extension: the memory store is key-value only "
        "and retrieval ranks the newest items in process (install pgvector for vector search)",
        VectorIndexMissingWarning,
        stacklevel=4,
    )
    return None


def default_store_url(checkpoints_url: str) -> str:
    """Memory beside the checkpoints: ``memory.db`` next to an SQLite checkpoint file,
    the same database for Postgres, in-process memory for in-process checkpoints."""
    lowered = checkpoints_url.strip().lower()
    if lowered.startswith("sqlite:///") and not lowered.endswith(":memory:"):
        path = Path(checkpoints_url.strip()[len("sqlite:///") :])
        return f"sqlite:///{path.parent / 'memory.db'}"
    if lowered.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        return checkpoints_url
    if lowered in ("memory", "memory://", ":memory:", "sqlite:///:memory:"):
        return "memory"
    return DEFAULT_STORE_URL
