"""The two tools every actor has: ``update_progress`` and ``submit_result`` (contract).

They write to the actor's state through ``Command`` updates, so ToolNode
executes them like any other tool and the reducers merge what they report.
``submit_result`` settles the task in the same update (:func:`settled`), so the
step that ran it ends the actor's loop. A reply calling only these two is run in
the actor's react step (``tools.execution.run_in_step``), any other in the tools
step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command, StreamWriter
from pydantic import BaseModel, Field, field_validator

from aimegraph.state import ProgressUpdate, TaskResult, Usage

UPDATE_PROGRESS = "update_progress"
SUBMIT_RESULT = "submit_result"


class UpdateProgressArgs(BaseModel):
    status: str = Field(description="A word or two, e.g. 'working', 'found data', 'blocked'.")
    message: str = Field(description="What was done or found, with key figures.")


class SubmitResultArgs(BaseModel):
    status: Literal["completed", "failed"] = Field(
        description="'completed' when the task is done, 'failed' when it cannot be done."
    )
    summary: str = Field(description="The findings themselves (or why it failed).")
    artifacts: dict[str, str] = Field(
        default_factory=dict, description="Named values or workspace file paths produced."
    )

    @field_validator("artifacts", mode="before")
    @classmethod
    def _stringify(cls, value: object) -> object:
        # Models often send numbers or lists as artifact values; keep them as text.
        if isinstance(value, dict):
            return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}
        return value


@tool(UPDATE_PROGRESS, args_schema=UpdateProgressArgs)
def update_progress(status: str, message: str, runtime: ToolRuntime) -> Command:
    """Report progress on your task (AIME's Update_Progress)."""
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
    summary: str,
    runtime: ToolRuntime,
    artifacts: dict[str, str] | None = None,
) -> Command:
    """Hand back the result of your task. This ends your work on it."""
    result = TaskResult(status=status, summary=summary, artifacts=artifacts or {})
    return Command(
        update={
            **settled(runtime.state, result, runtime.stream_writer),
            "messages": [ToolMessage("Result submitted.", tool_call_id=runtime.tool_call_id)],
        }
    )


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
    return {
        "result": result,
        "tasks": {task.id: task.model_copy(update={"status": result.status, "result": result})},
        "updates": [ProgressUpdate(task_id=task.id, status=result.status, message=result.summary)],
    }


def member_keys(state: Mapping[str, Any]) -> dict[str, Any]:
    """A team member's name and turn, for its stream events."""
    if "member" not in state:
        return {}
    return {"member": state["member"], "turn": state.get("turn", 1)}
