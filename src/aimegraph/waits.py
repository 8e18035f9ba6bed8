"""Human waits that end: every pause for a human (plan approval, tool approval,
``ask_human``, an escalation) may have a timeout and a default, set per thread in its
``AimeConfig`` (stored with the thread, as its other safety settings are).

The interrupt records its terms, ``timeout_s``, ``default`` and ``deadline`` (epoch
seconds), so whichever process drives the run (``aimegraph run`` / ``resume``, the
dashboard, a distributed worker, a Python program through :func:`await_overdue`)
answers the default once the deadline has passed, unless a human answered first
(a process that waits holding the thread takes the answers posted for it meanwhile:
:func:`await_overdue`'s ``posted``).
One mechanism for every kind: :func:`default_answer` is the only place that knows
how each kind takes its default.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from langgraph.types import Command, Interrupt
from pydantic import BaseModel, Field, field_validator

__all__ = [
    "NO_DEADLINE",
    "WAIT_KINDS",
    "HumanWaitSettings",
    "PostedAnswers",
    "await_overdue",
    "default_answer",
    "overdue_answers",
    "wait_deadline",
    "wait_deadlines",
    "wait_terms",
]

WAIT_KINDS = ("approve_plan", "approve_tool", "ask_human", "escalation")
"""The kinds of interrupt a human answers, each of which may have a deadline."""

ApprovalDefault = Literal["approve", "reject"]


class HumanWaitSettings(BaseModel):
    """The timeouts and defaults of plan approvals, tool approvals and ``ask_human``,
    and who is told that a run waits (part of ``AimeConfig``; escalations have
    ``escalation_timeout_s`` and ``escalation_default``)."""

    approval_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Seconds a human has to answer a plan or tool approval; then the process "
        "driving the run takes approval_default (None: wait for ever).",
    )
    approval_default: ApprovalDefault = Field(
        "reject",
        description="What an unanswered plan or tool approval does: 'approve' or 'reject'.",
    )
    ask_human_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Seconds a human has to answer an actor's ask_human question; then the "
        "actor gets ask_human_default as the answer (None: wait for ever).",
    )
    ask_human_default: str = Field(
        "", description="The answer an unanswered ask_human question gets ('': no answer)."
    )
    notify_webhook: str | None = Field(
        None,
        description="A URL told (HTTP POST, JSON) each time the run pauses for a human: the "
        "kind, thread, deadline, default and a link to the run's dashboard page.",
    )
    dashboard_url: str = Field(
        "http://127.0.0.1:8765",
        description="Where the dashboard serves, for the links in notifications.",
    )

    @field_validator("notify_webhook", "dashboard_url")
    @classmethod
    def _web_address(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// address")
        return url


NO_DEADLINE: Mapping[str, None] = {"timeout_s": None, "default": None, "deadline": None}
"""The terms of a wait with no timeout."""


def wait_terms(timeout_s: float | None, default: Any) -> dict[str, Any]:
    """The keys an interrupt's value records so any front end can end the wait:
    ``timeout_s``, ``default`` and ``deadline`` (all None when it has no timeout)."""
    if timeout_s is None:
        return dict(NO_DEADLINE)
    return {"timeout_s": timeout_s, "default": default, "deadline": time.time() + timeout_s}


def wait_deadline(item: Interrupt) -> float | None:
    """When a human wait takes its default (epoch seconds), if it has a timeout."""
    value = item.value if isinstance(item.value, dict) else {}
    deadline = value.get("deadline") if value.get("kind") in WAIT_KINDS else None
    return float(deadline) if deadline is not None else None


def wait_deadlines(interrupts: Sequence[Interrupt]) -> dict[str, float]:
    """The deadlines of the human waits among ``interrupts`` that have one, by id."""
    return {i.id: d for i in interrupts if (d := wait_deadline(i)) is not None}


def default_answer(value: Mapping[str, Any]) -> Any:
    """The resume value a wait's ``default`` stands for, in the shape its kind reads
    (and the front ends' :func:`aimegraph.answers.answer_for` passes on as it is)."""
    why = f"no answer within {value.get('timeout_s') or 0:g} s"
    default = value.get("default")
    kind = value.get("kind")
    if kind == "approve_tool":
        decision = (
            {"type": "approve"} if default == "approve" else {"type": "reject", "message": why}
        )
        return {"decisions": [decision]}
    if kind == "ask_human":
        return {"answer": str(default or "")}
    return {"action": default, "reason": why, "note": why}  # approve_plan, escalation


def overdue_answers(interrupts: Sequence[Interrupt], now: float | None = None) -> dict[str, Any]:
    """The default answers of the human waits whose deadline has passed, by id."""
    now = time.time() if now is None else now
    return {
        item.id: default_answer(item.value)
        for item in interrupts
        if (deadline := wait_deadline(item)) is not None and deadline <= now
    }


PostedAnswers = Callable[[Collection[str]], Mapping[str, Any] | None]
"""Answers posted for a waiting process, asked with the ids of the waits pending:
resume values for some of them by interrupt id, or None (see
:meth:`aimegraph.checkpoints.ThreadLease.take_answer`)."""


def await_overdue(
    pending: Callable[[], Sequence[Interrupt]],
    *,
    posted: PostedAnswers | None = None,
    poll_s: float = 0.5,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Command[Any] | None:
    """For the process driving an unattended run: wait until the first deadline of
    the human waits ``pending()`` returns (the thread's interrupts, read again every
    ``poll_s``), then the ``Command`` resuming every overdue one with its default;
    or, as soon as ``posted`` (asked every ``poll_s`` too) has answers for waits
    still pending, the ``Command`` resuming with those. None at once when no wait
    has a deadline, and as soon as the one waited for is answered by someone else
    (its interrupt gone)."""
    interrupts = pending()
    deadlines = wait_deadlines(interrupts)
    if not deadlines:
        return None
    first = min(deadlines, key=deadlines.__getitem__)
    while True:
        ids = {i.id for i in interrupts}
        if first not in ids:
            return None
        answers = {k: v for k, v in (posted(ids) or {}).items() if k in ids} if posted else {}
        if answers:
            return Command(resume=answers)
        if (left := deadlines[first] - clock()) <= 0:
            break
        sleep(min(poll_s, left))
        interrupts = pending()
    answers = overdue_answers(interrupts, clock())
    return Command(resume=answers) if answers else None
