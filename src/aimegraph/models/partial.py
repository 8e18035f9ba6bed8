"""A structured call whose reply is read while it streams in.

The structured calls of :mod:`aimegraph.models.calls` wait for a whole reply. Where a
caller can act on part of it (the planner's tasks, each complete before the next one
starts), :func:`streamed_call` makes the same call with ``stream``/``astream`` and hands
the JSON received so far to a reader after each chunk; the chunks add up to the reply
the call returns, so everything after it (parsing, validation, re-asks) is unchanged.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from aimegraph.models.fallbacks import FallbackChatModel

__all__ = ["PartialReader", "reply_json", "streamed_call", "streams", "tool_name"]

_THINK_END = "</think>"

PartialReader = Callable[[str, bool], None]
"""Reads a reply as it streams in: called with the reply's JSON so far (a prefix of
it; the whole of it with ``True`` once the reply is complete)."""


def reply_json(reply: AIMessage, tool_name: str) -> str:
    """The JSON a reply holds so far: the arguments of its ``tool_name`` call (native
    structured output by tool calling), else of its first call, else its text from the
    first brace after any reasoning (JSON mode, or a server's JSON schema mode)."""
    if isinstance(reply, AIMessageChunk):
        calls = [(c.get("name"), c.get("args") or "") for c in reply.tool_call_chunks]
    else:
        calls = [(c["name"], json.dumps(c["args"])) for c in reply.tool_calls]
    own = [args for name, args in calls if name == tool_name] or [args for _, args in calls]
    if own:
        return own[0]
    whole = str(reply.text)
    text = whole[whole.rfind(_THINK_END) + len(_THINK_END) :] if _THINK_END in whole else whole
    start = text.find("{")
    return text[start:] if start >= 0 else ""


@functools.lru_cache(maxsize=64)
def tool_name(schema: type[BaseModel]) -> str:
    """The name of the tool ``schema`` is bound as."""
    return str(convert_to_openai_tool(schema)["function"]["name"])


def streams(model: BaseChatModel) -> bool:
    """Whether a plan from ``model`` can be read as it streams: its class implements
    streaming (rather than sending each reply as one chunk at its end), it is not a
    fallback chain (its members prepare structured output each their own way, and a
    stream cannot fall through once it has begun), and it has no reply cache (LangChain
    replays cached replies to ``invoke``, not to ``stream``)."""
    if isinstance(model, FallbackChatModel) or model.cache not in (None, False):
        return False
    cls, base = type(model), BaseChatModel
    return (
        cls._stream is not base._stream
        or cls._astream is not base._astream
        or (cls.stream is not base.stream)
    )


def streamed_call(
    call: Runnable[Any, Any], tool_name: str, start: Callable[[], PartialReader]
) -> Runnable[Any, AIMessage]:
    """``call`` (a chat model, bound or not) made by streaming: each attempt gets a
    reader from ``start`` and feeds it the reply's JSON (:func:`reply_json`) after
    every chunk; the result is the whole reply, as ``invoke`` would return it. A call
    that fails mid-stream raises as ``invoke`` would; what the reader saw stays read."""

    def run(value: Any, config: RunnableConfig) -> AIMessage:
        read, reply = start(), None
        for chunk in call.stream(value, config):
            reply = _added(reply, chunk)
            read(reply_json(reply, tool_name), False)
        return _whole(reply, tool_name, read)

    async def arun(value: Any, config: RunnableConfig) -> AIMessage:
        read, reply = start(), None
        async for chunk in call.astream(value, config):
            reply = _added(reply, chunk)
            read(reply_json(reply, tool_name), False)
        return _whole(reply, tool_name, read)

    return RunnableLambda(run, afunc=arun, name="streamed")


def _added(reply: AIMessage | None, chunk: Any) -> AIMessage:
    """The reply so far with ``chunk`` added; a runnable that cannot stream sends its
    whole reply as one ``AIMessage``."""
    if not isinstance(chunk, AIMessage):
        raise TypeError(f"a chat model streamed a {type(chunk).__name__}, not a message")
    if isinstance(reply, AIMessageChunk) and isinstance(chunk, AIMessageChunk):
        return reply + chunk
    return chunk


def _whole(reply: AIMessage | None, tool_name: str, read: PartialReader) -> AIMessage:
    """The reply the chunks add up to, read once more as complete."""
    if reply is None:
        raise ValueError("the model's stream ended without a reply")
    read(reply_json(reply, tool_name), True)
    if isinstance(reply, AIMessageChunk):
        message = message_chunk_to_message(reply)
        assert isinstance(message, AIMessage)
        return message
    return reply
