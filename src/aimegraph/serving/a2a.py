"""aimegraph as an A2A agent (``aimegraph a2a serve``), on ``a2a-sdk``'s server.

One A2A task is one aimegraph thread (``a2a-<task id>``). The task's first message
is the goal (its metadata's ``config`` may set the fields of
:data:`aimegraph.serving.runs.CALLER_FIELDS`); the run's progress list streams as
``working`` status updates; a run that waits for a human makes the task
``input-required``, its interrupts as a data part; the next message on the task
answers them and the run carries on. Run statuses map to task states:

=================================  =================================================
aimegraph                          A2A task state
=================================  =================================================
running                            working (text: the progress checklist)
paused (approval, ask_human,       input-required (data: ``{"interrupts": [...]}``)
escalation)
succeeded                          completed (artifact ``answer``: the final answer)
failed, budget_exhausted,          failed (text: the reason)
stopped, error
rejected, blocked                  rejected (text: the reason)
cancelled                          canceled
=================================  =================================================

An answer is a data part (``{"action": "approve" | "reject" | "edit", ...}``,
``{"answer": text}``, LangChain's ``{"decisions": [...]}``, as
:func:`aimegraph.answers.answer_for` takes them, with an optional
``interrupt_id``) or text: ``approve`` / ``reject <reason>`` for an approval, the
answer itself for a question or an escalation. Cancelling the task cancels the
run (:func:`aimegraph.steering.cancel_run`).
"""

from __future__ import annotations

import asyncio
import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_CURRENT,
    TransportProtocol,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.middleware import Middleware

from aimegraph.checkpoints import ThreadNotFoundError
from aimegraph.dashboard.runs import NothingToResumeError
from aimegraph.serving.runs import CALLER_ERRORS, PAUSED, RunView, ServedRuns
from aimegraph.serving.security import BearerTokenMiddleware
from aimegraph.steering import DEMO_SCENARIO

__all__ = ["AimeAgentExecutor", "agent_card", "create_a2a_app", "thread_of"]

RPC_PATH = "/"
DECISION_KINDS = ("approve_plan", "approve_tool")
APPROVALS = ("approve", "approved", "yes", "ok")
REJECTIONS = ("reject", "rejected", "no", "deny")

FINAL_STATES = {
    "failed": TaskState.TASK_STATE_FAILED,
    "budget_exhausted": TaskState.TASK_STATE_FAILED,
    "stopped": TaskState.TASK_STATE_FAILED,
    "error": TaskState.TASK_STATE_FAILED,
    "rejected": TaskState.TASK_STATE_REJECTED,
    "blocked": TaskState.TASK_STATE_REJECTED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
}


def thread_of(task_id: str) -> str:
    """The aimegraph thread an A2A task runs on."""
    return f"a2a-{task_id}"


class AimeAgentExecutor(AgentExecutor):
    """Runs each A2A task as an aimegraph thread (see the module's docstring)."""

    def __init__(self, runs: ServedRuns) -> None:
        self.runs = runs
        self._cancelled: set[str] = set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        thread_id = thread_of(task_id)
        message = context.message or Message()
        if context.current_task is None:
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=[message])
            )
        since = await asyncio.to_thread(self.runs.head, thread_id)
        try:
            if context.current_task is None:
                config = _metadata_config(MessageToDict(message.metadata))
                await asyncio.to_thread(
                    self.runs.start, get_message_text(message), thread_id, config
                )
            else:
                await self._answer(thread_id, message)
        except CALLER_ERRORS as exc:
            await self._refuse(updater, thread_id, str(exc))
            return
        await updater.start_work()

        async def progress(view: RunView) -> None:
            await updater.start_work(updater.new_agent_message([new_text_part(view.checklist)]))

        view = await self.runs.follow(thread_id, progress, since=since)
        if task_id not in self._cancelled:  # else cancel() reports the end
            await _report(updater, view)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = str(context.task_id)
        self._cancelled.add(task_id)
        updater = TaskUpdater(event_queue, task_id, str(context.context_id))
        try:
            view = await asyncio.to_thread(self.runs.cancel, thread_of(task_id))
        except (NothingToResumeError, ThreadNotFoundError) as exc:
            await updater.cancel(updater.new_agent_message([new_text_part(str(exc))]))
            return
        await updater.cancel(updater.new_agent_message([new_text_part(view.reason or "")]))

    async def _answer(self, thread_id: str, message: Message) -> None:
        view = await asyncio.to_thread(self.runs.view, thread_id)
        answer = answer_of(message, view)
        interrupt_id = answer.pop("interrupt_id", None)
        await asyncio.to_thread(self.runs.answer, thread_id, answer, interrupt_id)

    async def _refuse(self, updater: TaskUpdater, thread_id: str, why: str) -> None:
        """A message that could not start or answer the run: a paused run asks
        again, saying why; anything else fails the task with the reason."""
        try:
            view = await asyncio.to_thread(self.runs.view, thread_id)
        except ThreadNotFoundError:
            await updater.failed(updater.new_agent_message([new_text_part(why)]))
            return
        if view.status == PAUSED:
            await _ask(updater, view, why)
        else:
            await _report(updater, view)


