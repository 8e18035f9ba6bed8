"""One runner per thread: a lease on the thread that dies with its holder, and the
thread's cancel requests.

Whoever runs a thread (``aimegraph run | resume``, the dashboard, a distributed
worker, a Python embedder through :func:`hold_thread`) holds its lease from
before it reads the thread's state until the run stops, so two processes never
carry one thread on at once. The lease lives where the checkpoints do, and the
operating system or the database ends it with the holder, so a killed runner
leaves nothing to clean up:

- an SQLite file: an ``flock`` on ``<database>-leases/<digest>.lock``, released
  by the kernel when the holding process exits or dies;
- Postgres: a session-level advisory lock on a connection of its own, in the key
  space of the distributed runs (``hashtextextended('aimegraph-thread:' ||
  thread_id, 0)``), released by the server when the session ends (server-side
  TCP keepalives end the session of a holder whose machine vanished);
- anything else (``InMemorySaver``, ``sqlite:///:memory:``, other savers): a
  table of the leases held in this process.

A cancel request (:func:`request_cancel`) is recorded beside the lease (a
``.cancel`` file, a row of ``aimegraph_cancels``, an entry in the process table);
a watcher thread of the holder checks it a few times a second and asks the run to
drain (``RunControl.request_drain``), so a lease costs its run nothing per step.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from aimegraph.checkpoints.lease_backends import (
    THREAD_LOCK_KEY,  # noqa: F401  kept importable from here for a release
    _Backend,
    _FileLeases,
    _Held,
    _PostgresLeases,
    _ProcessLeases,
)
from aimegraph.checkpoints.urls import parse_checkpoint_url

if TYPE_CHECKING:
    from langgraph.runtime import RunControl

__all__ = [
    "DRAIN_CANCEL",
    "DRAIN_LEASE_LOST",
    "LeaseTarget",
    "ThreadBusyError",
    "ThreadLease",
    "cancel_pending",
    "clear_cancel",
    "hold_thread",
    "live_threads",
    "remember_location",
    "request_cancel",
]

DRAIN_CANCEL = "cancel"
"""The drain reason of a run whose thread was cancelled."""
DRAIN_LEASE_LOST = "lease lost"
"""The drain reason of a run whose lease could not be checked any more (its
Postgres session ended): another process may take the thread, so it stops."""

WATCH_INTERVAL_S = 0.2
"""How often a holder checks for a cancel request (and that its lease is alive)."""
PROBE_GRACE_S = 0.1
"""How long a refused acquisition retries before reporting the thread busy: a
reader checking whether a thread is live holds its lock for microseconds."""
WAIT_POLL_S = 0.2
"""How often ``hold_thread(..., wait=True)`` tries again."""

LeaseTarget = BaseCheckpointSaver[Any] | str
"""Where a thread's checkpoints live: the saver, or its URL (``open_checkpointer``'s)."""


class ThreadBusyError(RuntimeError):
    """Another runner holds the thread (CLI exit 9). ``holder`` says who, if known
    (``pid 1234 on host``)."""

    def __init__(self, thread_id: str, holder: str | None = None) -> None:
        where = f" ({holder})" if holder else ""
        super().__init__(f"thread {thread_id!r} is being run by another process{where}")
        self.thread_id = thread_id
        self.holder = holder


class ThreadLease:
    """A held lease: the thread is this process's to run until :meth:`release`.

    ``control`` is the run's ``RunControl``: pass it to ``graph.stream`` /
    ``invoke`` (``control=lease.control``). A cancel request drains it with reason
    :data:`DRAIN_CANCEL` (``cancelled`` is then true); a lease that can no longer be
    checked drains it with :data:`DRAIN_LEASE_LOST`.
    """

    def __init__(self, thread_id: str, held: _Held, control: RunControl | None = None) -> None:
        self.thread_id = thread_id
        from langgraph.runtime import RunControl  # the only use: `aimegraph threads` skips it

        self.control = control or RunControl()
        self.cancelled = False
        self._held = held
        self._stop = threading.Event()
        self._watcher = threading.Thread(
            target=self._watch, name=f"aimegraph-lease-{thread_id}", daemon=True
        )
        self._watcher.start()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            try:
                requested = self._held.cancel_requested()
            except Exception:  # noqa: BLE001 - a dead session: the lock went with it
                self.control.request_drain(DRAIN_LEASE_LOST)
                return
            if requested:
                self.cancelled = True
                self.control.request_drain(DRAIN_CANCEL)
                return

    def release(self) -> None:
        """Let the thread go (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._watcher.join()
        self._held.release()

    def __enter__(self) -> ThreadLease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def hold_thread(
    target: LeaseTarget,
    thread_id: str,
    *,
    wait: bool | float = False,
    control: RunControl | None = None,
) -> ThreadLease:
    """Take the lease of ``thread_id`` in the checkpoint store ``target``.

    Use it as a context manager around the whole run, reading the thread's state
    included (so that two runners never both decide to carry it on)::

        with hold_thread(saver, "t1") as lease:
            graph.invoke(inputs, thread_config("t1"), control=lease.control)

    Args:
        target: the checkpointer (or its URL) the thread's checkpoints are in.
        thread_id: the thread.
        wait: ``False`` refuses at once when another runner holds it; ``True``
            waits until it is free; a number waits at most that many seconds.
        control: the run's ``RunControl`` (default: a new one).

    Raises:
        ThreadBusyError: another runner holds the thread (after ``wait``).
    """
    backend = _backend(target)
    holder = f"pid {os.getpid()} on {socket.gethostname()}"
    patience = PROBE_GRACE_S if wait is False else (None if wait is True else float(wait))
    deadline = None if patience is None else time.monotonic() + patience
    while True:
        held = backend.try_acquire(thread_id, holder)
        if held is not None:
            return ThreadLease(thread_id, held, control)
        if deadline is not None and time.monotonic() >= deadline:
            found = backend.holders([thread_id]).get(thread_id)
            raise ThreadBusyError(thread_id, found)
        time.sleep(WAIT_POLL_S if wait is not False else PROBE_GRACE_S / 4)


def live_threads(target: LeaseTarget, thread_ids: list[str]) -> dict[str, str]:
    """The threads among ``thread_ids`` a runner holds now, with who holds them."""
    return _backend(target).holders(thread_ids) if thread_ids else {}


def request_cancel(target: LeaseTarget, thread_id: str, reason: str | None = None) -> None:
    """Record a cancel request (and why): the thread's holder drains its run and ends
    it ``cancelled``; a runner taking the thread later finds it still pending."""
    _backend(target).request_cancel(thread_id, reason or "cancelled")


def cancel_pending(target: LeaseTarget, thread_id: str) -> str | None:
    """The reason of a cancel requested and not yet carried out (cleared), or None."""
    return _backend(target).cancel_pending(thread_id)


def clear_cancel(target: LeaseTarget, thread_id: str) -> None:
    """Forget the thread's cancel request (once the run is recorded ``cancelled``)."""
    _backend(target).clear_cancel(thread_id)


# -- where a store's leases live

_LOCATIONS: weakref.WeakKeyDictionary[BaseCheckpointSaver[Any], str] = weakref.WeakKeyDictionary()
_PROCESS: weakref.WeakKeyDictionary[BaseCheckpointSaver[Any], _ProcessLeases] = (
    weakref.WeakKeyDictionary()
)
_BY_URL: dict[str, _Backend] = {}
_REGISTRY_LOCK = threading.Lock()


def remember_location(saver: BaseCheckpointSaver[Any], url: str) -> None:
    """Note the URL ``saver`` was opened from (``open_checkpointer`` does), so that
    its leases live where its checkpoints do."""
    _LOCATIONS[saver] = url


def _backend(target: LeaseTarget) -> _Backend:
    if isinstance(target, str):
        url: str | None = target
    else:
        url = _LOCATIONS.get(target) or _introspected_url(target)
    with _REGISTRY_LOCK:
        if url is not None:
            key = _backend_key(url)
            if key is not None:
                if key not in _BY_URL:
                    _BY_URL[key] = _make_backend(key)
                return _BY_URL[key]
        if isinstance(target, str):  # memory, sqlite:///:memory:: this process only
            return _BY_URL.setdefault(target, _ProcessLeases())
        return _PROCESS.setdefault(target, _ProcessLeases())


def _backend_key(url: str) -> str | None:
    """``file:<lease dir>`` or the Postgres URL; None for stores of this process alone."""
    parsed = parse_checkpoint_url(url)
    if parsed.kind == "sqlite" and parsed.location != ":memory:":
        path = Path(parsed.location).expanduser().absolute()
        return f"file:{path.with_name(path.name + '-leases')}"
    if parsed.kind == "postgres":
        return parsed.location
    return None


def _make_backend(key: str) -> _Backend:
    if key.startswith("file:"):
        return _FileLeases(Path(key.removeprefix("file:")))
    return _PostgresLeases(key)


def _introspected_url(saver: BaseCheckpointSaver[Any]) -> str | None:
    """The location of a saver made elsewhere: an SQLite file, a Postgres database."""
    conn = getattr(saver, "conn", None)
    if conn is None:
        return None
    kind = type(saver).__name__
    if kind == "SqliteSaver":
        lock = getattr(saver, "lock", None) or contextlib.nullcontext()
        with lock:
            rows = conn.execute("PRAGMA database_list").fetchall()
        path = next((row[2] for row in rows if row[1] == "main"), "")
        return f"sqlite:///{path}" if path else None
    if kind in ("PostgresSaver", "AsyncPostgresSaver"):
        conninfo = getattr(conn, "conninfo", None)  # a psycopg_pool pool
        if isinstance(conninfo, str):
            return conninfo
        info = getattr(conn, "info", None)  # a single connection: its parameters
        if info is not None:
            from psycopg.conninfo import make_conninfo

            return make_conninfo(info.dsn, password=info.password)
    return None
