"""Starting and answering runs the same way from every front end (the CLI, the
dashboard): one graph per stored run settings, one demo set-up, and one
translation of a human's answer into ``Command(resume=...)``, so that a run
paused in one front end can be answered in another."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from langgraph.types import Command, Interrupt

from aimegraph.checkpoints import RunSettings
from aimegraph.config import AimeConfig
from aimegraph.graphs.aime import AimeGraph, build_aime_graph
from aimegraph.knowledge import KnowledgeBase
from aimegraph.nodes.notes import Note, post_note
from aimegraph.tools.registry import (
    ToolLike,
    ToolRegistry,
    ToolRegistryError,
    default_registry,
    import_tools,
)

DEMO_SCENARIO = "scripted:demo"
ANSWER_KEYS = ("action", "reason", "answer", "plan", "args", "decisions", "task_id", "note")
"""The keys of a front end's answer (see :func:`answer_for`)."""
WORKSPACES = Path(".aimegraph/workspace")


class AnswerError(ValueError):
    """A human's answer does not fit the interrupt it is meant for; ``needs`` says
    what would: ``"answer"`` (text), ``"decision"`` (approve or reject) or
    ``"escalation"`` (edit the plan, answer for the task, replan or give up)."""

    def __init__(self, message: str, needs: Literal["answer", "decision", "escalation"]) -> None:
        super().__init__(message)
        self.needs = needs


class NoSuchInterruptError(LookupError):
    """The thread has no pending interrupt with the given id."""


def run_knowledge(settings: RunSettings) -> KnowledgeBase | None:
    """The knowledge base the run's settings name, loaded (None when they name none)."""
    return None if settings.knowledge is None else KnowledgeBase.load(settings.knowledge)


def run_tools(settings: RunSettings, knowledge: KnowledgeBase | None = None) -> ToolRegistry:
    """The run's tool registry: the built-in bundles (with the web bundle when its
    config sets ``web``, and the knowledge bundle over ``knowledge``, by default
    the knowledge base its settings name) plus the ``module:attr`` tools its
    settings name (in the ``custom`` bundle), or the one ToolRegistry they name."""
    extra: list[ToolLike] = []
    for spec in settings.tools:
        tools = import_tools(spec)
        if isinstance(tools, ToolRegistry):
            if len(settings.tools) > 1:
                raise ToolRegistryError(f"{spec!r} is a whole ToolRegistry: give it alone")
            return tools
        extra += tools
    if knowledge is None:
        knowledge = run_knowledge(settings)
    return default_registry(
        settings.config.workspace, knowledge=knowledge, web=settings.config.web, extra_tools=extra
    )


