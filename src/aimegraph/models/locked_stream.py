"""A stream from a resource one caller at a time may use, consumed from anywhere.

An in-process model (one llama.cpp context) must serve one generation at a time, so
its calls take a lock. A generator that held the lock across ``yield`` would break as
soon as it is resumed elsewhere: LangChain's default ``astream`` resumes a sync stream
on executor threads (a ``threading.Lock`` then stays held by a paused stream, and
waiting streams block every executor thread; an ``RLock`` cannot even be released from
another thread), and a caller interleaving two streams would deadlock or share the
context. Here the whole generation runs in a worker thread that holds the lock from its
first item to its last and hands the items over through a queue, so it never waits for
its consumer: :func:`locked_stream` for a sync consumer, :func:`alocked_stream` for an
event loop (no executor thread is used while waiting). Closing the consumer (a
``break``, a cancelled task) stops the worker at its next item.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, TypeVar

__all__ = ["alocked_stream", "locked_stream"]

T = TypeVar("T")

_ITEM, _ERROR, _END = "item", "error", "end"
_Entry = tuple[str, Any]


def locked_stream(
    lock: AbstractContextManager[Any], produce: Callable[[], Iterator[T]]
) -> Iterator[T]:
    """The items of ``produce()``, generated under ``lock`` in a worker thread."""
    entries: queue.SimpleQueue[_Entry] = queue.SimpleQueue()
    stop = threading.Event()
    _start(lock, produce, entries.put, stop)
    try:
        while True:
            kind, value = entries.get()
            if kind == _END:
                return
            if kind == _ERROR:
                raise value
            yield value
    finally:
        stop.set()


async def alocked_stream(
    lock: AbstractContextManager[Any], produce: Callable[[], Iterator[T]]
) -> AsyncIterator[T]:
    """The items of ``produce()``, generated under ``lock`` in a worker thread and
    awaited on the running event loop."""
    loop = asyncio.get_running_loop()
    entries: asyncio.Queue[_Entry] = asyncio.Queue()
    stop = threading.Event()

    def put(entry: _Entry) -> None:
        try:
            loop.call_soon_threadsafe(entries.put_nowait, entry)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            stop.set()

    _start(lock, produce, put, stop)
    try:
        while True:
            kind, value = await entries.get()
            if kind == _END:
                return
            if kind == _ERROR:
                raise value
            yield value
    finally:
        stop.set()


def _start(
    lock: AbstractContextManager[Any],
    produce: Callable[[], Iterator[T]],
    put: Callable[[_Entry], None],
    stop: threading.Event,
) -> None:
    def work() -> None:
        try:
            with lock:
                items = produce()
                try:
                    for item in items:
                        if stop.is_set():
                            break
                        put((_ITEM, item))
                finally:
                    close = getattr(items, "close", None)
                    if close is not None:
                        close()
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put((_ERROR, exc))
        else:
            put((_END, None))

    context = contextvars.copy_context()  # tracing and callbacks see the caller's context
    threading.Thread(target=context.run, args=(work,), name="locked-stream", daemon=True).start()
