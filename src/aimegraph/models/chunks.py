"""A finished reply as the chunks a streaming provider would send.

The offline models (scripted, fuzz) decide a whole reply at once; to stream it they
send it the way providers do: the text word by word, each tool call as a first chunk
naming it (name, id, index) followed by its JSON arguments in pieces, and a last chunk
(``chunk_position="last"``) holding the usage and response metadata. LangChain's chunk
addition then merges them back into exactly the reply: the same content, tool calls,
usage and metadata. List content (reasoning and text blocks) is sent one block per
chunk, since blocks without an ``index`` are appended, not merged, when chunks add up.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult

__all__ = ["STREAMING", "WholeReplyStreaming", "chunk_count", "reply_chunks"]

# Split before each word that follows whitespace: every character stays in one piece.
_WORD_START = re.compile(r"(?<=\s)(?=\S)")
_ARGS_PIECE = 16


def reply_chunks(reply: AIMessage) -> Iterator[ChatGenerationChunk]:
    """Chunks that add up to ``reply`` (content, tool calls, usage, response metadata)."""
    if isinstance(reply.content, str):
        pieces: list[str | list[str | dict]] = [
            piece for piece in _WORD_START.split(reply.content) if piece
        ]
        empty: str | list[str | dict] = ""
    else:
        pieces = [[block] for block in reply.content]
        empty = []
    for piece in pieces:
        yield _chunk(reply, content=piece)
    for index, call in enumerate(reply.tool_calls):
        args = json.dumps(call["args"], ensure_ascii=False)
        parts = [args[i : i + _ARGS_PIECE] for i in range(0, len(args), _ARGS_PIECE)] or [""]
        for number, part in enumerate(parts):
            first = number == 0
            yield _chunk(
                reply,
                content=empty,
                tool_call_chunks=[
                    tool_call_chunk(
                        name=call["name"] if first else None,
                        args=part,
                        id=call["id"] if first else None,
                        index=index,
                    )
                ],
            )
    yield _chunk(
        reply,
        content=empty,
        usage_metadata=reply.usage_metadata,
        response_metadata=dict(reply.response_metadata),
        additional_kwargs=dict(reply.additional_kwargs),
        chunk_position="last",
    )


def _chunk(reply: AIMessage, **fields: object) -> ChatGenerationChunk:
    return ChatGenerationChunk(message=AIMessageChunk(id=reply.id, **fields))  # type: ignore[arg-type]


STREAMING = "_aimegraph_streaming"
"""The keyword ``_stream`` calls a paced model's ``_generate`` with (see
:meth:`WholeReplyStreaming.chunk_delay_s`)."""


def chunk_count(reply: AIMessage) -> int:
    """How many chunks :func:`reply_chunks` sends ``reply`` in."""
    return sum(1 for _ in reply_chunks(reply))


class WholeReplyStreaming(BaseChatModel):
    """Mixin: stream the reply ``_generate`` (``_agenerate`` when async) decides, as
    :func:`reply_chunks`. A stream is then the same call as an ``invoke``: the same
    reply, the same errors (raised before the first chunk), the same side effects, and
    a subclass that overrides ``_generate`` streams what it returns."""

    def chunk_delay_s(self) -> float:
        """Seconds before each chunk (none here): a slow model's pace. A subclass
        that paces its replies takes as long over a reply it is not asked to stream,
        unless its ``_generate`` gets :data:`STREAMING` (then the chunks are paced)."""
        return 0.0

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        delay = self.chunk_delay_s()
        paced: dict[str, Any] = {STREAMING: True} if delay else {}
        result = self._generate(messages, stop=stop, **kwargs, **paced)
        for chunk in reply_chunks(_reply_of(result)):
            if delay:
                time.sleep(delay)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        delay = self.chunk_delay_s()
        paced: dict[str, Any] = {STREAMING: True} if delay else {}
        result = await self._agenerate(messages, stop=stop, **kwargs, **paced)
        for chunk in reply_chunks(_reply_of(result)):
            if delay:
                await asyncio.sleep(delay)
            yield chunk


def _reply_of(result: ChatResult) -> AIMessage:
    message = result.generations[0].message
    if not isinstance(message, AIMessage):
        raise TypeError(f"a chat model replied with a {type(message).__name__}, not an AIMessage")
    return message
