"""aimegraph.checkpoints' factory and thread helpers: URLs, savers, stored settings.

Bad URLs and a missing Postgres extra are clear errors (passwords redacted); memory and
SQLite savers (sync and async, files, relative paths, in-memory) keep a graph's state
across reopening and load through the restricted serializer, tampered rows included;
stored run settings from a newer version stay readable.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG
from tests.checkpoint_records import build_graph, expected_values, ext

from aimegraph.checkpoints import (
    DEFAULT_CHECKPOINT_URL,
    CheckpointConnectionError,
    CheckpointURLError,
    MissingCheckpointBackendError,
    aopen_checkpointer,
    new_thread_id,
    open_checkpointer,
    redact_url,
    thread_config,
)
from aimegraph.checkpoints.runs import SETTINGS_KEY, RunSettings

# --- factory: URLs -----------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "mysql://user:hunter2@db/app",
        "sqlite://relative.db",  # two slashes: not an SQLAlchemy-style sqlite URL
        "sqlite:///",
        "redis://localhost",
        "",
        "checkpoints.db",
    ],
)
def test_bad_urls_raise_checkpoint_url_error(url: str) -> None:
    with pytest.raises(CheckpointURLError) as info, open_checkpointer(url):
        pass
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "sqlite:///" in message and "postgresql://" in message and "memory" in message
    assert "hunter2" not in message


async def test_bad_url_raises_in_async_factory_too() -> None:
    with pytest.raises(CheckpointURLError):
        async with aopen_checkpointer("ftp://example.com"):
            pass


@pytest.mark.parametrize(
    "blocked", [("psycopg_pool",), ("langgraph.checkpoint.postgres",)], ids=["pool", "saver"]
)
def test_postgres_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, blocked: tuple[str, ...]
) -> None:
    for module in blocked:
        monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    expected = r"pip install 'aimegraph\[postgres\]'"
    url = "postgresql://postgres@127.0.0.1:5432/test"
    with pytest.raises(MissingCheckpointBackendError, match=expected), open_checkpointer(url):
        pass


async def test_async_postgres_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Block the submodule too: an earlier test may have imported it already.
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.postgres", None)
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.postgres.aio", None)
    with pytest.raises(MissingCheckpointBackendError, match=r"aimegraph\[postgres\]"):
        async with aopen_checkpointer("postgres://postgres@127.0.0.1:5432/test"):
            pass


def test_unreachable_postgres_fails_fast_without_leaking_the_password() -> None:
    pytest.importorskip("psycopg")
    pytest.importorskip("langgraph.checkpoint.postgres")
    # Port 1 on localhost refuses connections at once.
    url = "postgresql://postgres:hunter2@127.0.0.1:1/test"
    with pytest.raises(CheckpointConnectionError) as info, open_checkpointer(url):
        pass
    assert "hunter2" not in str(info.value)
    assert "postgres:***@127.0.0.1:1/test" in str(info.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://user:s3cret@db:5432/app", "postgresql://user:***@db:5432/app"),
        (
            "postgres://user:p%40ss@db/app?sslmode=require",
            "postgres://user:***@db/app?sslmode=require",
        ),
        (
            "postgresql://user@db/app?password=s3cret&x=1",
            "postgresql://user@db/app?password=***&x=1",
        ),
        ("postgresql://:s3cret@db/app", "postgresql://:***@db/app"),
        ("host=db user=u password=s3cret", "host=db user=u password=***"),
        ("postgresql://user@db/app", "postgresql://user@db/app"),
        ("sqlite:///.aimegraph/checkpoints.db", "sqlite:///.aimegraph/checkpoints.db"),
        ("memory", "memory"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_thread_helpers() -> None:
    ids = {new_thread_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 12 and int(i, 16) >= 0 for i in ids)
    assert new_thread_id("run-").startswith("run-")
    assert thread_config("t1") == {"configurable": {"thread_id": "t1"}}
    assert thread_config("t1", checkpoint_id="c9") == {
        "configurable": {"thread_id": "t1", "checkpoint_id": "c9"}
    }
    with pytest.raises(ValueError):
        thread_config("")


# --- factory: savers -------------------------------------------------------------


def assert_blocks_dangerous_payloads(saver: Any, tmp_path: Path) -> None:
    """The saver's own serializer is the restricted one."""
    marker = tmp_path / "pwned-by-saver"
    payload = ormsgpack.packb(ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", f"touch {marker}"))
    assert saver.serde.loads_typed(("msgpack", payload)) == f"touch {marker}"
    assert not marker.exists()


def test_memory_saver(tmp_path: Path) -> None:
    with open_checkpointer("memory") as saver:
        assert isinstance(saver, InMemorySaver)
        assert_blocks_dangerous_payloads(saver, tmp_path)
        graph = build_graph(saver)
        config = thread_config(new_thread_id())
        graph.invoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
        assert graph.get_state(config).values == expected_values()


def test_sqlite_file_is_created_with_tables_and_survives_reopening(tmp_path: Path) -> None:
    db = tmp_path / "nested" / "dir" / "checkpoints.db"
    url = f"sqlite:///{db}"  # absolute path: four slashes
    assert url.startswith("sqlite:////")
    config = thread_config(new_thread_id())

    with open_checkpointer(url) as saver:
        assert_blocks_dangerous_payloads(saver, tmp_path)
        build_graph(saver).invoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
    assert db.is_file()
    with closing(sqlite3.connect(db)) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"checkpoints", "writes"} <= tables
    # The connection was closed on exit.
    with pytest.raises(sqlite3.ProgrammingError):
        saver.conn.execute("SELECT 1")  # type: ignore[attr-defined]

    with open_checkpointer(url) as reopened:
        snapshot = build_graph(reopened).get_state(config)
        assert snapshot.values == expected_values()
        assert snapshot.next == ()
        assert len(list(reopened.list(config))) >= 2


