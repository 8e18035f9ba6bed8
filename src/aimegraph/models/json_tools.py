"""Tool calling for models without native support (``tool_calling="json"``).

Tools are described in the prompt, the model answers with a JSON object naming
a tool and its arguments, and the reply becomes an ordinary ``AIMessage`` with
``tool_calls`` so that ToolNode runs it like any native call. Before the next
call the conversation is flattened back to plain text turns, since servers
without tool support reject tool-call messages.

Models served without a tool-call parser write their calls into the message
content even when tools are bound natively; :func:`tool_calls_in_text` finds
those, for calls of bound tools only.

Models whose only tool calling is one *forced* function decoded under a grammar
(llama.cpp), and OpenAI-compatible servers that take a JSON schema for the reply, are
asked through :func:`json_step_model`: the reply is constrained to
``{"tool": <a bound tool>, "args": <that tool's arguments>}``, so even a tiny model
writes a call that parses.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Sequence
from typing import Any, cast

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import BaseTool

from aimegraph.models.jsonparse import JsonReplyError, json_values, parse_json_reply
from aimegraph.models.resolve import decodes_forced_calls_by_grammar
from aimegraph.models.server_schema import ServerSchema, constrained

_NAME_KEYS = ("tool", "name", "action", "function", "tool_name")
_ARGS_KEYS = ("args", "arguments", "parameters", "input", "action_input", "tool_input")
# Keys a tool call written as text may carry besides its name and arguments.
_ENVELOPE_KEYS = frozenset({"id", "type", "call_id"})


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


def parse_tool_calls(text: str, tool_names: Collection[str] = ()) -> list[ToolCall]:
    """Tool calls from a JSON-mode reply; raises JsonReplyError saying what to fix.

    The reply may hold several JSON values (a restated example, a draft): the first one
    that calls only tools in ``tool_names`` is taken, else the first object. Unknown tool
    names are let through: running them gives the model an error observation naming the
    tools it has.
    """
    data = parse_json_reply(text, prefer=lambda value: bool(_bound_calls(value, tool_names)))
    calls = [_tool_call(*_call_parts(item)) for item in _call_items(data)]
    if not calls:
        raise JsonReplyError("the reply names no tool")
    return calls


def tool_calls_in_text(text: str, tool_names: Collection[str]) -> list[ToolCall]:
    """Tool calls a model wrote into its message content instead of calling the tools
    (as models served without a tool-call parser do): fenced or not, inside prose, one
    object or a list, in the shapes models use (``{"name", "arguments"}``, ``{"tool",
    "args"}``, ``{"function", "parameters"}``, OpenAI's ``{"type": "function",
    "function": {...}}``).

    Only values made of nothing but calls of tools in ``tool_names`` count, so an answer
    that merely contains JSON data is left alone.
    """
    return [call for value in json_values(text) for call in _bound_calls(value, tool_names)]


def _bound_calls(value: Any, tool_names: Collection[str]) -> list[ToolCall]:
    """``value`` as calls of tools in ``tool_names``, or ``[]`` if any part of it is not
    exactly such a call (no other keys than a name, arguments and an id or type)."""
    items = _call_items(value)
    calls = []
    for item in items:
        if not isinstance(item, dict):
            return []
        inner = item.get("function")
        if isinstance(inner, dict):
            if not set(item) <= _ENVELOPE_KEYS | {"function"}:
                return []
            item = inner
        name_key = next((k for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
        args_key = next((k for k in _ARGS_KEYS if k in item), None)
        if name_key is None or item[name_key] not in tool_names:
            return []
        if not set(item) <= _ENVELOPE_KEYS | {name_key, args_key}:
            return []
        try:
            calls.append(_tool_call(*_call_parts(item)))
        except JsonReplyError:
            return []
    return calls


def _call_items(value: Any) -> list[Any]:
    """The call-shaped items of a value: a list of them, an OpenAI-style message with
    ``tool_calls``, or one object."""
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        return list(value["tool_calls"])
    return list(value) if isinstance(value, list) else [value]


def _call_parts(item: Any) -> tuple[str, Any]:
    """(name, arguments) of one call-shaped item."""
    if not isinstance(item, dict):
        raise JsonReplyError('expected an object like {"tool": "...", "args": {...}}')
    if isinstance(item.get("function"), dict):
        item = item["function"]
    name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
    if not name:
        raise JsonReplyError('the object has no "tool" name')
    return name, next((item[k] for k in _ARGS_KEYS if k in item), {})


def _tool_call(name: str, args: Any) -> ToolCall:
    if isinstance(args, str):
        # OpenAI's shape, and some models, send the arguments as a JSON string.
        args = parse_json_reply(args) if args.strip().startswith("{") else {"input": args}
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise JsonReplyError(f'"args" of {name} must be an object')
    return ToolCall(name=name, args=args, id=f"call_{uuid.uuid4().hex[:12]}", type="tool_call")


STEP_FUNCTION = "tool_call"
"""The name of the one forced function :func:`json_step_model` binds."""


def one_call_schema(tools: Sequence[BaseTool]) -> dict[str, Any]:
    """The JSON schema of one call of one of ``tools``: ``anyOf`` a ``{"tool": <name>,
    "args": <its arguments' schema>}`` object per tool (the shape the JSON-mode prompt
    asks for)."""
    calls = [
        {
            "type": "object",
            "properties": {"tool": {"const": tool.name}, "args": tool_args_schema(tool)},
            "required": ["tool", "args"],
        }
        for tool in tools
    ]
    return {"title": STEP_FUNCTION, "anyOf": calls}


def json_step_model(
    model: BaseChatModel, tools: Sequence[BaseTool], server_schema: ServerSchema = "auto"
) -> Runnable[LanguageModelInput, AIMessage]:
    """What a JSON-mode actor step calls: ``model`` held to :func:`one_call_schema` of
    ``tools`` where it can be.

    A model that decodes a forced function call under a grammar (in-process llama.cpp)
    is forced to call :data:`STEP_FUNCTION`, whose arguments are that one call; the
    forced call comes back as the JSON text of that object, so the step parses it as it
    parses any JSON-mode reply (and usage, finish reason and id are kept). An
    OpenAI-compatible client asks its server for the schema as ``server_schema`` says
    (:mod:`aimegraph.models.server_schema`). Any other model is returned as it is."""
    if not decodes_forced_calls_by_grammar(model):
        return constrained(model, one_call_schema(tools), server_schema)
    function = {
        "type": "function",
        "function": {
            "name": STEP_FUNCTION,
            "description": "The next tool call.",
            "parameters": {"anyOf": one_call_schema(tools)["anyOf"]},
        },
    }
    forced: Any = {"type": "function", "function": {"name": STEP_FUNCTION}}  # ChatLlamaCpp's form
    return model.bind_tools([function], tool_choice=forced) | RunnableLambda(_call_as_text)


def _call_as_text(reply: AIMessage) -> AIMessage:
    """The forced call's arguments as the reply's JSON text (no tool call left on it).

    Arguments that did not parse are kept as they came: a grammar fixes the syntax but
    not the length, so a model looping inside a string until the token limit leaves
    unclosed JSON, and the step must say so (a loop, or JSON that does not parse), not
    report an empty reply."""
    calls = [c["args"] for c in reply.tool_calls if c["name"] == STEP_FUNCTION]
    unparsed = [c.get("args") or "" for c in reply.invalid_tool_calls]
    if calls:
        text = json.dumps(calls[0], ensure_ascii=False)
    else:
        text = unparsed[0] if unparsed and unparsed[0].strip() else reply.text
    return reply.model_copy(update={"content": text, "tool_calls": [], "invalid_tool_calls": []})


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
