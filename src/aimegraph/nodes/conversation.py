"""The view a new run on a thread gets of the conversation's earlier turns.

A turn is a human request and the last reply to it. The view is built from the
conversation's ``messages`` alone, so it is the same whether the aime graph runs
directly on a thread or as a node of a chat app (whose ``messages`` it reads);
the aime graph's replies carry what their run produced (artifacts, work left
undone) in their ``response_metadata`` under :data:`ANSWER_METADATA`.

The view is bounded: the newest turns that fit in three quarters of the budget
are shown whole (langchain-core's ``trim_messages`` with
``count_tokens_approximately``), the older ones as one clipped line each, again
as many of the newest as fit in what is left, and a count of those left out.
It is computed once per run, by the intake node: no model call, no extra tokens
beyond the view itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from aimegraph.memory.sections import clip
from aimegraph.prompts import conversation as prompts
from aimegraph.state import Task

__all__ = ["ANSWER_METADATA", "Turn", "answer_metadata", "conversation_view", "past_turns"]

ANSWER_METADATA = "aimegraph"
"""Key of an aime reply's ``response_metadata`` holding what its run produced."""

_DIGEST_QUESTION, _DIGEST_ANSWER, _ARTIFACT_CHARS = 150, 250, 200


@dataclass(frozen=True)
class Turn:
    """One finished turn: the request, the last reply to it, and what its run left."""

    question: str
    answer: str = ""
    artifacts: Mapping[str, str] = field(default_factory=dict)
    left_open: tuple[str, ...] = ()

    def reply(self) -> str:
        """The reply with its artifacts and what was left open, as the view shows it."""
        artifacts = "; ".join(f"{k}: {clip(v, _ARTIFACT_CHARS)}" for k, v in self.artifacts.items())
        return (
            (self.answer or prompts.NO_ANSWER)
            + (prompts.ARTIFACTS.format(artifacts=artifacts) if artifacts else "")
            + (prompts.LEFT_OPEN.format(items="; ".join(self.left_open)) if self.left_open else "")
        )


def answer_metadata(tasks: Mapping[str, Task]) -> dict[str, Any]:
    """What a run's reply carries for later turns: the artifacts its tasks produced and
    the tasks it did not complete."""
    artifacts: dict[str, str] = {}
    for task in tasks.values():
        if task.result is not None and task.status == "completed":
            artifacts |= task.result.artifacts
    left_open = [f"{t.title} ({t.status})" for t in tasks.values() if t.status != "completed"]
    return {ANSWER_METADATA: {"artifacts": artifacts, "left_open": left_open}}


def past_turns(messages: Sequence[AnyMessage], *, outcome: str | None = None) -> list[Turn]:
    """The turns of ``messages`` (each human message with the last reply after it; tool
    calls and their results are not part of the conversation). ``outcome`` says how
    the last turn's run ended when it did not succeed."""
    turns: list[Turn] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            turns.append(Turn(message.text.strip() or prompts.NO_QUESTION))
        elif isinstance(message, AIMessage) and not message.tool_calls and message.text.strip():
            made = message.response_metadata.get(ANSWER_METADATA) or {}
            asked = turns.pop().question if turns else prompts.NO_QUESTION
            turns.append(
                Turn(
                    asked,
                    message.text.strip(),
                    dict(made.get("artifacts") or {}),
                    tuple(made.get("left_open") or ()),
                )
            )
    if turns and outcome:
        last = turns[-1]
        turns[-1] = Turn(last.question, last.answer, last.artifacts, (*last.left_open, outcome))
    return turns


def conversation_view(turns: Sequence[Turn], *, max_tokens: int) -> str:
    """The turns as a prompt section of about ``max_tokens`` at most ('' for none)."""
    if not turns or max_tokens <= 0:
        return ""
    as_messages: list[BaseMessage] = [
        m for t in turns for m in (HumanMessage(t.question), AIMessage(t.reply()))
    ]
    recent = _newest(as_messages, max_tokens * 3 // 4, start_on="human")
    shown = len(recent) // 2
    older = turns[: len(turns) - shown]
    lines: list[str] = []
    if older:
        digest = [
            HumanMessage(
                prompts.DIGEST_LINE.format(
                    question=clip(t.question, _DIGEST_QUESTION),
                    answer=clip(t.reply(), _DIGEST_ANSWER),
                )
            )
            for t in older
        ]
        room = max_tokens - count_tokens_approximately(recent)
        kept = [m.text for m in _newest(digest, room)]
        if kept:
            lines.append(prompts.DIGEST.format(count=len(kept), lines="\n".join(kept)))
        if left_out := len(older) - len(kept):
            lines.append(prompts.OMITTED.format(count=left_out))
    lines += [
        prompts.TURN.format(question=t.question, reply=t.reply())
        for t in turns[len(turns) - shown :]
    ]
    return prompts.VIEW.format(turns="\n\n".join(lines))


def _newest(messages: Sequence[BaseMessage], max_tokens: int, **how: Any) -> list[BaseMessage]:
    """The newest ``messages`` within ``max_tokens`` (whole messages only)."""
    if max_tokens <= 0:
        return []
    kept: list[BaseMessage] = trim_messages(
        messages,
        max_tokens=max_tokens,
        token_counter=count_tokens_approximately,
        strategy="last",
        **how,
    )
    return kept
