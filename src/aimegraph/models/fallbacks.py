"""A chain of chat models tried in order: the next one answers when one fails transiently.

``FallbackChatModel([a, b])`` is a chat model (so every node, the tool-calling and
structured-output checks and the sub-builders take it as any other): each call goes to
``a``, and to ``b`` only when ``a`` fails with a transient error (a rate limit, a 5xx,
a timeout, a dropped connection: :func:`aimegraph.models.errors.is_transient`) after its
own client retries. Any other error (a bad request, a missing key) is the caller's and
propagates at once, as the last member's error does.

LangChain's ``Runnable.with_fallbacks`` falls through on exception *types* and its
result has no ``bind_tools``; here ``bind_tools`` and ``with_structured_output`` are
applied to each member (each provider formats tools its own way) and the bound members
are chained by the same rule. Each member is called with the caller's config, so
callbacks, streaming and usage see the model that actually answered (its
``response_metadata["model_name"]``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import Field

from aimegraph.models.errors import is_transient

__all__ = ["FallbackChatModel", "FirstAvailable"]


class FirstAvailable(Runnable[Any, Any]):
    """``runnables`` tried in order; a transient error moves on to the next one (a
    stream only before its first chunk: what was sent cannot be taken back)."""

    def __init__(self, runnables: Sequence[Runnable[Any, Any]]) -> None:
        if not runnables:
            raise ValueError("a fallback chain needs at least one model")
        self.runnables = tuple(runnables)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        for runnable in self.runnables[:-1]:
            try:
                return runnable.invoke(input, config, **kwargs)
            except Exception as exc:
                _raise_unless_transient(exc)
        return self.runnables[-1].invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        for runnable in self.runnables[:-1]:
            try:
                return await runnable.ainvoke(input, config, **kwargs)
            except Exception as exc:
                _raise_unless_transient(exc)
        return await self.runnables[-1].ainvoke(input, config, **kwargs)

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        for runnable in self.runnables[:-1]:
            chunks = runnable.stream(input, config, **kwargs)
            try:
                first = next(chunks)
            except StopIteration:
                return
            except Exception as exc:
                _raise_unless_transient(exc)
                continue
            yield first
            yield from chunks
            return
        yield from self.runnables[-1].stream(input, config, **kwargs)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        for runnable in self.runnables[:-1]:
            chunks = runnable.astream(input, config, **kwargs)
            try:
                first = await anext(chunks)
            except StopAsyncIteration:
                return
            except Exception as exc:
                _raise_unless_transient(exc)
                continue
            yield first
            async for chunk in chunks:
                yield chunk
            return
        async for chunk in self.runnables[-1].astream(input, config, **kwargs):
            yield chunk


def _raise_unless_transient(exc: Exception) -> None:
    if not is_transient(exc):
        raise exc


class FallbackChatModel(BaseChatModel):
    """Chat models tried in order (see the module docstring)."""

    models: list[BaseChatModel] = Field(min_length=2)

    @property
    def _llm_type(self) -> str:
        return "fallbacks"

    def each(self, make: Callable[[BaseChatModel], Runnable[Any, Any]]) -> FirstAvailable:
        """The chain of ``make(member)`` for every member, tried in order as the members
        are: how a call is prepared in each member's own way (bound tools, structured
        output, a server's schema field) and still falls through."""
        return FirstAvailable([make(model) for model in self.models])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self.each(lambda model: model.bind_tools(tools, **kwargs))

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self.each(lambda model: model.with_structured_output(schema, **kwargs))

    def invoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AIMessage:
        reply: AIMessage = self.each(_same).invoke(input, config, **kwargs)
        return reply

    async def ainvoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AIMessage:
        reply: AIMessage = await self.each(_same).ainvoke(input, config, **kwargs)
        return reply

    def stream(  # type: ignore[override]
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        return self.each(_same).stream(input, config, **kwargs)

    def astream(  # type: ignore[override]
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return self.each(_same).astream(input, config, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # Only LangChain's batch `generate` API comes here; calls go through `invoke`.
        reply = self.invoke(messages, stop=stop, **kwargs)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _same(model: BaseChatModel) -> Runnable[Any, Any]:
    return model
