"""The plain-transcript chat format for a base model, and its llama-cpp-python handler."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TRANSCRIPT_STOP", "transcript_chat_handler", "transcript_format"]

_TRANSCRIPT_MARK = "_aimegraph_transcript"
_SPEAKERS = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}
TRANSCRIPT_STOP = ["\nUser:", "\nTool:", "\nSystem:", "\nAssistant:"]


def transcript_chat_handler(*, max_tokens_cap: int | None = None) -> Any:
    """A llama-cpp-python chat completion handler for :func:`transcript_format`.

    With ``max_tokens_cap`` every completion is limited to that many tokens, whatever
    the request asks (an absent ``max_tokens`` otherwise means "until the context is
    full", which a base model that loops would use up): the server of
    :mod:`aimegraph.models.local_server` relies on it, since OpenAI clients send no
    limit by default. A capped reply ends with ``finish_reason="length"``.
    """
    from llama_cpp.llama_chat_format import chat_formatter_to_chat_completion_handler

    base = chat_formatter_to_chat_completion_handler(transcript_format)
    if max_tokens_cap is None:
        handler = base
    else:
        cap = int(max_tokens_cap)
        if cap < 1:
            raise ValueError(f"max_tokens_cap must be at least 1, got {cap}")

        def handler(**kwargs: Any) -> Any:
            asked = kwargs.get("max_tokens")
            kwargs["max_tokens"] = cap if asked is None or asked <= 0 else min(asked, cap)
            return base(**kwargs)

    setattr(handler, _TRANSCRIPT_MARK, True)
    return handler


def transcript_format(
    *, messages: Sequence[Mapping[str, Any]], tool_choice: Any = None, **_: Any
) -> Any:
    """A llama-cpp-python chat formatter writing the conversation as a plain transcript.

    Leading system messages come first as plain text; then one ``User:`` /
    ``Assistant:`` / ``Tool:`` / ``System:`` line (or paragraph) per message. The prompt
    ends with ``Assistant:`` and generation stops when the model starts another speaker's
    line (except for a forced function call, whose grammar ends the JSON). Assistant tool
    calls are written as JSON (``{"tool": name, "args": {...}}``).
    """
    from llama_cpp.llama_chat_format import ChatFormatterResponse

    system: list[str] = []
    turns: list[str] = []
    for message in messages:
        role = str(message.get("role", "user"))
        content = _text_of(message.get("content")).strip()
        if role == "system" and not turns:
            if content:
                system.append(content)
            continue
        if role in ("assistant", "model"):
            calls = [_render_tool_call(call) for call in message.get("tool_calls") or []]
            content = "\n".join(part for part in [content, *calls] if part)
        speaker = _SPEAKERS.get(role, "User")
        turns.append(f"{speaker}: {content}")
    turns.append("Assistant:")
    prompt = "\n".join(turns)
    if system:
        prompt = "\n\n".join(system) + "\n\n" + prompt
    # A forced function call is grammar-constrained JSON: stop sequences would only cut it.
    stop = None if isinstance(tool_choice, dict) else list(TRANSCRIPT_STOP)
    return ChatFormatterResponse(prompt=prompt, stop=stop)


def _render_tool_call(call: Mapping[str, Any]) -> str:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        args = arguments
    return json.dumps({"tool": function.get("name"), "args": args}, ensure_ascii=False)


def _text_of(content: Any) -> str:
    """Message content as text (content blocks joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return str(content)
