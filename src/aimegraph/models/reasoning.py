"""Reasoning in model replies, kept out of what the engine shows, stores or parses.

Reasoning models hand back their thinking in two ways:

- content blocks of type ``"reasoning"`` or ``"thinking"`` (LangChain's standard
  blocks, Anthropic's extended thinking); ``BaseMessage.text`` already leaves them out;
- text between ``<think>`` and ``</think>`` (DeepSeek-R1, Qwen3, QwQ and the like served
  by OpenAI-compatible servers without a reasoning parser). A chat template may put the
  opening tag in the prompt, so a reply can start inside the block and show only the
  closing tag; a reply cut off while thinking has an opening tag and no closing one.

:func:`visible_text` is the text of a reply without either; every summary, final
answer and parsed reply is read through it.
"""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["REASONING_BLOCK_TYPES", "strip_reasoning", "visible_text", "without_think_text"]

REASONING_BLOCK_TYPES = frozenset({"reasoning", "thinking", "redacted_thinking"})

_TAGS = "think|thinking|reasoning"
_CLOSED_BLOCK = re.compile(rf"<({_TAGS})>.*?</\1>", re.S | re.I)
_CLOSE_TAG = re.compile(rf"</(?:{_TAGS})>", re.I)
_OPEN_TAG_TO_END = re.compile(rf"<(?:{_TAGS})>.*\Z", re.S | re.I)


def strip_reasoning(text: str) -> str:
    """``text`` without its reasoning, stripped of surrounding blanks.

    Removes ``<think>...</think>`` blocks; then, once those are gone, everything up to a
    closing tag left over (its opening tag was in the prompt) and everything from an
    opening tag left over (the reply was cut off while thinking).
    """
    text = _CLOSED_BLOCK.sub("", text)
    if close := _CLOSE_TAG.search(text):
        text = text[close.end() :]
    return _OPEN_TAG_TO_END.sub("", text).strip()


def visible_text(message: BaseMessage) -> str:
    """The text of ``message`` a user may see: text blocks only, ``<think>`` removed."""
    return strip_reasoning(message.text)


def without_think_text(message: AIMessage) -> AIMessage:
    """``message`` with ``<think>`` text removed from its text content.

    Reasoning content blocks are kept: they are not text, and providers such as
    Anthropic need them sent back unchanged while a tool-using turn continues.
    """
    content = message.content
    if isinstance(content, str):
        cleaned: str | list[str | dict[object, object]] = strip_reasoning(content)
    else:
        cleaned = [
            strip_reasoning(block)
            if isinstance(block, str)
            else {**block, "text": strip_reasoning(block["text"])}
            if block.get("type") == "text" and isinstance(block.get("text"), str)
            else block
            for block in content
        ]
    if cleaned == content:
        return message
    return message.model_copy(update={"content": cleaned})
