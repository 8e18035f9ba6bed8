"""Issue 29, point 9: processes that start together on a fresh Postgres database all
come up (every part's table setup is serialised), and a worker that cannot start
says why in one line.

Before the setup lock on the memory store, three processes opening a fresh
database at the same instant failed every try (``UniqueViolation`` on
``store_migrations_pkey`` or ``pg_type_typname_nsp_index``)."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
import warnings
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from aimegraph.cli import main

PROCESSES = 3
ROUNDS = ("store", "async store", "checkpointer", "async checkpointer", "runs table",
          "worker", "store", "async store")  # fmt: skip
"""What the processes open together, one fresh database per round: each part alone
(so that no other part's lock staggers them), then all that a worker opens."""


def _fresh_url(base: str, name: str) -> str:
    """The URL ``base`` with its database replaced by ``name``."""
    return urlunsplit(urlsplit(base)._replace(path=f"/{name}"))


@pytest.fixture
def fresh_databases(postgres_url: str) -> Iterator[list[str]]:
    """One empty database per round, dropped afterwards."""
    import psycopg

    names = [f"aimegraph_setup_{uuid.uuid4().hex[:10]}" for _ in ROUNDS]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name in names:
            conn.execute(f"CREATE DATABASE {name}")
    try:
        yield [_fresh_url(postgres_url, name) for name in names]
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _set_up_together(urls: list[str], barrier: Barrier, results: Any) -> None:
    """In each round, open that round's part on its fresh database at the same
    instant as the other processes; report ``ok`` or the error."""
    warnings.simplefilter("ignore")  # no pgvector on the test server: key-value store
    from aimegraph.checkpoints import aopen_checkpointer, open_checkpointer
    from aimegraph.distributed import records
    from aimegraph.memory import aopen_store, open_store

    async def open_async(opener: Any, url: str) -> None:
        async with opener(url):
            pass

    for part, url in zip(ROUNDS, urls, strict=True):
        barrier.wait(timeout=120)
        try:
            if part == "store":
                with open_store(url):
                    pass
            elif part == "async store":
                asyncio.run(open_async(aopen_store, url))
            elif part == "checkpointer":
                with open_checkpointer(url):
                    pass
            elif part == "async checkpointer":
                asyncio.run(open_async(aopen_checkpointer, url))
            elif part == "runs table":
                with records.connect(url):
                    pass
            else:  # as `aimegraph worker` starts
                with open_checkpointer(url), records.connect(url), open_store(url):
                    pass
            results.put((part, "ok"))
        except Exception as exc:  # noqa: BLE001 - reported to the test
            results.put((part, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))


@pytest.mark.postgres
@pytest.mark.slow
def test_processes_setting_up_a_fresh_database_at_once_all_come_up(
    fresh_databases: list[str],
) -> None:
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(PROCESSES), spawn.Queue()
    workers = [
        spawn.Process(target=_set_up_together, args=(fresh_databases, barrier, results))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    outcomes = [results.get(timeout=5) for _ in range(PROCESSES * len(ROUNDS))]
    failed = [outcome for outcome in outcomes if outcome[1] != "ok"]
    assert not failed, failed
    assert all(worker.exitcode == 0 for worker in workers)


@pytest.mark.postgres
def test_a_memory_store_that_cannot_be_opened_is_one_error_line(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = _fresh_url(postgres_url, "aimegraph_no_such_database")
    for argv in (
        ["--checkpoints", postgres_url, "--store", missing, "memory", "list"],
        ["--checkpoints", "memory", "--store", missing, "memory", "list"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: cannot open memory store") and err.count("\n") == 1, err
        assert 'database "aimegraph_no_such_database" does not exist' in err


@pytest.mark.postgres
def test_a_worker_that_cannot_open_its_store_says_so_in_one_line(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("celery", reason="needs the [distributed] extra")
    import redis

    broker = "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(broker, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis is not reachable at {broker}: {exc}")
    missing = _fresh_url(postgres_url, "aimegraph_no_such_database")
    argv = ["--checkpoints", postgres_url, "worker", "--broker", broker, "--store", missing]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot open memory store") and err.count("\n") == 1, err
