"""Tool approval: a human approves an actor's tool call, edits its arguments, or
rejects it, as the run's policy (:mod:`aimegraph.policy`) decides per call.

The pause is an ``interrupt()`` whose value is LangChain's standard human-in-the-loop
request (``HITLRequest`` of its ``HumanInTheLoopMiddleware``: ``action_requests``
and ``review_configs``), so agent UIs that render that middleware's pauses render
these, plus this engine's own keys (``kind="approve_tool"``, ``task_id``, ``tool``,
``args``, and ``error``: why the previous answer was not taken). Answers:

* LangChain's ``HITLResponse`` ``{"decisions": [decision]}`` or the one decision:
  ``{"type": "approve"}``, ``{"type": "edit", "edited_action": {"name": tool,
  "args": {...}}}``, ``{"type": "reject", "message": "why"}``, and where the review allows it (a
  ``HumanInTheLoopMiddleware`` given as actor middleware may, see
  :mod:`aimegraph.middleware.approval`) ``{"type": "respond", "message": "..."}``: the
  human's message is the call's result and the tool does not run;
* the engine's own, kept for earlier callers: ``{"action": "approve"}`` (or
  ``True``, ``"approve"``), ``{"action": "reject" | "deny", "reason": ...}`` (or a
  bare string: the reason), and ``{"action": "edit", "args": {...}}``.

Edited arguments are checked against the tool's schema before the call runs; an
invalid edit, an edit naming another tool, or an answer that is no decision is asked
again with the reason in ``error``. A rejection's reason is the actor's observation;
so is the note that a human edited the call (see :mod:`aimegraph.tools.execution`).

Each call pauses in a tools task of its own (see :mod:`aimegraph.nodes.actor`):
resuming it never runs the reply's other calls again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware.human_in_the_loop import (
    ActionRequest,
    DecisionType,
    HITLRequest,
    ReviewConfig,
)
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import interrupt
from pydantic import BaseModel

from aimegraph.config import AimeConfig
from aimegraph.nodes.human import parse_decision, require_checkpointer
from aimegraph.policy import ToolRule, decide
from aimegraph.state import Task
from aimegraph.tools.steps import args_problems
from aimegraph.waits import wait_terms

ALLOWED: list[DecisionType] = ["approve", "edit", "reject"]

ToolAnswer = (
    tuple[Literal["approve"], None]
    | tuple[Literal["edit"], dict[str, Any]]
    | tuple[Literal["reject"], str]
    | tuple[Literal["respond"], str]
    | tuple[Literal["unclear"], str]
)

ANSWERS = (
    'answer {"decisions": [{"type": "approve"}]}, {"decisions": [{"type": "edit", '
    '"edited_action": {"name": TOOL, "args": {...}}}]} or {"decisions": [{"type": "reject", '
    '"message": "why"}]} (or {"action": "approve"}, {"action": "edit", "args": {...}}, '
    '{"action": "reject", "reason": "why"})'
)


def make_tool_approval(
    config: AimeConfig,
    *,
    exempt: Collection[str] = (),
    rules: Sequence[ToolRule] = (),
    reviews: Mapping[str, ReviewConfig] | None = None,
) -> Callable[[ToolCallRequest], ToolCallRequest | ToolMessage]:
    """A ToolNode pre-call hook applying the run's tool policy (``approve_tools``,
    ``tool_policy``, then ``rules``: a ``HumanInTheLoopMiddleware``'s, see
    :mod:`aimegraph.middleware.approval`) to each call; the ``exempt`` tools (the
    actor's reports) are never gated. ``reviews`` names the decisions a tool's pause
    allows (approve, edit and reject for a tool it does not name).

    Returns the request to run (with the human's edited arguments, if any), or the
    observation that replaces the call (a rejection, a refusal by the policy)."""

    def before_call(request: ToolCallRequest) -> ToolCallRequest | ToolMessage:
        cfg = config.override(request.runtime.context if request.runtime else None)
        if not cfg.gates_tools and not rules:
            return request
        call = request.tool_call
        state = request.state if isinstance(request.state, dict) else {}
        task: Task | None = state.get("task")
        every = (*cfg.approve_tools, *rules)
        verdict = decide(call, task, rules=every, policy=cfg.tool_policy, exempt=exempt)
        if verdict.decision == "allow":
            return request
        if verdict.decision == "deny":
            why = f": {verdict.reason}" if verdict.reason else ""
            return _observation(
                call, f"The run's tool policy refuses this call to {call['name']}{why}."
            )
        require_checkpointer("approve_tools")
        review = (reviews or {}).get(call["name"])
        allowed = review["allowed_decisions"] if review else ALLOWED
        error: str | None = None
        while True:  # each answer that is not taken is asked again, saying why
            asked = approval_request(call, task, cfg, verdict.reason, error, review=review)
            match parse_tool_decision(interrupt(asked), call["name"], allowed):
                case ("approve", _):
                    return request
                case ("reject", reason):
                    return _observation(
                        call, f"The human denied this call to {call['name']}: {reason}."
                    )
                case ("edit", args):
                    error = invalid_edit(request.tool, args)
                    if error is None:
                        return request.override(tool_call={**call, "args": args})
                case ("respond", message):
                    return ToolMessage(content=message, name=call["name"], tool_call_id=call["id"])
                case ("unclear", why):
                    error = why

    return before_call


def approval_request(
    call: ToolCall,
    task: Task | None,
    config: AimeConfig,
    reason: str = "",
    error: str | None = None,
    *,
    review: ReviewConfig | None = None,
) -> dict[str, Any]:
    """The interrupt value for one call: LangChain's ``HITLRequest`` with one action
    (and ``review``, or approve, edit and reject allowed), plus the engine's keys (with
    ``config``'s approval timeout and default, if any)."""
    where = f"Task {task.id} ({task.title})" if task is not None else "An actor"
    description = f"{where} calls {call['name']} with {json.dumps(call['args'], default=str)}"
    if reason:
        description += f"\nAsked because: {reason}"
    request = HITLRequest(
        action_requests=[
            ActionRequest(name=call["name"], args=call["args"], description=description)
        ],
        review_configs=[
            review or ReviewConfig(action_name=call["name"], allowed_decisions=ALLOWED)
        ],
    )
    return {
        "kind": "approve_tool",
        "task_id": task.id if task is not None else None,
        "tool": call["name"],
        "args": call["args"],
        **request,
        "error": error,
        **wait_terms(config.approval_timeout_s, config.approval_default),
    }


def parse_tool_decision(
    value: Any, tool: str, allowed: Sequence[DecisionType] = ALLOWED
) -> ToolAnswer:
    """A human's answer to a tool approval as (``approve`` | ``edit`` | ``reject`` |
    ``respond`` | ``unclear``, the edited arguments | the reason | the response | why it
    is unclear); a decision not in ``allowed`` is unclear."""
    answer = _parsed_decision(value, tool)
    if answer[0] != "unclear" and answer[0] not in allowed:
        return "unclear", f"{answer[0]} is not allowed for {tool}: answer {', '.join(allowed)}"
    return answer


def _parsed_decision(value: Any, tool: str) -> ToolAnswer:
    if isinstance(value, dict) and "decisions" in value:
        decisions = value["decisions"]
        if not isinstance(decisions, list) or len(decisions) != 1:
            return "unclear", f"one decision is needed for the one call to {tool}: {ANSWERS}"
        value = decisions[0]
    if isinstance(value, dict) and "type" in value:
        return _hitl_decision(value, tool)
    if isinstance(value, dict) and str(value.get("action", "")).lower() == "edit":
        args = value.get("args")
        if isinstance(args, dict):
            return "edit", args
        return "unclear", f"an edit needs the call's new arguments as 'args': {ANSWERS}"
    action, details = parse_decision(value)
    if action == "approve":
        return "approve", None
    if action == "reject":
        return "reject", str(details["reason"])
    return "unclear", f"{details.get('reason', 'no decision')}: {ANSWERS}"


def _hitl_decision(decision: Mapping[str, Any], tool: str) -> ToolAnswer:
    kind = decision.get("type")
    if kind == "approve":
        return "approve", None
    if kind == "reject":
        return "reject", str(decision.get("message") or "no reason given")
    if kind == "respond":
        return "respond", str(decision.get("message") or "")
    if kind == "edit":
        action = decision.get("edited_action")
        if not isinstance(action, dict) or not isinstance(action.get("args"), dict):
            return "unclear", f"an edit needs edited_action with name and args: {ANSWERS}"
        if action.get("name", tool) != tool:
            return "unclear", (
                f"an edit may change the arguments of the call to {tool}, not the tool "
                f"({action.get('name')!r})"
            )
        return "edit", dict(action["args"])
    return (
        "unclear",
        f"decision type {kind!r} is not one of approve, edit, reject, respond: {ANSWERS}",
    )


def invalid_edit(tool: BaseTool | None, args: dict[str, Any]) -> str | None:
    """Why ``args`` cannot be the arguments of a call to ``tool``, or None (see
    :func:`aimegraph.tools.steps.args_problems`)."""
    if tool is None:
        return None
    schema = tool.tool_call_schema
    problems = args_problems(tool, args)
    if not problems:
        return None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return f"the edited arguments do not fit {tool.name}: {'; '.join(problems)}"
    return f"the edited arguments of {tool.name} lack {problems[0].removeprefix('missing ')}"


def _observation(call: ToolCall, text: str) -> ToolMessage:
    return ToolMessage(
        content=f"{text} Do not retry it; find another way or report why you cannot.",
        name=call["name"],
        tool_call_id=call["id"],
        status="error",
    )
