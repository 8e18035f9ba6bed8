"""How actors' tool calls are executed: LangGraph's ToolNode plus a guard that
turns every way a tool call can go wrong into an observation for the model.

Where a call runs: under ``invoke`` ToolNode runs a step's calls in its thread
pool and the guard puts each timed call in a daemon thread of its own, and an
async-only tool on the engine's own event loop (:mod:`aimegraph.running.loop`; one per
process, cancelled on timeout and when the run ends); under ``ainvoke`` the async
guard awaits coroutine tools on the event loop (cancelled on timeout) and runs sync
tools in a daemon thread, so the loop never blocks. A sync tool cannot be stopped:
on timeout it is abandoned, still running, and being a daemon thread it does not
keep the process alive. A tool's own time limit (:mod:`aimegraph.tools.policy`)
replaces the node's. Outputs too long for an observation are kept whole in the
workspace (:mod:`aimegraph.tools.outputs`). The tool guardrails screen each call's
arguments before it runs and its output before it is shown or kept
(:mod:`aimegraph.tools.screening`). Instant bookkeeping calls (the actor's
reports) can instead run in the step that got them (:func:`run_in_step`), with the
same checks and observations and no thread."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.prebuilt.tool_node import (
    AsyncToolCallWrapper,
    ToolCallRequest,
    ToolCallWrapper,
    ToolInvocationError,
)
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import ValidationError

from aimegraph.guardrails import Guards
from aimegraph.models.json_tools import tool_args_schema
from aimegraph.prompts import actor as prompts
from aimegraph.running.loop import engine_loop
from aimegraph.running.scope import RunScopeClosedError, current_scope
from aimegraph.state import Span
from aimegraph.tools.outputs import READER, fits, keep_whole
from aimegraph.tools.policy import timeout_of
from aimegraph.tools.screening import CallScreening
from aimegraph.tools.workers import TOOL_WORKERS

log = logging.getLogger(__name__)

ToolOutcome = ToolMessage | Command
Execute = Callable[[ToolCallRequest], ToolOutcome]
AsyncExecute = Callable[[ToolCallRequest], Awaitable[ToolOutcome]]

REPEAT_LIMIT = 3
"""The third identical call (same tool, same arguments) is refused."""


def make_tool_node(
    tools: Sequence[BaseTool],
    *,
    timeout_s: float,
    max_observation_chars: int,
    available: Callable[[Any], Sequence[str]] | None = None,
    before_call: Callable[[ToolCallRequest], ToolCallRequest | ToolMessage] | None = None,
    untimed: Collection[str] = (),
    once_per_reply: Collection[str] = (),
    workspace: Path | None = None,
    wrap: ToolCallWrapper | None = None,
    awrap: AsyncToolCallWrapper | None = None,
    guards: Guards | None = None,
) -> ToolNode:
    """A ToolNode whose failures all come back as error observations.

    ``available`` names the tools the current state's actor was given (default:
    all ``tools``); a call of any other tool is refused. ``before_call`` returns
    the request to run, or the answer that replaces the call (a human's
    rejection); a request with other arguments (a human's edit) runs, and its
    observation says it ran so edited. It runs after the availability and
    repeated-action checks. Tools named in ``untimed`` (instant
    bookkeeping such as ``submit_result``) skip the timeout's worker thread. A
    reply calling a tool named in ``once_per_reply`` (``submit_result``, which
    ends the task) more than once gets its first call run and the others refused.
    ``timeout_s`` is the limit of a call of a tool that has none of its own. An
    output longer than ``max_observation_chars`` is saved whole in ``workspace``
    and shown as head, path and tail (cut to the limit without a workspace).
    ``guards``' tool guardrails screen each call's arguments (after the availability
    and repeated-action checks, before ``before_call``: a human approves the
    redacted call) and its output (before it is cut to the limit).
    ``wrap`` and ``awrap`` (middleware's ``wrap_tool_call`` hooks, composed; ``wrap`` in a
    worker thread under ``ainvoke`` when some hook has no async twin) run around
    each call that passed the checks (an approved one, with its edits), each time they
    call their handler a timed call of its own; they see the tool's exceptions (a retry
    hook retries them) and its whole output, and what they let through is screened,
    cut to the limit and made an observation like any other.
    """
    by_name = {t.name: t for t in tools}
    guards = guards or Guards()

    def names_for(state: Any) -> Sequence[str]:
        return available(state) if available is not None else list(by_name)

    def describe_error(exc: Exception) -> str:
        if isinstance(exc, ToolInvocationError):
            return invalid_arguments(exc.tool_name, by_name.get(exc.tool_name), exc.message)
        if isinstance(exc, ToolException):
            return f"Error: {exc}"
        log.warning("tool raised", exc_info=exc)
        return f"Error: the tool raised {type(exc).__name__}: {str(exc)[:500]}"

    def refused(request: ToolCallRequest) -> ToolMessage | None:
        """The answer to a call that must not run (an unavailable tool, misuse)."""
        call = request.tool_call
        names = names_for(request.state)
        if request.tool is None or call["name"] not in names:
            return _observation(
                call,
                f"Error: tool {call['name']!r} is not available; choose from: {', '.join(names)}.",
            )
        if (why := misuse(request.state, call, once_per_reply=once_per_reply)) is not None:
            return _observation(call, why)
        return None

    def approved(request: ToolCallRequest) -> ToolCallRequest | ToolMessage:
        """The request to run as ``before_call`` left it, or its answer instead."""
        return before_call(request) if before_call is not None else request

    def timed_out(call: ToolCall, limit: float, fate: str) -> ToolMessage:
        return _observation(
            call,
            f"Error: {call['name']} did not finish within {limit:g} s ({fate}); "
            "try a smaller input or another approach.",
        )

    def shown(outcome: ToolOutcome, request: ToolCallRequest) -> ToolOutcome:
        if not isinstance(outcome, ToolMessage):
            return outcome
        can_read = READER in names_for(request.state)
        return keep_whole(
            outcome, limit=max_observation_chars, workspace=workspace, can_read=can_read
        )

    async def ashown(outcome: ToolOutcome, request: ToolCallRequest) -> ToolOutcome:
        if not isinstance(outcome, ToolMessage) or fits(outcome, max_observation_chars):
            return outcome
        # Keeping it writes a file: not on the event loop.
        return await asyncio.to_thread(shown, outcome, request)

    def guard(request: ToolCallRequest, execute: Execute) -> ToolOutcome:
        if (answer := refused(request)) is not None:
            return answer
        screening = CallScreening(guards, request)
        subject = screening.call_subject()
        asked = screening.take_call(guards.screen(subject)) if subject else request
        if isinstance(asked, ToolMessage):
            return screening.finish(asked)
        to_run = approved(asked)
        if isinstance(to_run, ToolMessage):
            return screening.finish(to_run)
        started_at = time.time()
        try:
            if wrap is None:
                outcome = run(to_run, execute)
            else:
                outcome = wrap(to_run, lambda req: run(req, execute))
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - every tool failure is an observation
            outcome = _observation(to_run.tool_call, describe_error(exc))
        if (output := screening.output_subject(outcome)) is not None:
            assert isinstance(outcome, ToolMessage)
            outcome = screening.take_output(outcome, guards.screen(output))
        edited = _noting_edit(shown(outcome, to_run), asked, to_run)
        return screening.finish(_timed(edited, started_at))

    def run(request: ToolCallRequest, execute: Execute) -> ToolOutcome:
        call = request.tool_call
        if call["name"] in untimed:
            return execute(request)
        limit = timeout_of(request.tool, timeout_s)
        if not _runs_sync(request.tool):
            # An async-only tool: awaited on the engine's loop, this thread waiting.
            running = _on_engine_loop(_async_execute(node, request))
            try:
                outcome = running.result(timeout=limit)
            except TimeoutError:
                running.cancel()
                return timed_out(call, limit, "cancelled")
            except CancelledError:
                return _observation(call, RUN_ENDED.format(tool=call["name"]))
            return outcome
        future = _in_daemon_thread(execute, request)
        try:
            return future.result(timeout=limit)
        except TimeoutError:
            return timed_out(call, limit, STILL_RUNNING)

    async def aguard(request: ToolCallRequest, execute: AsyncExecute) -> ToolOutcome:
        if (answer := refused(request)) is not None:
            return answer
        screening = CallScreening(guards, request)
        subject = screening.call_subject()
        asked = screening.take_call(await guards.ascreen(subject)) if subject else request
        if isinstance(asked, ToolMessage):
            return screening.finish(asked)
        to_run = approved(asked)
        if isinstance(to_run, ToolMessage):
            return screening.finish(to_run)
        started_at = time.time()
        try:
            if awrap is not None:
                outcome = await awrap(to_run, lambda req: arun(req, execute))
            elif wrap is not None:  # a hook with no async twin: sync, off the event loop
                sync = _sync_execute(node, to_run)
                outcome = await asyncio.to_thread(wrap, to_run, lambda req: run(req, sync))
            else:
                outcome = await arun(to_run, execute)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - every tool failure is an observation
            outcome = _observation(to_run.tool_call, describe_error(exc))
        if (output := screening.output_subject(outcome)) is not None:
            assert isinstance(outcome, ToolMessage)
            outcome = screening.take_output(outcome, await guards.ascreen(output))
        edited = _noting_edit(await ashown(outcome, to_run), asked, to_run)
        return screening.finish(_timed(edited, started_at))

    async def arun(request: ToolCallRequest, execute: AsyncExecute) -> ToolOutcome:
        call = request.tool_call
        if call["name"] in untimed:
            return await execute(request)
        limit = timeout_of(request.tool, timeout_s)
        try:
            if _runs_async(request.tool):
                outcome = await asyncio.wait_for(execute(request), limit)
            else:
                # ToolNode would run a sync tool in the loop's default executor,
                # whose threads the interpreter joins at exit: a hung tool there
                # would keep the process alive. A daemon thread of our own does not.
                sync = _sync_execute(node, request)
                future = _in_daemon_thread(sync, request)
                outcome = await asyncio.wait_for(asyncio.wrap_future(future), limit)
        except TimeoutError:
            fate = "cancelled" if _runs_async(request.tool) else STILL_RUNNING
            return timed_out(call, limit, fate)
        return outcome

    def describe_invalid(exc: ToolInvocationError) -> str:
        # Only arguments that do not fit are answered inside ToolNode; the guard answers
        # what a tool raises, after the wrappers have seen it.
        return describe_error(exc)

    node = ToolNode(
        tools, handle_tool_errors=describe_invalid, wrap_tool_call=guard, awrap_tool_call=aguard
    )
    return node


def run_in_step(
    message: AIMessage,
    tools: Mapping[str, BaseTool],
    *,
    state: Mapping[str, Any],
    runtime: Runtime[Any],
    once_per_reply: Collection[str] = (),
) -> list[ToolOutcome]:
    """Run ``message``'s tool calls here, in order, as the ``tools`` node would: each
    through its tool's own invocation (schema validation, the ``ToolRuntime`` it
    asks for, the ``Command`` it returns), refused as the node refuses misuse (see
    :func:`misuse`), bad arguments answered with the same observation.

    For instant bookkeeping tools only (the actor's reports): no timeout, and no
    thread, where ToolNode starts one per call (0.5 ms, more than the call). Every
    call must name one of ``tools``.
    """
    outcomes: list[ToolOutcome] = []
    config = get_config()
    for call in message.tool_calls:
        if (why := misuse(state, call, once_per_reply=once_per_reply)) is not None:
            outcomes.append(_observation(call, why))
            continue
        tool = tools[call["name"]]
        tool_runtime = ToolRuntime(
            state=state,
            context=runtime.context,
            config=config,
            stream_writer=runtime.stream_writer,
            tool_call_id=call["id"],
            store=runtime.store,
        )
        args = {**call["args"], "runtime": tool_runtime}
        try:
            outcomes.append(tool.invoke({**call, "args": args}))
        except ValidationError as exc:
            # As ToolNode reports it: the errors of the model's own arguments.
            errors = [e for e in exc.errors() if e["loc"][:1] != ("runtime",)]
            failure = ToolInvocationError(call["name"], exc, call["args"], errors)
            outcomes.append(
                _observation(call, invalid_arguments(call["name"], tool, failure.message))
            )
    return outcomes


def misuse(state: object, call: ToolCall, *, once_per_reply: Collection[str] = ()) -> str | None:
    """Why ``call`` must not run, if it must not: a second call in one reply of a tool
    named in ``once_per_reply``, or the same call repeated ``REPEAT_LIMIT`` times."""
    if call["name"] in once_per_reply and _called_earlier_in_reply(state, call):
        return prompts.SECOND_CALL.format(tool=call["name"])
    repeats = _count_identical_calls(state, call["name"], call["args"])
    if repeats >= REPEAT_LIMIT:
        return prompts.REPEATED_ACTION.format(tool=call["name"], count=repeats - 1)
    return None


def invalid_arguments(name: str, tool: BaseTool | None, problem: str) -> str:
    """The observation for a call whose arguments do not fit its tool's schema."""
    schema = tool_args_schema(tool) if tool else {}
    return (
        f"Error: invalid arguments for {name}: {problem}\n"
        f"Expected arguments (JSON schema): {json.dumps(schema.get('properties', {}))}"
    )


RUN_ENDED = "Error: {tool} was cancelled: the run is ending."
STILL_RUNNING = "it could not be stopped and is still running in the background"


def _runs_async(tool: BaseTool | None) -> bool:
    """Whether the tool has a coroutine of its own (else ``ainvoke`` runs it in a thread)."""
    if tool is None:
        return False
    if hasattr(tool, "coroutine"):  # StructuredTool, Tool: func and/or coroutine
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


def _runs_sync(tool: BaseTool | None) -> bool:
    """Whether ``invoke`` can run the tool (an ``@tool async def`` has no sync body)."""
    return tool is None or getattr(tool, "func", True) is not None


def _sync_execute(node: ToolNode, request: ToolCallRequest) -> Execute:
    # ToolNode hands an async wrapper only its async executor; its sync one
    # (argument injection, validation, error handling) is the same code path
    # the sync wrapper gets, reached here for the call's config.
    config = request.runtime.config

    def execute(req: ToolCallRequest) -> ToolOutcome:
        outcome = node._execute_tool_sync(req, "dict", config)
        if isinstance(outcome, list):  # only for list input, which the actor never uses
            raise TypeError("unexpected list outcome from a tool call")
        return outcome

    return execute


def _async_execute(node: ToolNode, request: ToolCallRequest) -> Coroutine[Any, Any, ToolOutcome]:
    """ToolNode's async executor for one call (what ``ainvoke`` would await), for a
    sync run: the same argument injection, validation and error handling."""
    config = request.runtime.config

    async def execute() -> ToolOutcome:
        outcome = await node._execute_tool_async(request, "dict", config)
        if isinstance(outcome, list):  # only for list input, which the actor never uses
            raise TypeError("unexpected list outcome from a tool call")
        return outcome

    return execute()


def _on_engine_loop(coro: Coroutine[Any, Any, ToolOutcome]) -> Future[ToolOutcome]:
    """Start ``coro`` on the engine loop in the caller's context (the run's config and
    stream writer), as a call of the run's scope when there is one, so that it is
    cancelled when the run ends."""
    context = contextvars.copy_context()
    scope = current_scope()
    if scope is None:
        return engine_loop().submit(coro, context=context)
    try:
        return scope.submit(coro, context)
    except RunScopeClosedError:
        ended: Future[ToolOutcome] = Future()
        ended.cancel()
        return ended


def _in_daemon_thread(execute: Execute, request: ToolCallRequest) -> Future[ToolOutcome]:
    """Run one call in a daemon thread (:mod:`aimegraph.tools.workers`), so that a hung
    tool can neither hang the run nor keep the process alive; the run's context
    (config, stream writer) travels with it via contextvars."""
    future: Future[ToolOutcome] = Future()
    context = contextvars.copy_context()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(context.run(execute, request))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            future.set_exception(exc)

    TOOL_WORKERS.submit(work)
    return future


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


def _called_earlier_in_reply(state: object, call: ToolCall) -> bool:
    """Whether the reply holding ``call`` called the same tool before it."""
    messages = state.get("messages", []) if isinstance(state, dict) else []
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = [c["id"] for c in message.tool_calls]
            if call["id"] in ids:
                earlier = message.tool_calls[: ids.index(call["id"])]
                return any(c["name"] == call["name"] for c in earlier)
    return False


SPAN = "aimegraph_span"
"""The ``response_metadata`` key of a tool call's observation that holds when the
call ran, ``[started_at, ended_at]`` in epoch seconds (see :func:`tool_spans`)."""


def _timed(outcome: ToolOutcome, started_at: float) -> ToolOutcome:
    """``outcome`` with when its call ran (from ``started_at`` to now) in its
    observation's metadata; a ``Command`` (an actor's report) is instant and untimed."""
    if not isinstance(outcome, ToolMessage):
        return outcome
    metadata = {**outcome.response_metadata, SPAN: [started_at, time.time()]}
    return outcome.model_copy(update={"response_metadata": metadata})


def tool_spans(messages: Sequence[AnyMessage], *, since: float | None = None) -> tuple[Span, ...]:
    """The timed tool calls among ``messages`` (observations the ``tools`` step made),
    those started at ``since`` or later when given, oldest first."""
    spans = []
    for message in messages:
        if not isinstance(message, ToolMessage) or SPAN not in message.response_metadata:
            continue
        started_at, ended_at = message.response_metadata[SPAN]
        if since is None or started_at >= since:
            name = message.name or "tool"
            spans.append(Span(name=name, started_at=started_at, ended_at=ended_at))
    return tuple(spans)


def _noting_edit(outcome: ToolOutcome, asked: ToolCallRequest, ran: ToolCallRequest) -> ToolOutcome:
    """``outcome``, its observation saying so when the call ran with other arguments
    than the model gave (a human edited them), so that the model does not assume
    its own call ran or make it again."""
    args = ran.tool_call["args"]
    if args == asked.tool_call["args"] or not isinstance(outcome, ToolMessage):
        return outcome
    note = EDITED.format(tool=ran.tool_call["name"], args=json.dumps(args, default=str))
    return outcome.model_copy(update={"content": f"{note}\n{outcome.text}"})


EDITED = (
    "Note: a human edited this call before it ran; it ran as {tool} with arguments {args}, "
    "not as you wrote it. Do not make your original call again."
)
