"""The conversation budget of an actor (``AimeConfig.max_context_tokens``).

When the conversation the model would see grows past the budget, the older turns
(tool calls and their observations) are folded into a running summary by the
model, in one call, and the model sees: its system prompt, the task, the
summary, and the newest turns that fit in half the budget. The state keeps every
message untouched, so the full observations stay in the checkpoint history;
``context_summary`` and ``summarised`` (how many turns the summary covers) are
checkpointed with them, so a resumed actor does not summarise again.

Sizes come from langchain-core's ``count_tokens_approximately`` and the cut from
``trim_messages``; the summary prompt asks to keep numbers, names and paths.
It is part of the actor's own loop (the core); :mod:`aimegraph.memory` re-exports it
as the memory layer it is (docs/architecture.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.models.calls import usage_of
from aimegraph.nodes.dual import Steps
from aimegraph.prompts import memory as prompts
from aimegraph.state import ActorState, Prices, Usage

__all__ = ["ContextView", "fit_context", "within_budget"]

# The system prompt and the task message are always shown in full.
_HEAD = 2


@dataclass(frozen=True)
class ContextView:
    """What the model is shown this step, and what to checkpoint about it."""

    messages: list[AnyMessage]
    update: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)


def fit_context(
    model: BaseChatModel,
    messages: Sequence[AnyMessage],
    *,
    max_tokens: int | None,
    summary: str = "",
    summarised: int = 0,
    prices: Prices | None = None,
) -> Steps[ContextView]:
    """The conversation to send, summarising older turns when it is over budget.

    A generator for :func:`aimegraph.nodes.dual.model_node` bodies: it yields the
    summary call (if one is needed) and returns a :class:`ContextView`. A failed
    summary call is thrown in here and the conversation is sent as it is.
    """
    head, body = list(messages[:_HEAD]), list(messages[_HEAD:])
    turns = body[summarised:]
    view = _summary_view(head, summary, body[:summarised], turns)
    if max_tokens is None or count_tokens_approximately(view) <= max_tokens:
        return ContextView(view)
    keep: list[AnyMessage] = trim_messages(  # type: ignore[assignment]
        turns,
        max_tokens=max_tokens // 2,
        token_counter=count_tokens_approximately,
        strategy="last",
        start_on="ai",
    )
    fold = turns[: len(turns) - len(keep)]
    if not fold:
        return ContextView(view)
    request = [
        SystemMessage(prompts.SUMMARY_SYSTEM),
        HumanMessage(
            prompts.SUMMARY.format(
                previous=summary or "(none)",
                observations=_render(fold),
            )
        ),
    ]
    try:
        reply = yield model, request
    except Exception:  # noqa: BLE001 - without a summary the actor still has its turns
        return ContextView(view)
    new_summary = reply.text.strip()
    covered = summarised + len(fold)
    return ContextView(
        _summary_view(head, new_summary, body[:covered], keep),
        update={"context_summary": new_summary, "summarised": covered},
        usage=usage_of(reply, "memory", prices),
    )


def _summary_view(
    head: list[AnyMessage],
    summary: str,
    folded: Sequence[AnyMessage],
    turns: Sequence[AnyMessage],
) -> list[AnyMessage]:
    if not summary:
        return [*head, *turns]
    steps = sum(isinstance(m, AIMessage) for m in folded)
    note = HumanMessage(prompts.SUMMARY_MESSAGE.format(steps=steps, summary=summary))
    return [*head, note, *turns]


def _render(turns: Sequence[AnyMessage]) -> str:
    """Older turns as text for the summariser, observations whole (tool outputs are
    already cut to ``max_observation_chars``): a figure anywhere in one must survive."""
    lines = []
    for message in turns:
        if isinstance(message, AIMessage):
            if message.text.strip():
                lines.append(f"You wrote: {message.text.strip()}")
            lines += [
                f"You called {c['name']}({json.dumps(c['args'])})" for c in message.tool_calls
            ]
        elif isinstance(message, ToolMessage):
            lines.append(f"Observation from {message.name or 'tool'}:\n{message.text}")
        else:
            lines.append(message.text)
    return "\n".join(lines)


def within_budget(
    model: BaseChatModel,
    config: AimeConfig,
    step: Callable[[ActorState, Runtime[Any]], Steps[dict[str, Any]]],
) -> Callable[[ActorState, Runtime[Any]], Steps[dict[str, Any]]]:
    """An actor step that sees its conversation fitted to ``max_context_tokens``."""

    def budgeted(state: ActorState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg = config.for_run(runtime)
        if cfg.max_context_tokens is None:
            return (yield from step(state, runtime))
        context = yield from fit_context(
            model,
            state["messages"],
            max_tokens=cfg.max_context_tokens,
            summary=state.get("context_summary", ""),
            summarised=state.get("summarised", 0),
            prices=cfg.prices,
        )
        update = yield from step({**state, "messages": context.messages}, runtime)
        if context.usage.llm_calls:
            update = {**update, "usage": update.get("usage", Usage()) + context.usage}
        return {**update, **context.update}

    return budgeted
