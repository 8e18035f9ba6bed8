"""The run's input and output guardrails (:mod:`aimegraph.guardrails`; the tool
guardrails act in the tools step, :mod:`aimegraph.tools.screening`).

Input: as in the OpenAI Agents SDK, the goal is screened beside the first planner
call, not before it. The intake sends a new run to both ``planner`` and
``input_guardrails`` (one super-step: they run together) and sets ``screening``; the
planner's route then leads to ``screen``, which sees what both did. A tripwire discards
the plan (no task has started, so no tool has run) and ends the run ``blocked``
through the reporter; a redacted goal discards the plan too and asks the planner again
with it; a goal that passed goes on to its plan. A redaction therefore costs a second
planner call, and the first one saw the goal as given: a guardrail whose text must
never reach the planner's model should trip instead.

Output: the reporter screens the final answer it writes (the JSON of
``structured_response`` with a response format) before it reaches the state: a
tripwire replaces the answer with a one-line notice and ends the run ``blocked``, a
redaction replaces it (a redacted typed answer must still fit its format).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import HumanMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite
from pydantic import BaseModel, ValidationError

from aimegraph.guardrails import Guards, Screened, Subject
from aimegraph.models.response_format import TypedAnswer
from aimegraph.nodes.dual import Steps, model_node
from aimegraph.nodes.types import Node
from aimegraph.prompts import guardrails as prompts
from aimegraph.state import AimeState, InputScreen, Usage

INPUT_GUARDRAILS, SCREEN = "input_guardrails", "screen"

DISCARDED_PLAN: dict[str, Any] = {
    "tasks": Overwrite({}),
    "direct_answer": None,
    "proposal": None,
    "draft": None,
    "plan_rationale": "",
}
"""The update that discards the first plan (a new run's only tasks)."""


def make_input_guard_node(guards: Guards) -> Runnable[AimeState, dict[str, Any]]:
    """Screens the goal with the ``input`` guardrails; writes what they found to
    ``input_screen`` and what they spent to ``usage``."""

    def input_guardrails(state: AimeState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        goal = state.get("goal", "")
        screened: Screened = yield guards.screening(), Subject("input", goal)
        if screened.findings:
            runtime.stream_writer(screened.event())
        trip = screened.tripwire
        found = InputScreen(
            tripwire=trip.describe() if trip else None,
            goal=screened.subject.text if screened.redacted and not trip else None,
        )
        return {"input_screen": found, "usage": screened.usage}

    return model_node(input_guardrails, name=INPUT_GUARDRAILS)


def make_screen_node(after_plan: Callable[[AimeState], str]) -> Node[AimeState]:
    """Joins the first planner call and the input guardrails; routes with ``Command``:
    to the reporter after a tripwire, to the planner after a redaction, else where
    ``after_plan`` (the planner's own route) says."""

    def screen(state: AimeState, runtime: Runtime[Any]) -> Command:
        found = state.get("input_screen") or InputScreen(tripwire=None, goal=None)
        done: dict[str, Any] = {"screening": False, "input_screen": None}
        if found["tripwire"] is not None:
            blocked = {"status": "blocked", "reason": f"the goal: {found['tripwire']}"}
            return Command(goto="reporter", update=done | DISCARDED_PLAN | blocked)
        if found["goal"] is not None:
            again = {"goal": found["goal"], "status": "running", "reason": None}
            asked = _redacted_request(state, found["goal"])
            return Command(goto="planner", update=done | DISCARDED_PLAN | again | asked)
        return Command(goto=after_plan(cast(AimeState, {**state, **done})), update=done)

    return screen


def _redacted_request(state: AimeState, redacted: str) -> dict[str, Any]:
    """The conversation's last human message, the goal as given, as redacted."""
    messages = state.get("messages") or []
    asked = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    if asked is None or asked.text.strip() != state.get("goal"):
        return {}
    # Same id: add_messages replaces the message instead of appending one.
    return {"messages": [HumanMessage(redacted, id=asked.id)]}


@dataclass(frozen=True)
class ScreenedAnswer:
    """The answer after the output guardrails, the update they make (a redacted typed
    answer, or a ``blocked`` run), and what they spent."""

    answer: str
    update: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)


def screen_answer(
    guards: Guards,
    answer: str,
    *,
    typed: TypedAnswer | None,
    runtime: Runtime[Any],
) -> Steps[ScreenedAnswer]:
    """The final ``answer`` through the ``output`` guardrails (a node's step). A
    redacted typed answer is parsed back into its format (``structured_response``);
    one that no longer fits trips."""
    screened: Screened = yield guards.screening(), Subject("output", answer)
    if screened.findings:
        runtime.stream_writer(screened.event())
    update: dict[str, Any] = {}
    text = screened.subject.text
    reason = screened.tripwire.describe() if screened.tripwire else None
    if reason is None and screened.redacted and typed is not None:
        try:
            value: BaseModel = typed.schema.model_validate_json(text)
        except ValidationError as exc:
            reason = f"the redacted answer no longer fits the response format: {exc}"
        else:
            update["structured_response"] = typed.value(value)
            text = typed.render(value)
    if reason is None:
        return ScreenedAnswer(text, update, screened.usage)
    blocked = {"status": "blocked", "reason": f"the answer: {reason}", "structured_response": None}
    return ScreenedAnswer(prompts.BLOCKED.format(reason=reason), blocked, screened.usage)
