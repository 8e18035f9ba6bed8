"""The two tools every actor has: ``update_progress`` and ``submit_result`` (contract).

They write to the actor's state through ``Command`` updates, so ToolNode
executes them like any other tool and the reducers merge what they report.
``submit_result`` settles the task in the same update (:func:`settled`), so the
step that ran it ends the actor's loop. A reply calling only these two is run in
the actor's react step (``tools.execution.run_in_step``), any other in the tools
step.

An actor ends its task in the reply that does its last work: ``submit_result``
may go beside work calls. It then runs after them (the actor's next react step,
with no model call), and as the model wrote it before seeing their outputs, the
result carries those outputs: the summary, if any, then each output. An empty
summary hands back the outputs of the newest reply that did work. A submission
beside a call that failed (an error observation) is refused, so that the model
sees the failure before anything settles.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command, StreamWriter
from pydantic import BaseModel, Field, field_validator

from aimegraph.state import ProgressUpdate, TaskResult, Usage
from aimegraph.tools.execution import tool_spans

UPDATE_PROGRESS = "update_progress"
SUBMIT_RESULT = "submit_result"


REPORT_NAMES = frozenset({UPDATE_PROGRESS, SUBMIT_RESULT})
"""The actor's reports to the engine; any other call is work."""


# The schemas ride on every actor call: their texts say only what the names do not.
class UpdateProgressArgs(BaseModel):
    status: str = Field(description="e.g. working, blocked")
    message: str


class SubmitResultArgs(BaseModel):
    status: Literal["completed", "failed"]
    summary: str = Field(
        default="",
        description="Findings with figures, or why it failed. Empty: your last tool "
        "output is the result.",
    )
    artifacts: dict[str, str] = Field(default_factory=dict, description="Values or file paths")

    @field_validator("artifacts", mode="before")
    @classmethod
    def _stringify(cls, value: object) -> object:
        # Models often send numbers or lists as artifact values; keep them as text.
        if isinstance(value, dict):
            return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}
        return value


@tool(UPDATE_PROGRESS, args_schema=UpdateProgressArgs)
def update_progress(status: str, message: str, runtime: ToolRuntime) -> Command:
    """Report progress on your task."""
    task_id = runtime.state["task"].id
    runtime.stream_writer(
        {"type": "progress", "task_id": task_id, "status": status, "message": message}
    )
    return Command(
        update={
            "updates": [ProgressUpdate(task_id=task_id, status=status, message=message)],
            "messages": [ToolMessage("Progress recorded.", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool(SUBMIT_RESULT, args_schema=SubmitResultArgs)
def submit_result(
    status: Literal["completed", "failed"],
    runtime: ToolRuntime,
    summary: str = "",
    artifacts: dict[str, str] | None = None,
) -> Command:
    """End your task; may go beside your last work call."""
    messages: Sequence[AnyMessage] = runtime.state.get("messages", [])
    beside = _work_outputs(messages, runtime.tool_call_id)
    failed = [o for o in beside if o.status == "error"]
    outputs = beside or ([] if summary else _work_outputs(messages, None))
    if failed or not (summary or outputs):
        why = (
            f"{failed[0].name or 'a call'} beside it failed; see its output, then submit again"
            if failed
            else "the summary is empty and there is no tool output to hand back"
        )
        return Command(update={"messages": [_refusal(why, runtime.tool_call_id)]})
    full = "\n\n".join([*([summary] if summary else []), *(o.text.strip() for o in outputs)])
    result = TaskResult(status=status, summary=full, artifacts=artifacts or {})
    return Command(
        update={
            **settled(runtime.state, result, runtime.stream_writer),
            "messages": [ToolMessage("Result submitted.", tool_call_id=runtime.tool_call_id)],
        }
    )


def _work_outputs(messages: Sequence[AnyMessage], call_id: str | None) -> list[ToolMessage]:
    """The observations of the work calls of the reply holding call ``call_id``; with
    ``None``, of the newest reply that did work."""
    for index in range(len(messages) - 1, -1, -1):
        reply = messages[index]
        if not isinstance(reply, AIMessage):
            continue
        ids = {c["id"] for c in reply.tool_calls}
        if call_id is not None and call_id not in ids:
            continue
        work = {c["id"] for c in reply.tool_calls if c["name"] not in REPORT_NAMES}
        if work or call_id is not None:
            later = messages[index + 1 :]
            return [m for m in later if isinstance(m, ToolMessage) and m.tool_call_id in work]
    return []


def _refusal(why: str, call_id: str | None) -> ToolMessage:
    text = f"Not submitted: {why}."
    return ToolMessage(text, name=SUBMIT_RESULT, tool_call_id=call_id, status="error")


def settled(state: Mapping[str, Any], result: TaskResult, writer: StreamWriter) -> dict[str, Any]:
    """The update that settles the actor's task with ``result``: the result, the task
    with it (for the parent's task map) and a progress record; streamed as the
    actor's ``completed`` or ``failed`` event, with the attempt's ``usage`` so far."""
    task = state["task"]
    writer(
        {
            "type": "actor",
            "event": result.status,
            "task_id": task.id,
            "summary": result.summary,
            "usage": state.get("usage") or Usage(),
            **member_keys(state),
        }
    )
    ended = {
        "status": result.status,
        "result": result,
        "ended_at": time.time(),
        "tool_spans": tool_spans(state.get("messages") or [], since=task.started_at),
    }
    return {
        "result": result,
        "tasks": {task.id: task.model_copy(update=ended)},
        "updates": [ProgressUpdate(task_id=task.id, status=result.status, message=result.summary)],
    }


def member_keys(state: Mapping[str, Any]) -> dict[str, Any]:
    """A team member's name and turn, for its stream events."""
    if "member" not in state:
        return {}
    return {"member": state["member"], "turn": state.get("turn", 1)}
