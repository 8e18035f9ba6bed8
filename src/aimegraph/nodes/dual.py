"""Model-calling nodes written once and run both ways.

A node's logic is a generator of model calls (:mod:`aimegraph.models.steps`):
it yields each call it needs as ``(runnable, input)`` and receives the reply (or
the call's exception, thrown in). :func:`model_node` drives it with ``invoke``
under ``graph.invoke`` and with ``await ainvoke`` under ``graph.ainvoke``, so an
async run never blocks its event loop on a model, parallel actors wait on their
models together, and a model with only an async API works. Once the run is
asked to drain, a node makes no further call (its first is the step's own). The node is a
runnable with both functions, the way to give a
LangGraph node a sync and an async body: see :func:`dual_node`. Node
``RetryPolicy`` applies as to any node.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config, run_in_executor
from langgraph._internal._runnable import RunnableCallable
from langgraph.runtime import Runtime
from pydantic import BaseModel

from aimegraph.config import AimeConfig
from aimegraph.models.calls import StructuredReply, ToolsBeside, resolve_mode, structured_steps
from aimegraph.models.partial import PartialReader
from aimegraph.models.steps import CallWrapper, ModelCall, Steps, arun_steps, run_steps
from aimegraph.state import Span

__all__ = ["ModelCall", "Steps", "ask_structured", "blocking_call", "dual_node", "model_node"]

S = TypeVar("S")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)


def dual_node(
    func: Callable[[S, Runtime[Any]], R],
    afunc: Callable[[S, Runtime[Any]], Awaitable[R]],
    *,
    name: str,
) -> Runnable[S, R]:
    """A node with a sync body for ``invoke`` and an async one for ``ainvoke``; both
    get the run's ``Runtime`` as ``runtime``.

    It is LangGraph's own node runnable, as ``create_react_agent`` builds its model
    node (``RunnableCallable(call_model, acall_model)``): it reads the functions'
    signatures once, where LangChain's ``RunnableLambda`` inspects them and opens a
    nested callback run on every call (0.17 ms a call, more than an instant model's
    reply). Not traced separately: the node's own run already is.
    """
    node: Runnable[S, R] = RunnableCallable(func, afunc, name=name, trace=False)
    return node


def blocking_call(node: Callable[..., R], *, name: str) -> Runnable[S, R]:
    """A blocking node function ``(state, *, runtime)`` (file system, a user's code) for
    node steps to yield like a model call: called directly under ``invoke``, in a
    worker thread under ``ainvoke`` (as LangGraph runs a sync node), never on the
    event loop."""

    def call(state: S, runtime: Runtime[Any]) -> R:
        return node(state, runtime=runtime)

    async def acall(state: S, runtime: Runtime[Any]) -> R:
        return await run_in_executor(None, call, state, runtime)

    return dual_node(call, acall, name=name)


def model_node(
    steps: Callable[[S, Runtime[Any]], Steps[R]],
    *,
    name: str,
    metadata: Callable[[S], Mapping[str, Any]] | None = None,
    span: str | None = None,
) -> Runnable[S, R]:
    """A node running ``steps`` with sync model calls under ``invoke`` and awaited
    ones under ``ainvoke``; each call's run gets ``metadata(state)`` (see
    :func:`aimegraph.streaming.call_metadata`), which token streams hand out. With
    ``span`` (a role's name), the node's update records when it ran, as a
    :class:`~aimegraph.state.Span` in ``spans`` (the run's timeline draws it)."""

    def config(state: S) -> RunnableConfig | None:
        if metadata is None:
            return None
        # The node's config (a runnable given one ignores the context's) with the
        # metadata added to its own.
        node = ensure_config()
        return {**node, "metadata": {**(node.get("metadata") or {}), **metadata(state)}}

    def run(state: S, runtime: Runtime[Any]) -> R:
        started_at = time.time()
        update = run_steps(steps(state, runtime), config(state), runtime.control)
        return _spanned(update, span, started_at)

    async def arun(state: S, runtime: Runtime[Any]) -> R:
        started_at = time.time()
        update = await arun_steps(steps(state, runtime), config(state), runtime.control)
        return _spanned(update, span, started_at)

    return dual_node(run, arun, name=name)


def _spanned(update: R, span: str | None, started_at: float) -> R:
    """``update`` (a node's dict) with the ``span`` of the step, from ``started_at`` to now."""
    if span is None or not isinstance(update, dict):
        return update
    ran = Span(name=span, started_at=started_at, ended_at=time.time())
    return cast(R, {**update, "spans": [ran]})


def ask_structured(
    model: BaseChatModel,
    schema: type[M],
    messages: Sequence[BaseMessage],
    *,
    role: str,
    config: AimeConfig,
    runtime: Runtime[Any],
    beside: ToolsBeside[M] | None = None,
    stream: Callable[[], PartialReader] | None = None,
    wrap: CallWrapper | None = None,
) -> Steps[StructuredReply[M]]:
    """A node's structured call (:func:`aimegraph.models.calls.structured_steps`) under
    the run's settings: its ``tool_calling`` mode for ``model`` (and ``server_schema``
    in JSON mode), ``max_output_retries``
    re-asks, and its prices; counted under ``role`` in the run's usage. With
    ``beside``, a native reply may call those tools too; with ``wrap``, each call runs
    inside the role's ``wrap_model_call`` middleware; with ``stream``, each reply is read
    as it streams in."""
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
            server_schema=config.server_schema,
            beside=beside,
            stream=stream,
            wrap=wrap,
        )
    )
