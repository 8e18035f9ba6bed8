"""Tool steps: a task whose tool and arguments the plan already gives (``Task.call``)
runs with no model call (ReWOO's workers, LLMCompiler's tasks).

In the actor graph such a task is played by the ``react`` node with no model call
(:func:`make_tool_step`): its first step writes the one tool call an actor's reply
would hold, filling in the references to its dependencies' results
(:mod:`aimegraph.state.references`); the actor's own ``tools`` step runs it, so it
takes exactly an actor call's path: the run's tool policy and approval (a human may
edit or reject it), the time limit, the tool's retries, a long output kept whole in
the workspace, tracing. Its second step makes the observation the task's result:
``completed`` with the output as the summary (and the kept file, when there is one,
as the ``output_file`` artifact), ``failed`` with the error. A reference that cannot
be filled in fails the task before any call. A failed step is retried and then
replanned as any failed task. (``react`` plays it, not nodes of its own behind a
conditional edge: LangGraph copies every channel of the state for each such edge,
a cost every actor step would pay.)

Checkpointed, each of these is a step of its own: a completed tool step is a
completed task and never runs again; a run stopped in the middle of one runs only
the call in flight again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from aimegraph.state import ActorState, ProgressUpdate, RoleUsage, TaskResult, Usage
from aimegraph.state.references import UnresolvedReferenceError, resolve_args
from aimegraph.tools.execution import EDITED
from aimegraph.tools.outputs import KEPT_FILE
from aimegraph.tools.progress import settled
from aimegraph.tools.screening import TRIPWIRE

TOOLS = "tools"

ROLE = "tool_step"
"""The role a tool step's call counts under in ``Usage.by_role``."""

OUTPUT_FILE = "output_file"
"""The artifact naming the file a long output was kept in (relative to the workspace)."""

_EDITED_OPENING = EDITED.split("{", 1)[0]


def route_start(otherwise: str) -> Callable[[ActorState], str]:
    """The entry of an actor graph that recalls memories first: ``react`` for a tool
    step (no model to inform), else ``otherwise``."""

    def route(state: ActorState) -> str:
        return "react" if state["task"].call is not None else otherwise

    return route


def make_tool_step(done: str) -> Callable[[ActorState, Runtime[Any]], Command[str]]:
    """A tool step's two steps in the ``react`` node: the call (to ``tools``), then,
    once its observation is in, the settled task (to ``done``)."""

    def tool_step(state: ActorState, runtime: Runtime[Any]) -> Command[str]:
        messages = state.get("messages", [])
        if messages and isinstance(messages[-1], ToolMessage):
            return Command(update=_settle(state, runtime), goto=done)
        return _call(state, runtime, done)

    return tool_step


def _call(state: ActorState, runtime: Runtime[Any], done: str) -> Command[str]:
    """Writes the step's tool call and sends it to ``tools``; a reference that
    cannot be filled in settles the task as failed and goes to ``done``."""
    task = state["task"]
    spec = task.call
    assert spec is not None, "only tool steps are played here"
    try:
        args = resolve_args(spec.args, state.get("dependency_results", {}))
    except UnresolvedReferenceError as exc:
        failed = TaskResult(status="failed", summary=f"tool step {spec.tool}: {exc}")
        return Command(update=settled(state, failed, runtime.stream_writer), goto=done)
    # The id names a long output's file: one per task and attempt.
    tool_call = ToolCall(
        name=spec.tool, args=args, id=f"{task.id}-{max(task.attempts, 1)}", type="tool_call"
    )
    runtime.stream_writer(
        {"type": "actor", "event": "started", "task_id": task.id, "tools": [spec.tool]}
    )
    update = {
        "messages": [AIMessage(content="", tool_calls=[tool_call])],
        "tool_names": [spec.tool],
        "steps": 0,
        "result": None,
        "error": None,
    }
    return Command(update=update, goto=Send(TOOLS, [tool_call]))


def _settle(state: ActorState, runtime: Runtime[Any]) -> dict[str, Any]:
    """The task settled with the step's observation, and the call counted."""
    task = state["task"]
    observation = next(m for m in reversed(state["messages"]) if isinstance(m, ToolMessage))
    text, edit_note = _without_edit_note(observation.text)
    kept = observation.response_metadata.get(KEPT_FILE)
    result = TaskResult(
        status="failed" if observation.status == "error" else "completed",
        summary=text,
        artifacts={OUTPUT_FILE: kept} if kept else {},
        tripwire=observation.response_metadata.get(TRIPWIRE),
    )
    usage = Usage.of_role(ROLE, RoleUsage(tool_calls=1)).for_task(task.id)
    update = settled({**state, "usage": usage}, result, runtime.stream_writer)
    if edit_note:
        edited = ProgressUpdate(task_id=task.id, status="edited", message=edit_note)
        update["updates"] = [edited, *update["updates"]]
    return update | {"usage": usage}


def _without_edit_note(text: str) -> tuple[str, str | None]:
    """The output, and the note that a human edited the call (which the tools step
    puts before it for an actor's model), if there is one."""
    if not text.startswith(_EDITED_OPENING):
        return text, None
    note, _, output = text.partition("\n")
    return output, note
