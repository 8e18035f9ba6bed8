"""Human in the loop, with ``interrupt()``: plan approval, and the decisions every
approval reads (tool approval is :mod:`aimegraph.nodes.tool_approval`, escalation
:mod:`aimegraph.nodes.escalation`, ``ask_human`` :mod:`aimegraph.tools.human`).

Every interrupt carries a dict with a ``kind`` and what the human needs to
decide. Resume with ``Command(resume=...)`` (or ``Command(resume={interrupt_id:
value, ...})`` when several actors wait at once):

* ``approve_plan``: ``{"action": "approve"}``, ``{"action": "reject", "reason": ...}``
  (ends the run with ``status="rejected"``) or ``{"action": "edit", "plan": {PlanUpdate}}``
  (checked as the planner's drafts are, :func:`edited_plan`; an invalid edit is shown
  again with the error). An
  answer that is none of these (``{"action": "aprove"}``) is asked again the same
  way: a typo never rejects the run.
* ``approve_tool``: approve, edit the arguments or reject (LangChain's HITL
  decisions, or ``{"action": "approve" | "reject" | "edit", ...}``); see
  :mod:`aimegraph.nodes.tool_approval`.
* ``ask_human`` (the tool in ``aimegraph.tools.human``): the answer as a string,
  or ``{"answer": ...}``.

A bare ``True``/``"approve"`` approves; a bare string for an approval is a rejection
reason.

Each kind may have a timeout and a default (``approval_timeout_s`` and
``approval_default``, ``ask_human_timeout_s`` and ``ask_human_default``,
``escalation_timeout_s`` and ``escalation_default``): the interrupt then carries
``timeout_s``, ``default`` and ``deadline``, and the process driving the run answers
the default at the deadline (see :mod:`aimegraph.waits`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from aimegraph.config import AimeConfig
from aimegraph.nodes.planner import commit_plan
from aimegraph.nodes.types import Node
from aimegraph.running.scope import saves_checkpoints
from aimegraph.state import (
    PlanChecks,
    PlanError,
    PlanUpdate,
    Task,
    Usage,
    render_checklist,
)
from aimegraph.waits import wait_terms

Decision = Literal["approve", "reject", "edit", "unclear"]

PLAN_ANSWERS = (
    'answer {"action": "approve"}, {"action": "reject", "reason": "..."} or '
    '{"action": "edit", "plan": {...}}'
)


def require_checkpointer(setting: str) -> None:
    """Refuse to pause a run that could never be resumed.

    Without a checkpointer LangGraph returns from an ``interrupt()`` with nothing
    saved to resume from, so a run that needs a human would wait forever. Call
    from inside a node (reads the run's config).

    Raises:
        ValueError: naming the setting and what to pass.
    """
    if not saves_checkpoints():
        raise ValueError(
            f"{setting} needs a checkpointer: the run pauses for a human and is resumed "
            "from its checkpoint. Pass checkpointer=... to build_aime_graph (e.g. "
            "InMemorySaver(serde=aimegraph.checkpoints.make_serializer())) or compile "
            "the app that embeds the graph with one"
        )


def parse_decision(value: Any) -> tuple[Decision, dict[str, Any]]:
    """Normalise a resume value for an approval into (action, details).

    ``"unclear"`` (with ``details["reason"]`` saying why) for an answer that is no
    decision: a mapping without a known ``action``, an edit without a plan, or a
    value of another type. Never an approval."""
    if value is True or (isinstance(value, str) and value.strip().lower() in ("approve", "yes")):
        return "approve", {}
    if value is False or value is None:
        return "reject", {"reason": "rejected"}
    if isinstance(value, str):
        return "reject", {"reason": value}
    if isinstance(value, dict):
        action = str(value.get("action", "")).lower()
        if action in ("approve", "yes"):
            return "approve", value
        if action == "edit" and isinstance(value.get("plan"), dict):
            return "edit", value
        if action in ("reject", "deny", "no"):
            return "reject", {"reason": str(value.get("reason") or "rejected")}
    return "unclear", {"reason": f"unrecognised answer {value!r:.200}"}


def edited_plan(
    plan: Mapping[str, Any], tasks: Mapping[str, Task], checks: PlanChecks, *, max_tasks: int
) -> tuple[PlanUpdate, dict[str, Task]] | str:
    """A plan a human edited (at plan approval or at an escalation), checked as the
    planner's drafts are (``checks``): the plan and the tasks it changes, or why it is
    invalid, to show the human with the plan again."""
    try:
        edited = PlanUpdate.model_validate(plan)
        return edited, checks.apply(tasks, edited, max_tasks=max_tasks)
    except (PlanError, ValueError) as exc:
        return f"the edited plan is invalid: {exc}"


def make_approve_plan_node(*, config: AimeConfig, checks: PlanChecks) -> Node[Any]:
    """Pauses with the plan awaiting approval (``proposal``, ``draft``); approve,
    reject or edit it.

    An approved or edited plan is committed to the progress list here. An edit
    that is not a valid plan, or an answer that is no decision, sets
    ``approval_error``: route with :func:`route_after_approval`, which shows the
    plan again with the error. When the
    planner's calls have spent a run budget, the run ends ``budget_exhausted``
    without asking (the plan could not run)."""

    def approve_plan(state: Mapping[str, Any], runtime: Runtime[Any]) -> dict[str, Any]:
        cfg = config.for_run(runtime)
        settled = {"proposal": None, "draft": None, "approval_error": None}
        # The wall clock is left to the orchestrator: this node runs again when the
        # human answers, and time spent waiting for them is not the planner's.
        spent = cfg.budget_spent(state.get("usage") or Usage(), state.get("steps", 0))
        if spent:
            reason = f"{spent} before the plan could be approved"
            return settled | {"status": "budget_exhausted", "reason": reason}
        require_checkpointer("approve_plan")
        tasks = state.get("tasks") or {}
        proposal = state.get("proposal") or {}
        answer = interrupt(
            {
                "kind": "approve_plan",
                "checklist": render_checklist({**tasks, **proposal}),
                "plan": state.get("draft"),
                "error": state.get("approval_error"),
                **wait_terms(cfg.approval_timeout_s, cfg.approval_default),
            }
        )
        action, details = parse_decision(answer)
        if action == "unclear":  # asked again, as an invalid edit is
            return {"approval_error": f"{details['reason']}: {PLAN_ANSWERS}"}
        if action == "approve":
            return commit_plan(state, runtime, proposal, state.get("draft")) | settled
        if action == "reject":
            return settled | {"status": "rejected", "reason": f"plan rejected: {details['reason']}"}
        checked = edited_plan(details["plan"], tasks, checks, max_tasks=cfg.max_tasks)
        if isinstance(checked, str):
            return {"approval_error": checked}
        edited, changed = checked
        return commit_plan(state, runtime, changed, edited.model_dump()) | settled

    return approve_plan


def route_after_approval(then: str) -> Callable[[Mapping[str, Any]], str]:
    """Back to ``approve_plan`` after an invalid edit, else on to ``then`` (the
    planner subgraph's end, or the top-level graph's orchestrator)."""

    def route(state: Mapping[str, Any]) -> str:
        return "approve_plan" if state.get("approval_error") else then

    return route
