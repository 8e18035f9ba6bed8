"""Token streams: what aimegraph's model calls carry in their metadata, and the
answer or chosen actors picked out of a ``stream_mode="messages"`` stream.

Every model call of the engine runs with these keys in its run metadata, which
LangGraph hands out with each ``messages`` chunk (the second item of the pair):

* :data:`ROLE`: ``planner``, ``actor``, ``verifier``, ``reporter``, ``team``, ``memory``;
* :data:`TASK_ID`: the task an actor (or its check, or its team) works on;
* :data:`MEMBER` and :data:`TURN`: the team member and its turn, inside a team.

The answer is the reporter's reply: its tokens, or the whole message when the
model does not stream; it reaches the state as the same message (same id), so a
stream delivers it once. An answer that is not a model reply (a partial report,
the results listed after a failure) comes as one message named :data:`ANSWER_NAME`.
The reporter, a top-level node, streams under ``graph.stream(...)``; the planner,
the actors and the verifier run in subgraphs: pass ``subgraphs=True`` to get
theirs (and to get the answer when the graph is a node of your app).
"""

from __future__ import annotations

import json
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

__all__ = [
    "ANSWER_NAME",
    "MEMBER",
    "ROLE",
    "TASK_ID",
    "TURN",
    "aanswer_text",
    "answer_piece",
    "answer_text",
    "aselect_messages",
    "call_metadata",
    "select_messages",
]

ROLE = "aimegraph_role"
TASK_ID = "aimegraph_task_id"
MEMBER = "aimegraph_member"
TURN = "aimegraph_turn"
ANSWER_NAME = "aime"
"""The ``name`` of the answer's message (an ``AIMessage``) in ``messages``."""

Chunk = tuple[BaseMessage, dict[str, Any]]


def call_metadata(role: str, state: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The metadata of a model call made for ``role``; with an actor's (or a team's)
    ``state``, its task id, and its member and turn inside a team."""
    metadata: dict[str, Any] = {ROLE: role}
    if state is not None and (task := state.get("task")) is not None:
        metadata[TASK_ID] = task.id
    if state is not None and "member" in state:
        metadata |= {MEMBER: state["member"], TURN: state.get("turn", 1)}
    return metadata


def select_messages(
    stream: Iterable[Any],
    *,
    answer: bool = False,
    tasks: Collection[str] | None = None,
    members: Collection[str] | None = None,
) -> Iterator[Chunk]:
    """The ``(message, metadata)`` pairs of ``stream`` that belong to the answer
    (``answer=True``), to the actors of ``tasks`` (task ids), or to the team
    ``members`` (unit names); a pair is kept when it matches any of them.

    ``stream`` is what ``graph.stream(...)`` yields with ``"messages"`` among its
    modes, in any of its shapes: alone or with other modes, with or without
    ``subgraphs=True``, or ``version="v2"`` parts; other modes' chunks are skipped.
    :func:`aselect_messages` takes ``graph.astream(...)``.

    Raises:
        ValueError: nothing was chosen.
    """
    pick = _picker(answer, tasks, members)
    for chunk in stream:
        if (pair := pick(chunk)) is not None:
            yield pair


async def aselect_messages(
    stream: AsyncIterable[Any],
    *,
    answer: bool = False,
    tasks: Collection[str] | None = None,
    members: Collection[str] | None = None,
) -> AsyncIterator[Chunk]:
    """:func:`select_messages` over ``graph.astream(...)``."""
    pick = _picker(answer, tasks, members)
    async for chunk in stream:
        if (pair := pick(chunk)) is not None:
            yield pair


def answer_text(stream: Iterable[Any]) -> Iterator[str]:
    """The answer's text as it is generated, piece by piece (a typed answer's JSON
    as its tool-call arguments stream in), from a stream as :func:`select_messages`
    takes it. A reply the reporter re-asks (an echo of its prompt, a typed answer
    that did not validate) streams too: the state's ``final_answer`` is the one that
    counts."""
    for chunk in stream:
        if piece := answer_piece(chunk):
            yield piece


async def aanswer_text(stream: AsyncIterable[Any]) -> AsyncIterator[str]:
    """:func:`answer_text` over ``graph.astream(...)``."""
    async for chunk in stream:
        if piece := answer_piece(chunk):
            yield piece


def answer_piece(chunk: Any) -> str:
    """The piece of the answer one stream chunk carries ('' for any other chunk)."""
    pair = _messages_payload(chunk)
    return _text_of(pair[0]) if pair is not None and _is_answer(*pair) else ""


def _picker(
    answer: bool, tasks: Collection[str] | None, members: Collection[str] | None
) -> Callable[[Any], Chunk | None]:
    if not answer and tasks is None and members is None:
        raise ValueError("choose answer=True, tasks=[...] or members=[...]")

    def pick(chunk: Any) -> Chunk | None:
        pair = _messages_payload(chunk)
        if pair is None:
            return None
        message, metadata = pair
        chosen = (
            (answer and _is_answer(message, metadata))
            or (tasks is not None and metadata.get(TASK_ID) in tasks)
            or (members is not None and metadata.get(MEMBER) in members)
        )
        return pair if chosen else None

    return pick


def _is_answer(message: BaseMessage, metadata: Mapping[str, Any]) -> bool:
    return metadata.get(ROLE) == "reporter" or (
        isinstance(message, AIMessage) and message.name == ANSWER_NAME
    )


def _text_of(message: BaseMessage) -> str:
    if isinstance(message, AIMessageChunk) and message.tool_call_chunks:
        return message.text + "".join(c.get("args") or "" for c in message.tool_call_chunks)
    if isinstance(message, AIMessage) and message.tool_calls and not message.text:
        return "".join(json.dumps(call["args"], ensure_ascii=False) for call in message.tool_calls)
    return message.text


def _messages_payload(chunk: Any) -> Chunk | None:
    """The ``(message, metadata)`` pair a stream chunk carries, if it is a
    ``messages`` one."""
    if isinstance(chunk, dict):  # version="v2": {"type", "ns", "data"}
        return _pair(chunk.get("data")) if chunk.get("type") == "messages" else None
    if not isinstance(chunk, tuple):
        return None
    if len(chunk) == 3:  # (namespace, mode, payload)
        return _pair(chunk[2]) if chunk[1] == "messages" else None
    if len(chunk) == 2:
        first, second = chunk
        if isinstance(first, BaseMessage):  # (message, metadata)
            return _pair(chunk)
        if isinstance(first, str):  # (mode, payload)
            return _pair(second) if first == "messages" else None
        return _pair(second)  # (namespace, (message, metadata))
    return None


def _pair(value: Any) -> Chunk | None:
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], BaseMessage)
        and isinstance(value[1], dict)
    ):
        return value[0], value[1]
    return None
