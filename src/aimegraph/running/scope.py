"""What one run holds on the engine loop, released when the run ends however it ends.

A :class:`RunScope` keeps a run's resources (an MCP server's session, opened on its
first use and kept for the rest of the run) and the async tool calls it started on the
engine loop. Closing it cancels the calls still running and closes the resources, each
in the task that opened it (anyio's task groups, which MCP sessions hold, must be left
in the task that entered them). The graph opens one per run and closes it at the end,
on a cancel and on a crash (:class:`aimegraph.running.scoped_graph.RunScopedGraph`); tools
find it in the run's config (:func:`current_scope`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine, Hashable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER

from aimegraph.running.loop import EngineLoop, engine_loop

__all__ = ["SCOPE_KEY", "RunScope", "RunScopeClosedError", "current_scope", "saves_checkpoints"]

log = logging.getLogger(__name__)

T = TypeVar("T")

SCOPE_KEY = "__aimegraph_run_scope"
"""The ``configurable`` key holding the run's scope. Keys starting with ``__`` never
reach checkpoint or tracing metadata."""

CLOSE_TIMEOUT_S = 10.0
"""How long closing a scope waits for its resources to close (an MCP stdio server gets
2 s to exit after its input closes before it is terminated)."""


class RunScopeClosedError(RuntimeError):
    """Work was asked of a run scope after its run ended."""


class RunScope:
    """One run's resources and async tool calls on the engine loop."""

    def __init__(self, engine: EngineLoop | None = None) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._closed = False
        self._released = False
        self._calls: set[concurrent.futures.Future[Any]] = set()
        self._held: dict[Hashable, _Held] = {}  # touched on the engine loop only

    @property
    def engine(self) -> EngineLoop:
        """The engine loop (started on first use: a run with no async work starts none)."""
        if self._engine is None:
            self._engine = engine_loop()
        return self._engine

    def bind(self, config: RunnableConfig | None) -> RunnableConfig:
        """``config`` with this scope in its ``configurable``."""
        bound: RunnableConfig = {**(config or {})}
        bound["configurable"] = {**bound.get("configurable", {}), SCOPE_KEY: self}
        return bound

    def submit(
        self, coro: Coroutine[Any, Any, T], context: contextvars.Context
    ) -> concurrent.futures.Future[T]:
        """Start an async tool call on the engine loop; it is cancelled if still running
        when the run ends."""
        with self._lock:
            if self._closed:
                coro.close()
                raise RunScopeClosedError("the run has ended")
            future = self.engine.submit(coro, context=context)
            self._calls.add(future)
        future.add_done_callback(self._forget)
        return future

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the engine loop from any loop (as :meth:`submit`: cancelled
        when the run ends; cancelling the awaiting task cancels it too)."""
        if self.engine.on_loop():
            return await coro
        return await asyncio.wrap_future(self.submit(coro, contextvars.copy_context()))

    async def resource(
        self, key: Hashable, opener: Callable[[], AbstractAsyncContextManager[T]]
    ) -> T:
        """The resource ``opener`` opens, opened on the first call with ``key`` and kept
        until the run ends. Await it on the engine loop. An opening that failed is tried
        again by the next call."""
        if self._closed:
            raise RunScopeClosedError("the run has ended")
        held = self._held.get(key)
        if held is None or held.failed:
            held = self._held[key] = _Held(opener)
        # Shielded: a caller that times out must not cancel an opening others wait on.
        value: T = await asyncio.shield(held.ready)
        return value

    def cancel(self) -> None:
        """End the scope's work now: cancel its calls in flight and take no new work
        (the resources stay open until :meth:`close`)."""
        with self._lock:
            self._closed = True
            calls = list(self._calls)
        for call in calls:
            call.cancel()

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Cancel the calls in flight and close the resources (from a thread that is not
        the engine loop's)."""
        self.cancel()
        if self._first_release():
            try:
                self.engine.run(self._release(), timeout=timeout)
            except TimeoutError:
                log.warning("run resources did not close within %.0f s", timeout)

    async def aclose(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """:meth:`close` for a coroutine on any event loop."""
        self.cancel()
        if self._first_release():
            try:
                await asyncio.shield(asyncio.wait_for(self.engine.arun(self._release()), timeout))
            except TimeoutError:
                log.warning("run resources did not close within %.0f s", timeout)

    def _first_release(self) -> bool:
        """Whether the resources are to be released now: once, and only if the engine
        loop was used (a run with no async work has nothing there)."""
        with self._lock:
            first = self._engine is not None and not self._released
            self._released = True
        return first

    async def _release(self) -> None:
        held = list(self._held.values())
        for item in held:
            item.release()
        await asyncio.gather(*(item.task for item in held), return_exceptions=True)

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._calls.discard(future)


class _Held:
    """A resource held open by a task of its own until released."""

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[Any] = loop.create_future()
        # Nobody may await an opening that failed (its callers timed out): no warning.
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._released = asyncio.Event()
        # A context of its own: not the one of the tool call that happened to open it.
        self.task = loop.create_task(self._hold(opener), context=contextvars.Context())

    @property
    def failed(self) -> bool:
        return self.ready.done() and (self.ready.cancelled() or self.ready.exception() is not None)

    def release(self) -> None:
        self._released.set()
        if not self.ready.done():  # still opening: nobody will get it now
            self.task.cancel()

    async def _hold(self, opener: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        try:
            async with opener() as value:
                self.ready.set_result(value)
                await self._released.wait()
        except asyncio.CancelledError:
            if not self.ready.done():
                self.ready.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the callers, or logged
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                log.warning("a run resource failed while closing: %s", exc)


def current_scope(config: RunnableConfig | None = None) -> RunScope | None:
    """The scope of the run ``config`` (default: the calling runnable's) belongs to."""
    config = config if config is not None else var_child_runnable_config.get()
    scope = (config or {}).get("configurable", {}).get(SCOPE_KEY)
    return scope if isinstance(scope, RunScope) else None


def saves_checkpoints(config: RunnableConfig | None = None) -> bool:
    """Whether the run ``config`` (default: the calling runnable's) belongs to saves
    checkpoints: its graph was compiled with a checkpointer, or inherits one from the
    app that embeds it (which a graph cannot know when it is built)."""
    config = config if config is not None else var_child_runnable_config.get()
    return (config or {}).get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER) is not None
