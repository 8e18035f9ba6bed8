"""The engine's own event loop: one per process, in a daemon thread.

Coroutines run there when their caller has no loop to run them on, or when what they
use lives there: an async-only tool called under ``invoke``, the MCP sessions of a run
(whose anyio task groups must stay on one loop whichever loop the run is on), listing
MCP servers while a graph is built. Each coroutine runs as a task of its own, in the
context its caller hands over (so LangGraph's config and stream writer travel with
it); cancelling the future a caller holds cancels the task.

The loop is made on first use and made again in a forked child (a fork keeps only the
forking thread), so a prefork worker gets a loop of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["EngineLoop", "engine_loop"]

T = TypeVar("T")


class EngineLoop:
    """An event loop running forever in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="aimegraph-loop", daemon=True
        )
        self._thread.start()

    def submit(
        self, coro: Coroutine[Any, Any, T], *, context: contextvars.Context | None = None
    ) -> concurrent.futures.Future[T]:
        """Start ``coro`` as a task of the loop, in ``context`` (default: a copy of the
        caller's); cancelling the returned future cancels the task."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        context = context if context is not None else contextvars.copy_context()

        def start() -> None:
            if future.cancelled():
                coro.close()
                return
            task = self.loop.create_task(coro, context=context)
            future.add_done_callback(
                lambda f: self.loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None
            )
            task.add_done_callback(lambda t: _settle(future, t))

        self.loop.call_soon_threadsafe(start)
        return future

    def run(
        self,
        coro: Coroutine[Any, Any, T],
        *,
        timeout: float | None = None,
        context: contextvars.Context | None = None,
    ) -> T:
        """Run ``coro`` on the loop and wait for it from this (non-loop) thread. On
        timeout (``TimeoutError``) or an interrupt of the waiting thread the task is
        cancelled."""
        if self.on_loop():
            raise RuntimeError("EngineLoop.run called from the engine loop itself: await it")
        future = self.submit(coro, context=context)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` run on the engine loop from any loop; cancelling the awaiting
        task cancels it there. On the engine loop itself it is simply awaited."""
        if self.on_loop():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    def on_loop(self) -> bool:
        """Whether the caller runs on this loop's thread."""
        return threading.current_thread() is self._thread


def _settle(future: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
    """Pass a finished task's outcome to its caller's future (unless it was cancelled)."""
    if future.cancelled():
        return
    try:
        if task.cancelled():
            future.cancel()
        elif (exc := task.exception()) is not None:
            future.set_exception(exc)
        else:
            future.set_result(task.result())
    except concurrent.futures.InvalidStateError:  # cancelled meanwhile by its caller
        pass


_lock = threading.Lock()
_engine: EngineLoop | None = None


def engine_loop() -> EngineLoop:
    """The process's engine loop (started on first use)."""
    global _engine
    with _lock:
        if _engine is None:
            _engine = EngineLoop()
        return _engine


def _forget_in_child() -> None:
    # The child has no loop thread (only the forking thread survives a fork), and the
    # lock may have been held by another thread of the parent.
    global _engine, _lock
    _engine = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