def test_sqlite_checkpoint_tampering_cannot_run_code(tmp_path: Path) -> None:
    """A row written straight into the database is loaded through the allowlist."""
    db = tmp_path / "checkpoints.db"
    marker = tmp_path / "pwned"
    config = thread_config(new_thread_id())
    with open_checkpointer(f"sqlite:///{db}") as saver:
        build_graph(saver).invoke({"messages": [HumanMessage("hi", id="m1")]}, config)
        checkpoint_id = saver.get_tuple(config).config["configurable"]["checkpoint_id"]  # type: ignore[union-attr]
    evil = ormsgpack.packb(ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", f"touch {marker}"))
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,"
            " channel, type, value) VALUES (?, '', ?, 'evil', 0, 'notes', 'msgpack', ?)",
            (config["configurable"]["thread_id"], checkpoint_id, evil),
        )
        conn.commit()

    with open_checkpointer(f"sqlite:///{db}") as saver:
        loaded = saver.get_tuple(config)
    assert loaded is not None
    assert ("evil", "notes", f"touch {marker}") in loaded.pending_writes  # type: ignore[operator]
    assert not marker.exists()


def test_sqlite_relative_and_default_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_checkpointer("sqlite:///rel/run.db"):
        pass
    assert (tmp_path / "rel" / "run.db").is_file()

    assert DEFAULT_CHECKPOINT_URL == "sqlite:///.aimegraph/checkpoints.db"
    with open_checkpointer() as saver:
        build_graph(saver).invoke({"messages": []}, thread_config("default"))
    assert (tmp_path / ".aimegraph" / "checkpoints.db").is_file()


def test_sqlite_in_memory(tmp_path: Path) -> None:
    with open_checkpointer("sqlite:///:memory:") as saver:
        graph = build_graph(saver)
        config = thread_config("t")
        graph.invoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
        assert graph.get_state(config).values == expected_values()
    assert not (tmp_path / ":memory:").exists()


async def test_async_memory_saver() -> None:
    async with aopen_checkpointer("memory") as saver:
        graph = build_graph(saver)
        config = thread_config(new_thread_id())
        await graph.ainvoke({"messages": [HumanMessage("add 40 and 2", id="m1")]}, config)
        assert (await graph.aget_state(config)).values == expected_values()


async def test_async_sqlite_round_trip(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    db = tmp_path / "a" / "checkpoints.db"
    url = f"sqlite:///{db}"
    config = thread_config(new_thread_id())
    async with aopen_checkpointer(url) as saver:
        assert isinstance(saver, AsyncSqliteSaver)
        assert_blocks_dangerous_payloads(saver, tmp_path)
        await build_graph(saver).ainvoke(
            {"messages": [HumanMessage("add 40 and 2", id="m1")]}, config
        )
    with pytest.raises(ValueError):  # aiosqlite: the connection was closed on exit
        await saver.conn.execute("SELECT 1")  # type: ignore[attr-defined]

    async with aopen_checkpointer(url) as reopened:
        assert (await build_graph(reopened).aget_state(config)).values == expected_values()


def test_settings_with_config_fields_this_version_does_not_know_stay_readable() -> None:
    """A thread written by a newer aimegraph (or another branch's) is still read."""
    stored = {
        SETTINGS_KEY: json.dumps(
            {"model": "scripted:demo", "config": {"max_parallel": 2, "from_the_future": 1}}
        )
    }
    with pytest.warns(UserWarning, match="from_the_future"):
        settings = RunSettings.from_metadata(stored)
    assert settings is not None and settings.config.max_parallel == 2
