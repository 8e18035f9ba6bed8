"""The thread lease (issue 29 point 3): one holder at a time, refused at once or
waited for, dying with its holder, on an SQLite file, on Postgres (in the
distributed runs' key space) and in one process; cancel requests reach the holder
as a drain of its run."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from aimegraph.checkpoints import open_checkpointer
from aimegraph.checkpoints.lease import (
    DRAIN_CANCEL,
    ThreadBusyError,
    cancel_pending,
    clear_cancel,
    hold_thread,
    live_threads,
    request_cancel,
)

HOLDER = """
import sys, time
from aimegraph.checkpoints.lease import hold_thread
lease = hold_thread(sys.argv[1], sys.argv[2])
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cp.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def thread() -> str:
    return f"lease-{time.monotonic_ns()}"  # a fresh key on a shared Postgres


@pytest.fixture
def holder(url: str, thread: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the thread's lease."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, thread], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    yield proc
    proc.kill()
    proc.wait()


def test_one_holder_at_a_time_within_a_process(url: str, thread: str) -> None:
    with hold_thread(url, thread):
        with pytest.raises(ThreadBusyError, match=f"thread '{thread}' is being run by"):
            hold_thread(url, thread)
        assert thread in live_threads(url, [thread, "other"])
        assert "other" not in live_threads(url, [thread, "other"])
    with hold_thread(url, thread):  # released: free again
        pass
    assert live_threads(url, [thread]) == {}


def test_the_lease_dies_with_a_killed_holder(
    url: str, thread: str, holder: subprocess.Popen[str]
) -> None:
    with pytest.raises(ThreadBusyError) as busy:
        hold_thread(url, thread)
    assert f"pid {holder.pid}" in str(busy.value)
    assert f"pid {holder.pid}" in live_threads(url, [thread])[thread]
    holder.kill()  # SIGKILL: no cleanup
    holder.wait()
    deadline = time.monotonic() + 10  # Postgres ends the session as the socket closes
    while live_threads(url, [thread]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with hold_thread(url, thread):  # nothing to clean up by hand
        pass


def test_wait_queues_behind_the_holder(
    url: str, thread: str, holder: subprocess.Popen[str]
) -> None:
    started = time.monotonic()
    with pytest.raises(ThreadBusyError):
        hold_thread(url, thread, wait=0.5)  # gives up after the time asked
    assert time.monotonic() - started >= 0.5
    holder.terminate()
    with hold_thread(url, thread, wait=True):  # waits for the holder to go
        pass


def test_probing_never_takes_a_lease(url: str, thread: str) -> None:
    for _ in range(20):
        live_threads(url, [thread])
        with hold_thread(url, thread):
            pass


def test_a_cancel_request_drains_the_holders_run(url: str, thread: str) -> None:
    with hold_thread(url, thread) as lease:
        assert not cancel_pending(url, thread)
        request_cancel(url, thread)
        deadline = time.monotonic() + 5
        while not lease.control.drain_requested:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert lease.cancelled and lease.control.drain_reason == DRAIN_CANCEL
        assert cancel_pending(url, thread)  # until the holder records the cancel
        clear_cancel(url, thread)
    assert not cancel_pending(url, thread)


def test_savers_share_the_lease_of_their_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    with open_checkpointer(url) as opened:
        made_elsewhere = SqliteSaver(sqlite3.connect(tmp_path / "cp.db", check_same_thread=False))
        with hold_thread(opened, "t"):
            for target in (made_elsewhere, url):
                with pytest.raises(ThreadBusyError):
                    hold_thread(target, "t")
    assert (tmp_path / "cp.db-leases").is_dir()
    memory = InMemorySaver()
    with hold_thread(memory, "t"):  # a store of this process alone
        with pytest.raises(ThreadBusyError):
            hold_thread(memory, "t")
        with hold_thread(InMemorySaver(), "t"):  # another store: another thread
            pass


@pytest.mark.postgres
def test_the_lease_is_the_distributed_runs_advisory_lock(postgres_url: str, thread: str) -> None:
    import psycopg

    key = "SELECT pg_try_advisory_lock(hashtextextended('aimegraph-thread:' || %s, 0))"
    with psycopg.connect(postgres_url, autocommit=True) as worker:
        assert worker.execute(key, (thread,)).fetchone() == (True,)
        with pytest.raises(ThreadBusyError):
            hold_thread(postgres_url, thread)
    with hold_thread(postgres_url, thread), psycopg.connect(postgres_url) as other:
        assert other.execute(key, (thread,)).fetchone() == (False,)