def run_graph(
    settings: RunSettings, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> AimeGraph:
    """The graph a run was (or will be) started with, over ``saver`` (and the memory
    ``store``: a thread started with one must be resumed with one, the graph has
    its memory nodes only then), with the run's prompts (``settings.prompts``),
    agent units (``settings.agents``) and knowledge base (``settings.knowledge``)."""
    knowledge = run_knowledge(settings)
    agents = None
    if settings.agents:
        from aimegraph.teams import load_agents  # wave 2: only when the run has units

        agents = load_agents(settings.agents)
    return build_aime_graph(
        settings.model,
        tools=run_tools(settings, knowledge),
        config=settings.config,
        knowledge=knowledge,
        checkpointer=saver,
        store=store,
        prompts=settings.prompts,
        agents=agents,
    )


def prepare_demo(thread_id: str, **config: Any) -> tuple[RunSettings, str]:
    """The demo's settings and goal; its workspace gets a fresh copy of the demo data.
    ``config`` sets other ``AimeConfig`` fields (e.g. ``approve_plan=True``)."""
    from aimegraph.models.scripted import load_scenario

    workspace = WORKSPACES / thread_id
    workspace.mkdir(parents=True, exist_ok=True)
    data = resources.files("aimegraph.demo") / "data"
    for item in data.iterdir():
        if item.is_file():
            shutil.copyfile(str(item), workspace / item.name)
    settings = RunSettings(model=DEMO_SCENARIO, config=AimeConfig(workspace=workspace, **config))
    goal = load_scenario(DEMO_SCENARIO.removeprefix("scripted:")).goal.strip()
    return settings, goal


def answer_for(interrupt_value: dict[str, Any], answer: dict[str, Any]) -> Any:
    """Adapt a front end's answer (``{"action": "approve" | "reject" | "edit", ...}``
    or ``{"answer": text}``) to the interrupt kind: a tool approval gets LangChain's
    HITL decisions (``{"decisions": [...]}``, which it may also be sent as is; an
    edit there carries the call's new ``args``)."""
    kind = interrupt_value.get("kind")
    if kind == "ask_human" and "answer" not in answer:
        raise AnswerError("this interrupt asks a question", needs="answer")
    if kind == "approve_tool" and "decisions" in answer:
        return answer
    if kind in ("approve_plan", "approve_tool") and "action" not in answer:
        # A bare {"answer": ...} would read as an approval: refuse it instead.
        raise AnswerError(f"this interrupt ({kind}) needs a decision", needs="decision")
    if kind == "approve_tool":
        return {"decisions": [_tool_decision(str(interrupt_value.get("tool")), answer)]}
    if kind == "escalation":
        return _escalation_answer(answer)
    return answer


def _escalation_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """A front end's answer to an escalation: ``{"answer": text, "task_id": ...}``
    answers for the failed task, a rejection gives up."""
    action = answer.get("action")
    if action is None and "answer" in answer:
        return {"action": "answer", "answer": answer["answer"], "task_id": answer.get("task_id")}
    if action in ("reject", "deny"):
        return {**answer, "action": "give_up"}
    if action == "approve" or action is None:
        raise AnswerError(
            "an escalation is answered by editing the plan, answering for the failed task, "
            "a replan or giving up",
            needs="escalation",
        )
    return answer


def _tool_decision(tool: str, answer: dict[str, Any]) -> dict[str, Any]:
    action = answer.get("action")
    if action == "edit":
        if not isinstance(answer.get("args"), dict):
            raise AnswerError(
                "a tool call is edited with its new arguments (args), not a plan",
                needs="decision",
            )
        return {"type": "edit", "edited_action": {"name": tool, "args": answer["args"]}}
    if action in ("reject", "deny"):
        return {"type": "reject", "message": answer.get("reason") or "no reason given"}
    return {"type": str(action)}


def resume_command(
    interrupts: Sequence[Interrupt], answer: dict[str, Any], interrupt_id: str | None = None
) -> Command[Any]:
    """``Command(resume={id: value})`` answering ``interrupt_id``, or every pending
    interrupt when it is None (each adapted with :func:`answer_for`)."""
    chosen = [i for i in interrupts if interrupt_id in (None, i.id)]
    if not chosen:
        raise NoSuchInterruptError(f"no pending interrupt {interrupt_id!r}")
    return Command(resume={i.id: answer_for(i.value, answer) for i in chosen})


def escalation_deadline(item: Interrupt) -> float | None:
    """When an escalation waiting for a human takes its default (epoch seconds), if it
    has a timeout (``AimeConfig.escalation_timeout_s``)."""
    value = item.value if isinstance(item.value, dict) else {}
    deadline = value.get("deadline") if value.get("kind") == "escalation" else None
    return float(deadline) if deadline is not None else None


def overdue_answers(interrupts: Sequence[Interrupt], now: float | None = None) -> dict[str, Any]:
    """The default answers (``AimeConfig.escalation_default``) of the escalations whose
    deadline has passed, by interrupt id."""
    now = time.time() if now is None else now
    answers = {}
    for item in interrupts:
        deadline = escalation_deadline(item)
        if deadline is not None and deadline <= now:
            why = f"no answer within {item.value.get('timeout_s', 0):g} s"
            answers[item.id] = {"action": item.value.get("default"), "reason": why, "note": why}
    return answers


def await_overdue(
    pending: Callable[[], Sequence[Interrupt]],
    *,
    poll_s: float = 0.5,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Command[Any] | None:
    """For the process driving an unattended run: wait until the first deadline of
    the escalations ``pending()`` returns (the thread's interrupts, read again every
    ``poll_s``), then the ``Command`` resuming every overdue one with its default.
    None at once when no escalation has a deadline, and as soon as the one waited
    for is answered by someone else (its interrupt gone)."""
    deadlines = {i.id: d for i in pending() if (d := escalation_deadline(i)) is not None}
    if not deadlines:
        return None
    first = min(deadlines, key=deadlines.__getitem__)
    while (left := deadlines[first] - clock()) > 0:
        sleep(min(poll_s, left))
        if first not in {i.id for i in pending()}:
            return None
    answers = overdue_answers(pending(), clock())
    return Command(resume=answers) if answers else None


def send_note(store: BaseStore | None, thread_id: str, text: str) -> Note:
    """Send a human's note to the thread's run while it runs: each running actor gets
    it at its next step, as a message in its loop, and the planner at its next call
    (see :mod:`aimegraph.nodes.notes`). ``store`` is the one the run's graph was
    built with (the CLI's and the dashboard's, beside the checkpoints).

    Raises:
        ValueError: no store, or an empty note.
    """
    if store is None:
        raise ValueError(
            "notes reach a running run through its store: build the graph with "
            "store=... (aimegraph.memory.open_store; the CLI and the dashboard have one)"
        )
    return post_note(store, thread_id, text)
