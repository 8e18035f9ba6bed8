"""A compiled graph whose every run holds a :class:`~aimegraph.running.scope.RunScope`.

Every way of running a LangGraph graph goes through ``stream`` or ``astream``:
``invoke`` and ``ainvoke``, ``stream_events``/``astream_events``, a parent graph
calling it as a node, LangGraph Server. Here both open a scope for the run, put it in
the run's config, and close it when the run's stream ends: finished, paused on an
interrupt, failed, cancelled, or abandoned by its consumer. A run inside a run that
already has one (this graph as a node of another scoped graph) uses that one.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any, Generic, cast

from langchain_core.runnables import RunnableConfig, ensure_config
from langgraph.graph.state import CompiledStateGraph
from langgraph.typing import ContextT, InputT, OutputT, StateT

from aimegraph.running.scope import RunScope, current_scope

__all__ = ["RunScopedGraph"]


class RunScopedGraph(
    CompiledStateGraph[StateT, ContextT, InputT, OutputT],
    Generic[StateT, ContextT, InputT, OutputT],
):
    """A :class:`CompiledStateGraph` opening one run scope per run (the base of
    :class:`aimegraph.graphs.compiled.AimeGraph`). ``copy`` and ``with_config`` keep
    the class."""

    def stream(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        if current_scope(ensure_config(config)) is not None:
            yield from super().stream(input, config, **kwargs)
            return
        scope = RunScope()
        parts = cast(Generator[Any], super().stream(input, scope.bind(config), **kwargs))
        try:
            # Not `yield from`: that would close `parts` (and wait for its running nodes)
            # before this frame sees the consumer leave.
            for part in parts:  # noqa: UP028
                yield part
        except BaseException:
            # The consumer stopped listening: end the calls in flight first, so that the
            # run's own cleanup (which waits for its running nodes) need not wait on them.
            scope.cancel()
            raise
        finally:
            parts.close()
            scope.close()

    async def astream(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        if current_scope(ensure_config(config)) is not None:
            async for part in super().astream(input, config, **kwargs):
                yield part
            return
        scope = RunScope()
        parts = cast(AsyncGenerator[Any], super().astream(input, scope.bind(config), **kwargs))
        try:
            async for part in parts:
                yield part
        except BaseException:
            scope.cancel()  # as in stream
            raise
        finally:
            await parts.aclose()
            await scope.aclose()
