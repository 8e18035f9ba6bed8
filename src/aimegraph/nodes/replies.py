"""An actor's model reply read as the messages it adds to its conversation: its tool
calls (native, written into its text, or JSON), its final text, or a re-ask saying
why it could not be used."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from aimegraph.models.calls import Mode
from aimegraph.models.json_tools import parse_tool_calls, tool_calls_in_text
from aimegraph.models.jsonparse import JsonReplyError, check_degenerate, why_unusable_call
from aimegraph.models.reasoning import visible_text, without_think_text
from aimegraph.models.reply_reading import RE_ASK
from aimegraph.prompts import actor as prompts
from aimegraph.prompts import json_mode

__all__ = ["RE_ASK", "reply_messages"]


def reply_messages(reply: AIMessage, tool_names: list[str], mode: Mode) -> list[AnyMessage]:
    """A tool loop's model reply as the messages it adds to the conversation: the
    tool calls it makes (native, written into its text, or in ``json`` mode its
    JSON), else its text, or a re-ask saying why it could not be used."""
    return (_json_step if mode == "json" else _native_step)(reply, tool_names)


def _native_step(reply: AIMessage, tool_names: list[str]) -> list[AnyMessage]:
    """A native reply as the next message: its tool calls, else the calls of bound tools
    written into its text, else its text as the final summary; an empty reply is asked
    again. ``<think>`` text is left out."""
    message = without_think_text(reply)
    if not message.tool_calls and (calls := tool_calls_in_text(message.text, tool_names)):
        message = message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []})
    if message.tool_calls or (message.text.strip() and not message.invalid_tool_calls):
        return [message]
    # A call with broken arguments is not an answer, whatever text comes with it. Neither it
    # nor an empty assistant turn is sent back (providers refuse both): only the text.
    said = message.model_copy(update={"invalid_tool_calls": []})
    problem = _why_unusable(reply) or "empty reply"
    return [*([said] if said.text.strip() else []), _re_ask(prompts.UNUSABLE_REPLY, problem)]


def _json_step(reply: AIMessage, tool_names: list[str]) -> list[AnyMessage]:
    """Turn a JSON-mode reply into tool calls, or into a re-ask with the parse error."""
    text = visible_text(reply)
    try:
        calls = parse_tool_calls(reply.text, tool_names)
    except JsonReplyError as exc:
        problem = _why_unusable(reply) or str(exc)
    else:
        return [AIMessage(content=text, tool_calls=calls, id=reply.id)]
    said: list[AnyMessage] = [AIMessage(content=text, id=reply.id)] if text else []
    return [*said, _re_ask(json_mode.PARSE_ERROR, problem)]


def _why_unusable(reply: AIMessage) -> str | None:
    """Why a reply is unusable as a whole, if it is: tool calls whose arguments were not
    valid JSON, or an empty, looping or cut-off reply."""
    if reply.invalid_tool_calls:
        bad = reply.invalid_tool_calls[0]
        return (
            why_unusable_call(reply)
            or f"the arguments of your {bad.get('name') or 'tool'} call were not valid JSON"
        )
    finish = reply.response_metadata.get("finish_reason")
    return check_degenerate(reply.text, finish_reason=finish)


def _re_ask(template: str, problem: str) -> HumanMessage:
    """The turn asking the model again, saying what was wrong with its reply."""
    return HumanMessage(template.format(error=problem), response_metadata={RE_ASK: problem})
