"""Agent units backed by an A2A agent (``AgentUnit(agent="http://...")``, the base URL
its agent card is published under), through ``a2a-sdk``'s client (the ``a2a`` extra).

The unit's task is one A2A task in a context whose id is derived from the run's
thread, the task, its attempt and the member's turn: a resumed run finds that task
(``ListTasks`` by context) and follows it on, never sending the work twice. An
``input-required`` task waits for a human as ``ask_human`` does; the answer is the
next message on the task, sent only while the task still waits on the question it
answers (a resume after the answer went out follows the task instead).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.types import interrupt

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import Task

INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
COMPLETED = "TASK_STATE_COMPLETED"
POLL_S = 0.5
"""How often a task found still working (after a resume) is looked at again."""


@dataclass(frozen=True)
class A2AState:
    """Where the unit's A2A task stands: its ids, its state's name and text."""

    task_id: str
    context_id: str
    state: str
    text: str
    data: tuple[Any, ...] = ()
    asked: str = ""
    """The status message the task waits on, when it waits for input: which
    question an answer is for."""


def exchange(
    url: str, context_id: str, text: str, answer: str | None, waiting: A2AState | None
) -> A2AState:
    """Send ``answer`` on the task ``waiting`` asked it on; or, without one, follow
    the task of ``context_id``, sending ``text`` to start it when the context has
    none. Returns once the task waits for input or has ended."""
    return asyncio.run(_exchange(url, context_id, text, answer, waiting))


async def _exchange(
    url: str, context_id: str, text: str, answer: str | None, waiting: A2AState | None
) -> A2AState:
    from a2a.client import ClientConfig, create_client
    from a2a.types import GetTaskRequest, ListTasksRequest

    client = await create_client(url, ClientConfig(streaming=False))
    async with client:
        if answer is not None and waiting is not None:
            task = await client.get_task(GetTaskRequest(id=waiting.task_id))
            # A resume after the answer went out (a crash before the run's checkpoint)
            # finds the task gone on, or waiting on another question: it follows
            # the task, and the answer is not sent twice.
            now = _state(task)
            # (A state checkpointed before questions were named has ``asked`` empty.)
            if now.state == INPUT_REQUIRED and waiting.asked in ("", now.asked):
                task = await _send(client, answer, context_id, waiting.task_id)
            return _state(await _settled(client, task))
        found = (await client.list_tasks(ListTasksRequest(context_id=context_id))).tasks
        # The context is the unit's own: it holds this attempt's one task.
        task = found[0] if found else await _send(client, text, context_id, None)
        return _state(await _settled(client, task))


async def _send(client: Client, text: str, context_id: str, task_id: str | None) -> Task:
    from a2a.helpers import new_text_message
    from a2a.types import Role, SendMessageRequest

    message = new_text_message(text, role=Role.ROLE_USER)
    message.context_id = context_id
    if task_id is not None:
        message.task_id = task_id
    async for response in client.send_message(SendMessageRequest(message=message)):
        if response.HasField("task"):
            return response.task
    raise RuntimeError("the A2A agent answered without a task")


async def _settled(client: Client, task: Task) -> Task:
    """``task`` once it waits for input or has ended."""
    from a2a.types import GetTaskRequest, TaskState

    while task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING):
        await asyncio.sleep(POLL_S)
        task = await client.get_task(GetTaskRequest(id=task.id))
    return task


def _state(task: Task) -> A2AState:
    from a2a.helpers import get_artifact_text, get_data_parts, get_message_text
    from a2a.types import TaskState

    message = task.status.message
    text = get_message_text(message) if message.parts else ""
    if task.status.state == TaskState.TASK_STATE_COMPLETED and task.artifacts:
        text = "\n".join(get_artifact_text(artifact) for artifact in task.artifacts)
    asked = ""
    if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        # The message's id names the question; its timestamp stands in without one.
        asked = message.message_id or task.status.timestamp.ToJsonString()
    return A2AState(
        task_id=task.id,
        context_id=task.context_id,
        state=TaskState.Name(task.status.state),
        text=text.strip(),
        data=tuple(get_data_parts(message.parts)),
        asked=asked,
    )


def ask_human(unit: str, waiting: A2AState) -> str:
    """The human's answer to the A2A agent's ``input-required`` (asked with
    ``interrupt()``, as the ``ask_human`` tool asks)."""
    answer = interrupt(
        {"kind": "ask_human", "question": waiting.text, "unit": unit, "data": list(waiting.data)}
    )
    return str(answer.get("answer", "")) if isinstance(answer, dict) else str(answer)
