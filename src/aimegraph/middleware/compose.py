"""``wrap_model_call`` and ``wrap_tool_call`` hooks composed into one, the first
outermost, as LangChain's ``create_agent`` composes them (its helpers are private).

A composed model wrapper always returns a :class:`ModelResponse`: a hook may return
an ``AIMessage`` or an ``ExtendedModelResponse``, and each hook's handler hands it the
inner layers' response as a ``ModelResponse``. An ``ExtendedModelResponse``'s command
has no state to apply to outside ``create_agent``'s graph: it is refused when
returned (:class:`CommandNotHonoured`), never dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import reduce
from typing import Any, TypeVar

from langchain.agents.middleware import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

ModelHandler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
AsyncModelHandler = Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
ModelWrapper = Callable[[ModelRequest[Any], ModelHandler], Any]
AsyncModelWrapper = Callable[[ModelRequest[Any], AsyncModelHandler], Awaitable[Any]]

ToolOutcome = ToolMessage | Command[Any]
ToolHandler = Callable[[ToolCallRequest], ToolOutcome]
AsyncToolHandler = Callable[[ToolCallRequest], Awaitable[ToolOutcome]]
ToolWrapper = Callable[[ToolCallRequest, ToolHandler], ToolOutcome]
AsyncToolWrapper = Callable[[ToolCallRequest, AsyncToolHandler], Awaitable[ToolOutcome]]


class CommandNotHonoured(NotImplementedError):
    """A ``wrap_model_call`` hook returned an ``ExtendedModelResponse`` with a command."""


def as_response(result: Any) -> ModelResponse[Any]:
    """A hook's result as a :class:`ModelResponse`.

    Raises:
        CommandNotHonoured: an ``ExtendedModelResponse`` carrying a command.
    """
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result])
    if isinstance(result, ExtendedModelResponse):
        if result.command is not None:
            raise CommandNotHonoured(
                "a wrap_model_call hook returned a Command (ExtendedModelResponse): aimegraph "
                "does not apply commands from model hooks; return state changes from "
                "after_model instead"
            )
        return result.model_response
    if isinstance(result, ModelResponse):
        return result
    raise TypeError(f"a wrap_model_call hook returned {type(result).__name__}, not a response")


W = TypeVar("W")


def _nest(outers: Sequence[W], around: Callable[[W, W], W], innermost: W) -> W:
    """``innermost`` wrapped by each of ``outers``, the first outermost."""
    return reduce(lambda inner, outer: around(outer, inner), reversed(outers), innermost)


def chain_model_wrappers(wrappers: Sequence[ModelWrapper]) -> ModelWrapper | None:
    """``wrappers`` as one, the first outermost; None for none."""
    if not wrappers:
        return None

    def around(outer: ModelWrapper, inner: ModelWrapper) -> ModelWrapper:
        def wrapped(request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any]:
            return as_response(outer(request, lambda req: as_response(inner(req, handler))))

        return wrapped

    last = wrappers[-1]

    def innermost(request: ModelRequest[Any], handler: ModelHandler) -> ModelResponse[Any]:
        return as_response(last(request, handler))

    return _nest(wrappers[:-1], around, innermost)


def chain_async_model_wrappers(wrappers: Sequence[AsyncModelWrapper]) -> AsyncModelWrapper | None:
    """The async twin of :func:`chain_model_wrappers`."""
    if not wrappers:
        return None

    def around(outer: AsyncModelWrapper, inner: AsyncModelWrapper) -> AsyncModelWrapper:
        async def wrapped(
            request: ModelRequest[Any], handler: AsyncModelHandler
        ) -> ModelResponse[Any]:
            async def call_inner(req: ModelRequest[Any]) -> ModelResponse[Any]:
                return as_response(await inner(req, handler))

            return as_response(await outer(request, call_inner))

        return wrapped

    last = wrappers[-1]

    async def innermost(
        request: ModelRequest[Any], handler: AsyncModelHandler
    ) -> ModelResponse[Any]:
        return as_response(await last(request, handler))

    return _nest(wrappers[:-1], around, innermost)


def chain_tool_wrappers(wrappers: Sequence[ToolWrapper]) -> ToolWrapper | None:
    """``wrappers`` as one, the first outermost; None for none."""
    if not wrappers:
        return None

    def around(outer: ToolWrapper, inner: ToolWrapper) -> ToolWrapper:
        def wrapped(request: ToolCallRequest, execute: ToolHandler) -> ToolOutcome:
            return outer(request, lambda req: inner(req, execute))

        return wrapped

    return _nest(wrappers[:-1], around, wrappers[-1])


def chain_async_tool_wrappers(wrappers: Sequence[AsyncToolWrapper]) -> AsyncToolWrapper | None:
    """The async twin of :func:`chain_tool_wrappers`."""
    if not wrappers:
        return None

    def around(outer: AsyncToolWrapper, inner: AsyncToolWrapper) -> AsyncToolWrapper:
        async def wrapped(request: ToolCallRequest, execute: AsyncToolHandler) -> ToolOutcome:
            async def call_inner(req: ToolCallRequest) -> ToolOutcome:
                return await inner(req, execute)

            return await outer(request, call_inner)

        return wrapped

    return _nest(wrappers[:-1], around, wrappers[-1])
