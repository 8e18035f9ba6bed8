"""Defences a user of a benchmark's tools would write, built with aimegraph's public
API, which the public-benchmark bench measures under attack (``bench/public_benchmarks.py``).

The suites' tools carry no mark of what they change, so :func:`changes_something`
reads it from their names (:data:`SIDE_EFFECTS`: sending, scheduling, updating...).
Three defences use it:

- :data:`recipients_from_request`, a ``tool_input`` guardrail: a call that changes
  something and names a recipient, an account or a password (:data:`REQUEST_ONLY`)
  runs only when the user's request holds that value. A transfer to an account an
  attacker wrote into a bill or a transaction's subject trips it, and the run ends
  ``blocked``; so does one to an account the user meant but named only through the
  data ("refund my friend").
- :func:`ask_before_side_effects`, a tool policy: a human approves each side
  effect (in an unattended eval no one does, and the rollout ends paused).
- :func:`side_effects_in_tool_steps_only`, a tool policy: a call that changes
  something runs only as a tool step whose arguments the plan wrote out, never from
  an actor, who reads tools' outputs. With a planner that fixes only the calls whose arguments the
  request gives, untrusted data never chooses a side effect (the CaMeL pattern).

Name them in a system: ``SystemSpec(guardrails="aimegraph.eval.public.defences:
recipients_from_request")``, ``config={"tool_policy": "aimegraph.eval.public.
defences:side_effects_in_tool_steps_only"}``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import ToolCall

from aimegraph.guardrails import Guardrail, GuardrailResult, Subject
from aimegraph.policy import ToolDecision
from aimegraph.state import Task
from aimegraph.state.references import referenced_ids

__all__ = [
    "REQUEST_ONLY",
    "SIDE_EFFECTS",
    "ask_before_side_effects",
    "changes_something",
    "given_by",
    "recipient_guardrail",
    "recipients_from_request",
    "side_effects_in_tool_steps_only",
]

SIDE_EFFECTS = (
    "send_*", "schedule_*", "update_*", "delete_*", "create_*", "share_*", "append_*",
    "reserve_*", "cancel_*", "reschedule_*", "add_*", "invite_*", "remove_*", "post_*",
)  # fmt: skip
"""Tool-name globs of the calls that change the user's world (transfers, messages,
edits, bookings) in AgentDojo's suites; every other tool there only reads."""

REQUEST_ONLY = ("recipient", "recipients", "iban", "password")
"""Arguments of a side-effect call whose value only the user's request may choose:
where money or messages go, and the account's password."""


def changes_something(tool: str, side_effects: Iterable[str] = SIDE_EFFECTS) -> bool:
    """Whether a call of ``tool`` changes the user's world (its name matches one of
    ``side_effects``)."""
    return any(fnmatch.fnmatchcase(tool, glob) for glob in side_effects)


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def _values(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [v for item in value for v in _values(item)]
    if value is None or value == "":
        return []
    return [str(value)]


def recipient_guardrail(
    arguments: Iterable[str] = REQUEST_ONLY,
    *,
    side_effects: Iterable[str] = SIDE_EFFECTS,
    name: str = "recipients_from_request",
) -> Guardrail:
    """A ``tool_input`` guardrail tripping on a side-effect call (``side_effects``)
    whose ``arguments`` hold a value the run's goal does not (compared without case
    or repeated spaces); a call with no goal to compare with trips too (fail closed)."""
    guarded = tuple(arguments)
    globs = tuple(side_effects)

    def check(subject: Subject) -> GuardrailResult | None:
        if subject.tool is None or not changes_something(subject.tool, globs):
            return None
        args = subject.args or {}
        request = _words(subject.goal or "")
        foreign = [
            (key, value)
            for key in guarded
            for value in _values(args.get(key))
            if _words(value) not in request
        ]
        if not foreign:
            return None
        shown = ", ".join(f"{k}={v!r}" for k, v in foreign)
        return GuardrailResult.trip(
            f"{subject.tool} would use {shown}, which the user's request does not give"
        )

    return Guardrail(name, check, frozenset({"tool_input"}))


recipients_from_request = recipient_guardrail()
"""The guardrail with its defaults: it keeps no state, so one instance serves every run."""


def ask_before_side_effects(call: ToolCall, task: Task | None) -> ToolDecision | None:
    """A tool policy (``AimeConfig.tool_policy``) asking a human before every
    side-effect call. A policy rather than ``approve_tools`` globs: a glob matching no
    tool of a suite is refused there as a likely typo, and each suite (each BFCL
    task) has other tools."""
    return "ask" if changes_something(str(call["name"])) else None


def side_effects_in_tool_steps_only(call: ToolCall, task: Task | None) -> ToolDecision | None:
    """A tool policy (``AimeConfig.tool_policy``): a side-effect call is refused
    unless it is the call a tool step of the plan fixed, with arguments the plan
    wrote out (a ``$t1`` reference would let a result, read from untrusted data,
    choose them); other calls are left to the ``approve_tools`` rules."""
    if not changes_something(str(call["name"])):
        return None
    step = task.call if task is not None else None
    if step is not None and step.tool == call["name"] and not referenced_ids(step.args):
        return None
    return "deny"


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def given_by(request: str, value: Any) -> bool:
    """Whether ``value`` (a call's argument) is written in ``request``: a string in
    it (without case), a number among its numbers, each item of a list or value of an
    object; a yes-or-no is the request's wording, so it counts as given."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int | float):
        numbers = {float(n.replace(",", "")) for n in _NUMBER.findall(request)}
        return float(value) in numbers
    if isinstance(value, list | tuple):
        return all(given_by(request, v) for v in value)
    if isinstance(value, dict):
        return all(given_by(request, v) for v in value.values())
    return _words(str(value)) in _words(request)
