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

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult

__all__ = ["WholeReplyStreaming", "reply_chunks"]

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


class WholeReplyStreaming(BaseChatModel):
    """Mixin: stream the reply ``_generate`` (``_agenerate`` when async) decides, as
    :func:`reply_chunks`. A stream is then the same call as an ``invoke``: the same
    reply, the same errors (raised before the first chunk), the same side effects, and
    a subclass that overrides ``_generate`` streams what it returns."""

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from reply_chunks(_reply_of(self._generate(messages, stop=stop, **kwargs)))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        result = await self._agenerate(messages, stop=stop, **kwargs)
        for chunk in reply_chunks(_reply_of(result)):
            yield chunk


def _reply_of(result: ChatResult) -> AIMessage:
    message = result.generations[0].message
    if not isinstance(message, AIMessage):
        raise TypeError(f"a chat model replied with a {type(message).__name__}, not an AIMessage")
    return message
