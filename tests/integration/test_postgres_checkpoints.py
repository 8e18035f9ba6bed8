"""Checkpoints in a real PostgreSQL server (sync and async savers).

The server defaults to ``postgresql://postgres@127.0.0.1:5432/test``; set
``AIMEGRAPH_TEST_POSTGRES_URL`` to use another. When it cannot be reached the
tests are skipped locally but fail when ``CI`` is set, because CI must run them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG
from tests.checkpoint_records import build_graph, expected_values

from aimegraph.checkpoints import (
    aopen_checkpointer,
    new_thread_id,
    open_checkpointer,
    thread_config,
)
from aimegraph.state.models import TaskResult

pytestmark = pytest.mark.postgres

TABLES = {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"}


@pytest.fixture
def thread_id(postgres_url: str) -> Iterator[str]:
    """A thread id no other test (or earlier run) uses; its rows are deleted afterwards."""
    tid = new_thread_id("pytest-")
    yield tid
    with open_checkpointer(postgres_url) as saver:
        saver.delete_thread(tid)


def _tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    return {row[0] for row in rows}


def _evil_payload(target: str) -> bytes:
    return ormsgpack.packb(
        ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(("os", "system", target)))
    )


def test_sync_round_trip(postgres_url: str, thread_id: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    config = thread_config(thread_id)
    with open_checkpointer(postgres_url) as saver:
        assert isinstance(saver, PostgresSaver)
        assert _tables(postgres_url) >= TABLES
        build_graph(saver).invoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
    assert saver.conn.closed  # the pool was closed on exit

    with open_checkpointer(postgres_url) as reopened:
        snapshot = build_graph(reopened).get_state(config)
        assert snapshot.values == expected_values()
        assert snapshot.next == ()
        assert isinstance(snapshot.values["tasks"]["t2"].result, TaskResult)


def test_postgres_scheme_alias_and_restricted_serde(
    postgres_url: str, thread_id: str, tmp_path: Path
) -> None:
    url = postgres_url.replace("postgresql://", "postgres://", 1)
    marker = tmp_path / "pwned"
    with open_checkpointer(url) as saver:
        graph = build_graph(saver)
        config = thread_config(thread_id)
        graph.invoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
        # A row written straight into the database goes through the allowlist.
        stored = saver.get_tuple(config)
        assert stored is not None
        saver.put_writes(stored.config, [("evil", "placeholder")], task_id="evil-task")
        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE checkpoint_writes SET type = 'msgpack', blob = %s"
                " WHERE thread_id = %s AND task_id = 'evil-task'",
                (_evil_payload(f"touch {marker}"), thread_id),
            )
        loaded = saver.get_tuple(config)
    assert loaded is not None and loaded.pending_writes is not None
    assert ("evil-task", "evil", f"touch {marker}") in loaded.pending_writes
    assert not marker.exists()


async def test_async_round_trip(postgres_url: str, thread_id: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    config = thread_config(thread_id)
    async with aopen_checkpointer(postgres_url) as saver:
        assert isinstance(saver, AsyncPostgresSaver)
        await build_graph(saver).ainvoke(
            {"messages": [HumanMessage("add 40 and 2", id="m1")]}, config
        )
    assert saver.conn.closed

    async with aopen_checkpointer(postgres_url) as reopened:
        snapshot = await build_graph(reopened).aget_state(config)
        assert snapshot.values == expected_values()
        history = [c async for c in reopened.alist(config)]
        assert len(history) >= 2
