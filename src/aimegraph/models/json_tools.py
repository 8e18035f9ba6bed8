"""Tool calling for models without native support (``tool_calling="json"``).

Tools are described in the prompt, the model answers with a JSON object naming
a tool and its arguments, and the reply becomes an ordinary ``AIMessage`` with
``tool_calls`` so that ToolNode runs it like any native call. Before the next
call the conversation is flattened back to plain text turns, since servers
without tool support reject tool-call messages.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool

from aimegraph.models.jsonparse import JsonReplyError, parse_json_reply

_NAME_KEYS = ("tool", "name", "action", "function")
_ARGS_KEYS = ("args", "arguments", "parameters", "input", "action_input")


def tool_args_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of the arguments the model fills in (injected ones excluded)."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        return schema
    return cast(dict[str, Any], schema.model_json_schema())  # type: ignore[union-attr]


def describe_tools(tools: Sequence[BaseTool]) -> str:
    """One line per tool: name, description and argument schema."""
    lines = []
    for tool in tools:
        schema = tool_args_schema(tool)
        args = json.dumps(schema.get("properties", {}), separators=(",", ":"))
        required = schema.get("required", [])
        lines.append(
            f"- {tool.name}: {tool.description.strip()}\n  args: {args} required: {required}"
        )
    return "\n".join(lines)


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Tool calls from a JSON reply; raises JsonReplyError saying what to fix."""
    data = parse_json_reply(text)
    items = data if isinstance(data, list) else [data]
    calls: list[ToolCall] = []
    for item in items:
        if not isinstance(item, dict):
            raise JsonReplyError('expected an object like {"tool": "...", "args": {...}}')
        name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
        if not name:
            raise JsonReplyError('the object has no "tool" name')
        args: Any = next((item[k] for k in _ARGS_KEYS if k in item), {})
        if isinstance(args, str):
            # Some models send the arguments as a JSON string.
            args = parse_json_reply(args) if args.strip().startswith("{") else {"input": args}
        if not isinstance(args, dict):
            raise JsonReplyError(f'"args" of {name} must be an object')
        calls.append(
            ToolCall(name=name, args=args, id=f"call_{uuid.uuid4().hex[:12]}", type="tool_call")
        )
    if not calls:
        raise JsonReplyError("the reply names no tool")
    return calls


def plain_conversation(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The conversation with tool calls and results turned into plain text turns.

    Adjacent human turns are merged: chat templates such as Gemma's insist that
    user and model turns alternate.
    """
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            body = [{"tool": c["name"], "args": c["args"]} for c in message.tool_calls]
            out.append(AIMessage(content=json.dumps(body[0] if len(body) == 1 else body)))
            continue
        if isinstance(message, ToolMessage):
            message = HumanMessage(content=f"Observation from {message.name}:\n{message.text}")
        if isinstance(message, HumanMessage) and out and isinstance(out[-1], HumanMessage):
            out[-1] = HumanMessage(content=f"{out[-1].text}\n\n{message.text}")
        else:
            out.append(message)
    return out