async def _report(updater: TaskUpdater, view: RunView) -> None:
    """The task's state for a run that has paused or ended."""
    if view.status == PAUSED:
        await _ask(updater, view)
    elif view.status == "succeeded":
        await updater.add_artifact([new_text_part(view.final_answer or "")], name="answer")
        await updater.complete()
    else:
        state = FINAL_STATES.get(view.status, TaskState.TASK_STATE_FAILED)
        text = f"{view.status}: {view.reason}" if view.reason else view.status
        await updater.update_status(state, updater.new_agent_message([new_text_part(text)]))


async def _ask(updater: TaskUpdater, view: RunView, error: str | None = None) -> None:
    """``input-required``: what the run waits for, as text and as data."""
    kinds = ", ".join(str(i.get("kind")) for i in view.interrupts)
    text = f"the run waits for a human ({kinds})" + (f": {error}" if error else "")
    data = {"thread_id": view.thread_id, "interrupts": view.interrupts, "error": error}
    parts = [new_text_part(text), new_data_part(json.loads(json.dumps(data, default=str)))]
    await updater.requires_input(updater.new_agent_message(parts))


def answer_of(message: Message, view: RunView) -> dict[str, Any]:
    """A caller's answer to the paused run ``view``: the message's first data part
    that is an object, else its text read for the interrupts waiting."""
    for data in get_data_parts(message.parts):
        if isinstance(data, dict):
            return dict(data)
    text = get_message_text(message).strip()
    if not text:
        raise ValueError("send an answer: text or a data part")
    if view.interrupts and all(i.get("kind") in DECISION_KINDS for i in view.interrupts):
        word, _, rest = text.partition(" ")
        if word.lower().strip(".!:,") in APPROVALS:
            return {"action": "approve"}
        if word.lower().strip(".!:,") in REJECTIONS:
            return {"action": "reject", "reason": rest.strip() or "no reason given"}
        raise ValueError("this run waits for a decision: answer approve or reject <reason>")
    return {"answer": text}


def _metadata_config(metadata: dict[str, Any]) -> dict[str, Any] | None:
    config = metadata.get("config")
    if config is not None and not isinstance(config, dict):
        raise ValueError("the message's metadata config must be an object of AimeConfig fields")
    return config


def agent_card(url: str, *, model: str, token: bool = False) -> AgentCard:
    """The card ``aimegraph a2a serve`` publishes at ``url``: one skill, runs to a
    goal, streaming; a bearer token when the server has one."""
    try:
        release = version("aimegraph")
    except PackageNotFoundError:  # run from a source tree
        release = "0"
    card = AgentCard(
        name="aimegraph",
        description=(
            "A multi-agent workflow engine: plans a goal as a task DAG, runs the tasks with "
            f"tool-using agents and verifies the answer (model: {model}). It asks for input "
            "when a plan, a tool call or a failed task needs a human."
        ),
        version=release,
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="run_goal",
                name="Run a goal",
                description="Plan, run and verify a goal; answer its questions when asked.",
                tags=["planning", "multi-agent", "workflow"],
                examples=[_demo_goal()] if model == DEMO_SCENARIO else [],
            )
        ],
    )
    if token:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    return card


def _demo_goal() -> str:
    """The one goal the offline demo model plays."""
    from aimegraph.models.offline.scripted import load_scenario

    return load_scenario(DEMO_SCENARIO.removeprefix("scripted:")).goal.strip()


def create_a2a_app(runs: ServedRuns, url: str, token: str | None = None) -> Starlette:
    """The A2A server's ASGI app: the agent card (public) and the JSON-RPC
    endpoint (behind ``token`` when given) over ``runs``."""
    card = agent_card(url, model=runs.model, token=token is not None)
    handler = DefaultRequestHandler(
        agent_executor=AimeAgentExecutor(runs), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [
        *create_agent_card_routes(card, card_url=AGENT_CARD_WELL_KNOWN_PATH),
        *create_jsonrpc_routes(handler, rpc_url=RPC_PATH),
    ]
    public = (AGENT_CARD_WELL_KNOWN_PATH,)
    middleware = [Middleware(BearerTokenMiddleware, token=token, public=public)] if token else []
    return Starlette(routes=routes, middleware=middleware)
