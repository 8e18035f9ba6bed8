"""Model-calling nodes written once and run both ways.

A node's logic is a generator that yields each model call it needs as
``(runnable, input)`` and receives the reply (or the call's exception, thrown
in). :func:`model_node` drives it with ``invoke`` under ``graph.invoke`` and
with ``await ainvoke`` under ``graph.ainvoke``, so an async run never blocks
its event loop on a model and parallel actors wait on their models together.
The node is a LangChain ``RunnableLambda`` with both functions, the supported
way to give a LangGraph node a sync and an async body; the run's ``Runtime``
comes from ``get_runtime()`` and node ``RetryPolicy`` applies as to any node.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.runtime import Runtime, get_runtime

ModelCall = tuple[Runnable[Any, Any], Any]
"""A model call a node's steps yield: the runnable and its input."""

S = TypeVar("S")
R = TypeVar("R")
Steps = Generator[ModelCall, Any, R]


def model_node(steps: Callable[[S, Runtime[Any]], Steps[R]], *, name: str) -> Runnable[S, R]:
    """A node running ``steps`` with sync model calls under ``invoke`` and awaited
    ones under ``ainvoke``."""

    def run(state: S) -> R:
        gen = steps(state, get_runtime())
        try:
            call = next(gen)
            while True:
                runnable, value = call
                try:
                    reply = runnable.invoke(value)
                except Exception as exc:  # noqa: BLE001 - the steps decide what a failure means
                    call = gen.throw(exc)
                else:
                    call = gen.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def arun(state: S) -> R:
        gen = steps(state, get_runtime())
        try:
            call = next(gen)
            while True:
                runnable, value = call
                try:
                    reply = await runnable.ainvoke(value)
                except Exception as exc:  # noqa: BLE001 - the steps decide what a failure means
                    call = gen.throw(exc)
                else:
                    call = gen.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    return RunnableLambda(run, afunc=arun, name=name)
