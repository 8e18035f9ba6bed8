"""What the CLI says of a run waiting on a human: what it waits for, until when and
what it then takes, and the ``aimegraph resume`` commands that answer it (they reach
the waiting process too: see :func:`aimegraph.answers.hold_or_hand_over`)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.types import Interrupt

from aimegraph.notify import wait_summary
from aimegraph.state.timing import duration_text, local_time
from aimegraph.waits import WAIT_KINDS

__all__ = ["deadline_line", "resume_hint", "wait_lines"]

ANSWER_FLAGS: Mapping[str, tuple[str, ...]] = {
    "approve_plan": ("--approve", "--reject REASON", "--plan-file JSON"),
    "approve_tool": ("--approve", "--reject REASON", "--edit-args JSON"),
    "ask_human": ("--answer TEXT",),
    "escalation": (
        "--answer TEXT --task {task}",
        "--plan-file JSON",
        "--replan",
        "--reject REASON",
    ),
}
"""The ``aimegraph resume`` flags answering each kind of wait, the usual one first."""
OWN_INTERRUPT = ("--answer TEXT",)
"""An agent unit's own ``interrupt()`` takes the answer's text."""


def _fields(item: Interrupt) -> Mapping[str, Any]:
    return item.value if isinstance(item.value, Mapping) else {}


def _flags(item: Interrupt) -> list[str]:
    value = _fields(item)
    failed = [task["id"] for task in value.get("failed_tasks") or []]
    flags = ANSWER_FLAGS.get(str(value.get("kind")), OWN_INTERRUPT)
    return [flag.format(task=failed[0] if failed else "ID") for flag in flags]


def resume_hint(thread_id: str, interrupts: Sequence[Interrupt]) -> str:
    """One line saying how to answer ``interrupts``: the usual command, then the other
    flags; one command per interrupt when they are of different kinds."""
    base = f"aimegraph resume {shlex.quote(thread_id)}"
    if len({_fields(item).get("kind") for item in interrupts}) > 1:
        return "; ".join(f"{base} {_flags(i)[0]} --interrupt {i.id}" for i in interrupts)
    usual, *others = _flags(interrupts[0])
    return f"{base} {usual}" + (f" (or {', '.join(others)})" if others else "")


def wait_lines(thread_id: str, interrupts: Sequence[Interrupt], now: float) -> list[str]:
    """What a process waiting on ``interrupts`` says, as plain lines: what each asks
    (in brief), its deadline and default, then the commands that answer (last)."""
    lines = []
    for item in interrupts:
        value = _fields(item)
        kind = value.get("kind")
        asks = wait_summary(value) if kind in WAIT_KINDS else f"answer: {item.value}"
        lines += f"waiting for a human: {asks}".splitlines()
        if (deadline := value.get("deadline")) is not None:
            lines.append(deadline_line(str(kind), deadline, value.get("default"), now=now))
    return [*lines, f"answer with: {resume_hint(thread_id, interrupts)}"]


def deadline_line(kind: str, deadline: float, default: Any, *, now: float | None = None) -> str:
    """When a timed human wait of ``kind`` takes its ``default`` (``deadline`` in epoch
    seconds): the local time, the time left (or past) at ``now``, and the default."""
    left = deadline - (time.time() if now is None else now)
    when = f"in {duration_text(left)}" if left > 0 else f"passed {duration_text(-left)} ago"
    if kind == "ask_human":
        default = f"the answer {default!r}" if default else "no answer"
    return f"deadline: {local_time(deadline)} ({when}); unanswered, it takes the default: {default}"
