"""Generic replies to chat prompts, for the scripted model's ``echo`` mode.

A scenario with ``echo: true`` answers every prompt that is not the engine's (no
``# Role:`` line) from the prompt itself, so the model can be driven by code written
for any chat model (LangChain's standard tests, a chat UI) while the engine's prompts
still replay the scenario strictly:

- with tools bound, a forced ``tool_choice`` (``"any"``, ``"required"``, a name) or a
  conversation whose last turn is the user's gets one tool call: the forced tool, else
  the tool the user's message names first, else the first tool; its arguments are
  read from that message (see :func:`value_for`);
- with a ``response_format`` the reply is a JSON object: one filled from the schema,
  or ``{"echo": <the user's message>}`` when only JSON was asked for;
- otherwise the reply is the text of the last turn (a tool result as
  ``<tool> returned: <output>``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = ["echo_reply", "value_for"]

_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"|“([^”]+)”")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_FREE_CHOICES = (None, "auto", "none", False)
_FORCED_WORDS = ("any", "required", True)
_NOTHING = "(nothing to echo)"


def echo_reply(
    messages: Sequence[BaseMessage],
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    tool_choice: Any = None,
    response_format: Mapping[str, Any] | None = None,
) -> AIMessage:
    """The echo mode's reply to ``messages`` (tools as OpenAI tool schemas)."""
    said = _last_user_text(messages)
    tool = _tool_to_call(messages, tools, tool_choice, said)
    if tool is not None:
        function = tool["function"]
        args = value_for(function.get("parameters") or {"type": "object"}, said)
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        return AIMessage(
            content="",
            tool_calls=[
                {"name": function["name"], "args": args, "id": call_id, "type": "tool_call"}
            ],
        )
    if response_format is not None and response_format.get("type") != "text":
        schema = _schema_of(response_format)
        answer = value_for(schema, said) if schema else {"echo": said}
        return AIMessage(content=json.dumps(answer, ensure_ascii=False))
    return AIMessage(content=_last_turn_text(messages) or _NOTHING)


def value_for(schema: Mapping[str, Any], text: str) -> Any:
    """A value of JSON ``schema`` read from ``text``: strings are its first quoted part
    (else the whole text), numbers its numbers in order (within the schema's bounds,
    else the nearest bound), booleans true, enums their first member, arrays one
    item, objects every property."""
    numbers = iter(float(n) for n in _NUMBER.findall(text))
    quoted = next((next(p for p in m.groups() if p) for m in _QUOTED.finditer(text)), None)
    return _Filler(schema, quoted or text.strip() or _NOTHING, numbers).value(schema)


class _Filler:
    def __init__(self, root: Mapping[str, Any], words: str, numbers: Iterator[float]) -> None:
        self._definitions = {**root.get("definitions", {}), **root.get("$defs", {})}
        self._words = words
        self._numbers = numbers

    def value(self, schema: Mapping[str, Any]) -> Any:
        if "$ref" in schema:
            return self.value(self._definitions.get(str(schema["$ref"]).rsplit("/", 1)[-1], {}))
        options = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
        if options:
            chosen = next((o for o in options if o.get("type") != "null"), options[0])
            return self.value(chosen)
        if "enum" in schema:
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        kind = schema.get("type", "object" if "properties" in schema else "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object":
            properties = schema.get("properties") or {}
            return {name: self.value(sub) for name, sub in properties.items()}
        if kind == "array":
            return [self.value(schema.get("items") or {})]
        if kind in ("integer", "number"):
            return self._number(schema, integer=kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return self._words

    def _number(self, schema: Mapping[str, Any], *, integer: bool) -> int | float:
        found = next(self._numbers, 0.0)
        step = 1 if integer else 0.5
        low = schema.get("minimum", _plus(schema.get("exclusiveMinimum"), step))
        high = schema.get("maximum", _plus(schema.get("exclusiveMaximum"), -step))
        if low is not None and found < low:
            found = low
        if high is not None and found > high:
            found = high
        return int(found) if integer else float(found)


def _plus(bound: Any, step: float) -> float | None:
    return None if bound is None else float(bound) + step


def _tool_to_call(
    messages: Sequence[BaseMessage],
    tools: Sequence[Mapping[str, Any]],
    tool_choice: Any,
    said: str,
) -> Mapping[str, Any] | None:
    if not tools or tool_choice in ("none", False):
        return None
    by_name = {tool["function"]["name"]: tool for tool in tools}
    forced = _forced_name(tool_choice)
    if forced in by_name:
        return by_name[forced]
    users_turn = bool(messages) and isinstance(messages[-1], HumanMessage)
    if tool_choice in _FREE_CHOICES and not users_turn:
        return None
    mentioned = [name for name in by_name if name in said]
    return by_name[min(mentioned, key=said.index)] if mentioned else tools[0]


def _forced_name(tool_choice: Any) -> str | None:
    if isinstance(tool_choice, Mapping):
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else tool_choice.get("name")
        return str(name) if name else None
    if isinstance(tool_choice, str) and tool_choice not in (*_FREE_CHOICES, *_FORCED_WORDS):
        return tool_choice
    return None


def _schema_of(response_format: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema of an OpenAI (``json_schema.schema``) or llama.cpp (``schema``) format."""
    nested = response_format.get("json_schema")
    if isinstance(nested, Mapping) and isinstance(nested.get("schema"), Mapping):
        return nested["schema"]
    schema = response_format.get("schema")
    return schema if isinstance(schema, Mapping) else None


def _last_user_text(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text.strip()
    return ""


def _last_turn_text(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, ToolMessage):
            return f"{message.name or 'the tool'} returned: {message.text.strip()}"
        return message.text.strip()
    return ""
