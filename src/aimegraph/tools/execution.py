"""How actors' tool calls are executed: LangGraph's ToolNode plus a guard that
turns every way a tool call can go wrong into an observation for the model."""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolInvocationError
from langgraph.types import Command

from aimegraph.models.json_tools import tool_args_schema
from aimegraph.prompts import actor as prompts

log = logging.getLogger(__name__)

ToolOutcome = ToolMessage | Command
Execute = Callable[[ToolCallRequest], ToolOutcome]

REPEAT_LIMIT = 3
"""The third identical call (same tool, same arguments) is refused."""


def make_tool_node(
    tools: Sequence[BaseTool],
    *,
    timeout_s: float,
    max_observation_chars: int,
    available: Callable[[Any], Sequence[str]] | None = None,
    before_call: Callable[[ToolCallRequest], ToolMessage | None] | None = None,
    untimed: Collection[str] = (),
) -> ToolNode:
    """A ToolNode whose failures all come back as error observations.

    ``available`` names the tools the current state's actor was given (default:
    all ``tools``); a call of any other tool is refused. ``before_call`` may
    answer a call instead of running it (human denial); it runs after the
    availability and repeated-action checks. Tools named in ``untimed`` (instant
    bookkeeping such as ``submit_result``) skip the timeout's worker thread.
    """
    by_name = {t.name: t for t in tools}

    def describe_error(exc: Exception) -> str:
        if isinstance(exc, ToolInvocationError):
            tool = by_name.get(exc.tool_name)
            schema = tool_args_schema(tool) if tool else {}
            return (
                f"Error: invalid arguments for {exc.tool_name}: {exc.message}\n"
                f"Expected arguments (JSON schema): {json.dumps(schema.get('properties', {}))}"
            )
        if isinstance(exc, ToolException):
            return f"Error: {exc}"
        log.warning("tool raised", exc_info=exc)
        return f"Error: the tool raised {type(exc).__name__}: {str(exc)[:500]}"

    def guard(request: ToolCallRequest, execute: Execute) -> ToolOutcome:
        call = request.tool_call
        names = available(request.state) if available is not None else list(by_name)
        if request.tool is None or call["name"] not in names:
            return _observation(
                call,
                f"Error: tool {call['name']!r} is not available; choose from: {', '.join(names)}.",
            )
        repeats = _count_identical_calls(request.state, call["name"], call["args"])
        if repeats >= REPEAT_LIMIT:
            return _observation(
                call, prompts.REPEATED_ACTION.format(tool=call["name"], count=repeats - 1)
            )
        if before_call is not None and (answer := before_call(request)) is not None:
            return answer
        if call["name"] in untimed:
            return execute(request)
        outcome = _run_with_timeout(execute, request, timeout_s)
        if outcome is None:
            return _observation(
                call,
                f"Error: {call['name']} did not finish within {timeout_s:g} s; "
                "try a smaller input or another approach.",
            )
        return _truncate(outcome, max_observation_chars)

    return ToolNode(tools, handle_tool_errors=describe_error, wrap_tool_call=guard)


def _observation(call: ToolCall, content: str) -> ToolMessage:
    return ToolMessage(content=content, name=call["name"], tool_call_id=call["id"], status="error")


def _count_identical_calls(state: object, name: str, args: object) -> int:
    """How many AI messages so far asked for exactly this call (this one included)."""
    messages = state.get("messages", []) if isinstance(state, dict) else []
    return sum(
        1
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["name"] == name and c["args"] == args
    )


def _run_with_timeout(
    execute: Execute, request: ToolCallRequest, timeout_s: float
) -> ToolOutcome | None:
    # A worker thread, so that a hung tool cannot hang the run; the run's
    # context (config, stream writer) travels with it via contextvars.
    context = contextvars.copy_context()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aimegraph-tool")
    future = pool.submit(context.run, execute, request)
    try:
        return future.result(timeout=timeout_s)
    except FutureTimeout:
        return None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _truncate(outcome: ToolOutcome, limit: int) -> ToolOutcome:
    if not isinstance(outcome, ToolMessage) or not isinstance(outcome.content, str):
        return outcome
    text = outcome.content
    if len(text) <= limit:
        return outcome
    note = f"\n[... output truncated: showing {limit} of {len(text)} characters]"
    return outcome.model_copy(update={"content": text[:limit] + note})
