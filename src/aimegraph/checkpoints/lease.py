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

An answer for a holder that waits on a human (a timed wait: it holds the thread
until the deadline) is posted beside the lease the same way (:func:`hand_answer`:
an ``.answer-*`` file, a row of ``aimegraph_answers``, an entry in the process
table), and the holder takes it while it waits (:meth:`ThreadLease.take_answer`),
so a run waiting on a human never holds the thread against the human.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import weakref
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic_core import to_jsonable_python

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
    "ANSWER_PICKUP_S",
    "DRAIN_CANCEL",
    "DRAIN_LEASE_LOST",
    "AnswerNotTakenError",
    "LeaseTarget",
    "StaleAnswerError",
    "TakenAnswer",
    "ThreadBusyError",
    "ThreadLease",
    "cancel_pending",
    "clear_cancel",
    "hand_answer",
    "hold_thread",
    "live_threads",
    "remember_location",
    "request_cancel",
    "share_leases",
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
ANSWER_PICKUP_S = 30.0
"""How long :func:`hand_answer` waits for the holder to take an answer (a holder
waiting on a human takes it within a second) before taking it back."""
ANSWER_POLL_S = 0.1
"""How often :func:`hand_answer` looks whether the holder took the answer."""

log = logging.getLogger(__name__)

LeaseTarget = BaseCheckpointSaver[Any] | str
"""Where a thread's checkpoints live: the saver, or its URL (``open_checkpointer``'s)."""


class ThreadBusyError(RuntimeError):
    """Another runner holds the thread (CLI exit 9). ``holder`` says who, if known
    (``pid 1234 on host``); ``detail`` adds what came of it."""

    def __init__(self, thread_id: str, holder: str | None = None, detail: str = "") -> None:
        where = f" ({holder})" if holder else ""
        super().__init__(f"thread {thread_id!r} is being run by another process{where}{detail}")
        self.thread_id = thread_id
        self.holder = holder


class AnswerNotTakenError(ThreadBusyError):
    """The process holding the thread did not take an answer posted for it within
    :data:`ANSWER_PICKUP_S` (it was not waiting on a human): the answer was taken back."""

    def __init__(self, thread_id: str, holder: str | None, waited_s: float) -> None:
        detail = (
            f", which did not take the answer within {waited_s:g} s (it is not waiting on "
            "a human now): nothing was answered"
        )
        super().__init__(thread_id, holder, detail)


class StaleAnswerError(LookupError):
    """The process holding the thread dropped an answer posted for it: the wait it
    answered had ended first (its deadline passed, or another answer came first)."""


@dataclass(frozen=True)
class TakenAnswer:
    """The answers a holder took (:meth:`ThreadLease.take_answer`): resume values by
    interrupt id, and who sent them (``pid 1234 on host``)."""

    answers: dict[str, Any]
    senders: tuple[str, ...]


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

    def take_answer(self, pending: Collection[str]) -> TakenAnswer | None:
        """The answers posted for the thread (:func:`hand_answer`) that answer waits
        among ``pending`` (interrupt ids), each taken once; one for a wait no longer
        pending, or for one an earlier answer took, is dropped (its poster is told).
        None when there is none to apply."""
        taken: dict[str, Any] = {}
        senders: list[str] = []
        for posted in self._held.posted_answers():
            fits = bool(posted.answers) and set(posted.answers) <= set(pending) - set(taken)
            if not self._held.settle_answer(posted.key, applied=fits):
                continue  # its poster took it back
            if fits:
                taken.update(posted.answers)
                senders.append(posted.sender)
            else:
                log.warning("dropped an answer for a wait on %s that has ended", self.thread_id)
        return TakenAnswer(taken, tuple(senders)) if taken else None

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


def hand_answer(
    target: LeaseTarget,
    thread_id: str,
    answers: Mapping[str, Any],
    *,
    patience_s: float = ANSWER_PICKUP_S,
) -> str | None:
    """Hand ``answers`` (resume values by interrupt id, JSON-ready) to the process
    holding ``thread_id`` while it waits on a human; returns who took it (``pid 1234
    on host``) once it has. None, the answer taken back, when nobody holds the thread
    or its holder let it go without taking it: carry the run on yourself.

    Raises:
        AnswerNotTakenError: the holder did not take it within ``patience_s``.
        StaleAnswerError: the holder dropped it: the wait had ended first.
    """
    backend = _backend(target)
    holder = backend.holders([thread_id]).get(thread_id)
    if holder is None:
        return None
    sender = f"pid {os.getpid()} on {socket.gethostname()}"
    delivery = backend.post_answer(thread_id, to_jsonable_python(dict(answers)), sender)
    deadline = time.monotonic() + patience_s
    try:
        while (outcome := delivery.outcome()) == "posted":
            late = time.monotonic() >= deadline
            if late or thread_id not in backend.holders([thread_id]):
                if delivery.withdraw():
                    if late:
                        raise AnswerNotTakenError(thread_id, holder, patience_s)
                    return None
                continue  # taken just now: its outcome says how
            time.sleep(ANSWER_POLL_S)
    finally:
        delivery.close()
    if outcome == "dropped":
        raise StaleAnswerError(
            f"the process running thread {thread_id!r} ({holder}) had ended that wait "
            "before the answer came (its deadline passed, or another answer came first)"
        )
    return holder


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


def share_leases(copy: Any, saver: Any) -> None:
    """``copy`` (a shallow copy of the saver ``saver`` with another serializer, which
    keeps its checkpoints in the same place) takes its leases where ``saver`` does,
    also when those live in this process alone (an ``InMemorySaver``). Nothing to do
    when either is no saver (a graph's ``checkpointer`` may be None, True or False)
    or both are the same."""
    if copy is saver or not (
        isinstance(copy, BaseCheckpointSaver) and isinstance(saver, BaseCheckpointSaver)
    ):
        return
    with _REGISTRY_LOCK:
        if (url := _LOCATIONS.get(saver)) is not None:
            _LOCATIONS[copy] = url
        else:
            _PROCESS[copy] = _PROCESS.setdefault(saver, _ProcessLeases())


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
