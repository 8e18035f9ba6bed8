"""The actor's LangChain middleware (architecture: Middleware): what its hooks see of
the actor's state, and what their changes and jumps do to the react step.

A hook sees the actor's state with ``messages`` as ``create_agent`` shows them (the
conversation without the system prompt). When a hook rewrites messages (a summary in
place of old turns, redacted text) the step writes the whole conversation again, its
system prompt first; otherwise it appends the reply, as without middleware. A jump to
``end`` settles the task as failed with the hook's last message as the reason (the
limits jump there); ``model`` asks the model again; ``tools`` runs the calls still
unanswered. The keys a middleware's ``state_schema`` adds are the actor's state too
(see :meth:`aimegraph.middleware.MiddlewareStack.extend`), written by the step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    RemoveMessage,
    ToolCall,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from aimegraph.middleware.calls import HookOutcome, split_system
from aimegraph.state import TaskResult

JUMP = "__middleware_jump__"
"""Key of a react step's update (taken out before it is written) naming where a hook
jumped after the model call."""


def hook_view(state: Mapping[str, Any]) -> HookOutcome:
    """The actor's state as its hooks see it, before they run."""
    _, conversation = split_system(state.get("messages", []))
    # Ids first, as the graph's reducer gives them: a hook replaces a message by its id.
    return HookOutcome({**state, "messages": add_messages([], cast(list[Any], conversation))})


def with_reply(outcome: HookOutcome, reply: Sequence[AnyMessage]) -> HookOutcome:
    """``outcome`` with the model's reply added, for the ``after_model`` hooks."""
    messages = add_messages(cast(list[Any], outcome.messages), cast(list[Any], list(reply)))
    return HookOutcome(
        {**outcome.state, "messages": messages}, dict(outcome.changes), outcome.rewrote
    )


def full_state(state: Mapping[str, Any], outcome: HookOutcome) -> dict[str, Any]:
    """The actor's state as the hooks left it: their keys set, the system prompt back
    first (and the context budget's summary dropped with the turns it covered)."""
    system, _ = split_system(state.get("messages", []))
    return {
        **state,
        **summary_reset(state, outcome),
        **outcome.changes,
        "messages": [*([system] if system else []), *outcome.messages],
    }


def written(
    state: Mapping[str, Any], outcome: HookOutcome, reply: Sequence[AnyMessage]
) -> dict[str, Any]:
    """The step's update for the messages and keys: ``reply`` appended, or the whole
    conversation again when a hook rewrote messages."""
    if not outcome.rewrote:
        return {**outcome.changes, "messages": list(reply)}
    whole = full_state(state, outcome)["messages"]
    return {
        **summary_reset(state, outcome),
        **outcome.changes,
        "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *whole],
    }


def summary_reset(state: Mapping[str, Any], outcome: HookOutcome) -> dict[str, Any]:
    """When a hook dropped messages (a summary in their place), the context budget's own
    summary (``context_summary``, and ``summarised``: how many turns it covers, counted
    from the start) no longer fits the conversation: it starts again."""
    if not outcome.rewrote or not state.get("summarised"):
        return {}
    kept = {m.id for m in outcome.messages}
    _, before = split_system(state.get("messages", []))
    if all(m.id in kept for m in before):
        return {}
    return {"context_summary": "", "summarised": 0}


def unanswered(messages: Sequence[AnyMessage]) -> list[ToolCall]:
    """The calls of the last reply that no observation answers yet (a hook may answer
    some: a blocked call)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage):
            answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
            return [c for c in message.tool_calls if c["id"] not in answered]
    return []


def stopped(outcome: HookOutcome) -> TaskResult:
    """The failed result of a task a hook ended (``jump_to: end``)."""
    said = next((m.text for m in reversed(outcome.messages) if isinstance(m, AIMessage)), "")
    return TaskResult(
        status="failed", summary=f"stopped by {outcome.by}: {said or 'no reason given'}"
    )
