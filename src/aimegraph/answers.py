"""A human's answer, as a front end gives it (the CLI, the dashboard, the A2A and MCP
servers), turned into the ``Command(resume=...)`` the interrupt it is meant for takes,
and handed to the process waiting on it when one holds the thread
(:func:`hold_or_hand_over`): one way for every front end, re-exported by
:mod:`aimegraph.steering`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, Interrupt, StateSnapshot

from aimegraph.checkpoints.lease import (
    StaleAnswerError,
    ThreadBusyError,
    ThreadLease,
    hand_answer,
    hold_thread,
)

__all__ = [
    "AnswerError",
    "HandedOver",
    "NoSuchInterruptError",
    "answer_for",
    "hold_or_hand_over",
    "resume_command",
]


class AnswerError(ValueError):
    """A human's answer does not fit the interrupt it is meant for; ``needs`` says
    what would: ``"answer"`` (text), ``"decision"`` (approve or reject) or
    ``"escalation"`` (edit the plan, answer for the task, replan or give up)."""

    def __init__(self, message: str, needs: Literal["answer", "decision", "escalation"]) -> None:
        super().__init__(message)
        self.needs = needs


class NoSuchInterruptError(LookupError):
    """The thread has no pending interrupt with the given id."""


def answer_for(interrupt_value: Any, answer: dict[str, Any]) -> Any:
    """Adapt a front end's answer (``{"action": "approve" | "reject" | "edit", ...}``
    or ``{"answer": text}``) to the interrupt kind: a tool approval gets LangChain's
    HITL decisions (``{"decisions": [...]}``, which it may also be sent as is; an
    edit there carries the call's new ``args``). An interrupt of an agent unit's own
    (no aimegraph ``kind``) gets the answer's text, as its ``interrupt()`` asked."""
    kind = interrupt_value.get("kind") if isinstance(interrupt_value, Mapping) else None
    if kind is None:
        return answer["answer"] if set(answer) == {"answer"} else answer
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


@dataclass(frozen=True)
class HandedOver:
    """An answer handed to the process that holds the thread while it waits on a
    human (:func:`hold_or_hand_over`): it carries the run on."""

    thread_id: str
    holder: str
    """Who took it: ``pid 1234 on host``."""
    interrupt_ids: frozenset[str]
    """The waits it answered."""

    def __str__(self) -> str:
        return f"answer sent to the process running thread {self.thread_id} ({self.holder})"


def hold_or_hand_over(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    state: Callable[[], StateSnapshot],
    answer_inputs: Callable[[StateSnapshot], Any] | None = None,
) -> ThreadLease | HandedOver:
    """The thread's lease, to carry it on here; or, when another process holds it
    while it waits on a human (``state()``, the thread's state, has interrupts) and
    there is an answer, the answer handed to that process, which carries the run on
    (see :func:`aimegraph.checkpoints.lease.hand_answer`). ``answer_inputs`` turns
    the state into the ``Command(resume=...)`` a resume here would run with, raising
    as it would for a direct resume, so an answer that does not fit is refused the
    same way.

    Raises:
        ThreadBusyError: another process holds the thread, and there is no answer or
            nothing waits on one (``AnswerNotTakenError`` when the holder did not
            take it).
        NoSuchInterruptError: the holder dropped the answer: the wait had ended first.
    """
    while True:
        try:
            return hold_thread(saver, thread_id)
        except ThreadBusyError:
            snapshot = state()
            if answer_inputs is None or not snapshot.interrupts:
                raise
            command = answer_inputs(snapshot)
            if not isinstance(command, Command) or not isinstance(command.resume, Mapping):
                raise
            try:
                holder = hand_answer(saver, thread_id, command.resume)
            except StaleAnswerError as exc:
                raise NoSuchInterruptError(str(exc)) from exc
            if holder is not None:
                return HandedOver(thread_id, holder, frozenset(command.resume))
            # The holder let the thread go without taking it: carry it on here.
