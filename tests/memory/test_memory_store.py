"""open_store / aopen_store: backends, vector index, persistence, TTL, pgvector fallback."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from aimegraph.memory import VectorIndexMissingWarning, aopen_store, open_store
from aimegraph.memory.episodes import rank_items, search_ops
from aimegraph.memory.store import default_store_url

NS = ("aimegraph", "default", "episodes")
DOCS = {
    "a": "Parse the semicolon separated CSV export of invoices",
    "b": "Plot the weather forecast for Berlin",
    "c": "Write a haiku about autumn leaves",
}


def _fill(store) -> None:  # type: ignore[no-untyped-def]
    for key, text in DOCS.items():
        store.put(NS, key, {"text": text, "task_id": key})


def _nearest(store, query: str) -> str:  # type: ignore[no-untyped-def]
    results = store.batch(search_ops(store, "default", ["episodes"], query, 1))
    return rank_items(store, results, query, 1)[0].key


@pytest.mark.parametrize("url", ["memory", "sqlite:///:memory:"])
def test_vector_search_finds_the_nearest_item(url: str) -> None:
    with open_store(url) as store:
        _fill(store)
        assert store.index_config  # type: ignore[attr-defined]
        assert _nearest(store, "invoices CSV with semicolons") == "a"
        assert _nearest(store, "Berlin weather") == "b"


def test_sqlite_store_survives_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'memory.db'}"
    with open_store(url) as store:
        _fill(store)
    with open_store(url) as reopened:
        assert {i.key for i in reopened.search(NS, limit=10)} == set(DOCS)
        assert _nearest(reopened, "autumn poem haiku") == "c"


def test_sqlite_ttl_sweeps_expired_items_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with open_store(f"sqlite:///{path}", ttl_days=30) as store:
        _fill(store)
    with sqlite3.connect(path) as conn:  # age one item past its expiry
        conn.execute("UPDATE store SET expires_at = '2000-01-01 00:00:00' WHERE key = 'b'")
        stored = conn.execute("SELECT count(*) FROM store WHERE expires_at IS NOT NULL").fetchone()
    assert stored == (3,)
    with open_store(f"sqlite:///{path}", ttl_days=30) as store:
        assert {i.key for i in store.search(NS, limit=10)} == {"a", "c"}


def test_store_without_index_ranks_in_process() -> None:
    store = InMemoryStore()  # a caller's plain store: no vector index
    _fill(store)
    assert _nearest(store, "invoices CSV with semicolons") == "a"


async def test_async_sqlite_store(tmp_path: Path) -> None:
    async with aopen_store(f"sqlite:///{tmp_path / 'm.db'}") as store:
        await store.aput(NS, "a", {"text": DOCS["a"]})
        await store.aput(NS, "b", {"text": DOCS["b"]})
        found = await store.asearch(NS, query="weather in Berlin", limit=1)
        assert [i.key for i in found] == ["b"]


def test_unknown_url_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown store URL"), open_store("redis://x"):
        pass


def test_default_store_sits_beside_the_checkpoints() -> None:
    assert default_store_url("sqlite:///runs/x/checkpoints.db") == "sqlite:///runs/x/memory.db"
    assert default_store_url("memory") == "memory"
    pg = "postgresql://u@h:5432/db"
    assert default_store_url(pg) == pg


@pytest.mark.postgres
def test_postgres_without_pgvector_is_key_value_with_a_warning(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        has_pgvector = conn.execute(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open_store(postgres_url) as store:
            store.delete(NS, "a")
            _fill(store)
            assert _nearest(store, "invoices CSV with semicolons") == "a"
            for key in DOCS:
                store.delete(NS, key)
    missing = [w for w in caught if issubclass(w.category, VectorIndexMissingWarning)]
    assert bool(missing) == (has_pgvector == (0,))


@pytest.mark.postgres
def test_a_postgres_store_reconnects_after_its_connections_drop(postgres_url: str) -> None:
    """As after a server restart (issue 29 point 8): the store's sessions are ended
    by the server; the next reads and writes reconnect instead of failing."""
    import psycopg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VectorIndexMissingWarning)
        with open_store(postgres_url) as store:
            store.put(NS, "reconnect", {"text": "before"})
            pool = store.conn  # type: ignore[attr-defined]
            with pool.connection() as first, pool.connection() as second:
                pids = [first.info.backend_pid, second.info.backend_pid]
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                for pid in pids:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            item = store.get(NS, "reconnect")
            assert item is not None and item.value == {"text": "before"}
            store.put(NS, "reconnect", {"text": "after"})
            assert store.get(NS, "reconnect").value == {"text": "after"}  # type: ignore[union-attr]
            store.delete(NS, "reconnect")
