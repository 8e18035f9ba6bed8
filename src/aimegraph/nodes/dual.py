"""Model-calling nodes written once and run both ways.

A node's logic is a generator of model calls (:mod:`aimegraph.models.steps`):
it yields each call it needs as ``(runnable, input)`` and receives the reply (or
the call's exception, thrown in). :func:`model_node` drives it with ``invoke``
under ``graph.invoke`` and with ``await ainvoke`` under ``graph.ainvoke``, so an
async run never blocks its event loop on a model, parallel actors wait on their
models together, and a model with only an async API works. The node is a
LangChain ``RunnableLambda`` with both functions, the supported way to give a
LangGraph node a sync and an async body; the run's ``Runtime`` comes from
``get_runtime()`` and node ``RetryPolicy`` applies as to any node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.runtime import Runtime, get_runtime
from pydantic import BaseModel

from aimegraph.config import AimeConfig
from aimegraph.models.calls import StructuredReply, resolve_mode, structured_steps
from aimegraph.models.steps import ModelCall, Steps, arun_steps, run_steps

__all__ = ["ModelCall", "Steps", "ask_structured", "model_node"]

S = TypeVar("S")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)


def model_node(steps: Callable[[S, Runtime[Any]], Steps[R]], *, name: str) -> Runnable[S, R]:
    """A node running ``steps`` with sync model calls under ``invoke`` and awaited
    ones under ``ainvoke``."""

    def run(state: S) -> R:
        return run_steps(steps(state, get_runtime()))

    async def arun(state: S) -> R:
        return await arun_steps(steps(state, get_runtime()))

    return RunnableLambda(run, afunc=arun, name=name)


def ask_structured(
    model: BaseChatModel,
    schema: type[M],
    messages: Sequence[BaseMessage],
    *,
    role: str,
    config: AimeConfig,
    runtime: Runtime[Any],
) -> Steps[StructuredReply[M]]:
    """A node's structured call (:func:`aimegraph.models.calls.structured_steps`) under
    the run's settings: its ``tool_calling`` mode for ``model``, ``max_output_retries``
    re-asks, and its prices; counted under ``role`` in the run's usage."""
    return (
        yield from structured_steps(
            model,
            schema,
            messages,
            role=role,
            mode=resolve_mode(config.tool_calling, model, structured=True),
            retries=config.max_output_retries,
            runtime=runtime,
            prices=config.prices,
        )
    )
