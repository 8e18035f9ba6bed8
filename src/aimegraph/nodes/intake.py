"""The run's entry: checks the request and the run's settings, and starts a new
run when a finished thread receives a new request (the next turn of a chat), with
its view of the earlier turns (:mod:`aimegraph.nodes.conversation`). A request sent
while a plan waits for approval is not taken: the plan is asked again, saying so."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite

from aimegraph.config import AimeConfig
from aimegraph.nodes.conversation import conversation_view, past_turns
from aimegraph.nodes.guarding import INPUT_GUARDRAILS
from aimegraph.nodes.human import require_checkpointer
from aimegraph.nodes.planner import FINISHED, RUN_START, GoalError, resolve_goal
from aimegraph.nodes.types import Node
from aimegraph.policy import ToolRule, as_rules, check_rules
from aimegraph.prompts import conversation as conversation_prompts
from aimegraph.prompts.source import PromptSource
from aimegraph.state import AimeState, PastRun, PlanUpdate, Usage

PLANNER, REPORTER, APPROVE_PLAN = "planner", "reporter", "approve_plan"

PLAN_PENDING = (
    "a new request came while this plan waits for approval and was not taken: answer "
    "the plan first (approve, reject or edit it) or cancel the run, then send the request again"
)

REFUSED_GOAL_CHARS = 100
"""How much of a refused goal the state keeps (its opening, to recognise it by)."""

# The planner's RUN_START, the orchestrator's last dispatched batch, the typed answer.
_RUN_START: dict[str, Any] = {**RUN_START, "dispatched": [], "structured_response": None}


def make_intake_node(
    config: AimeConfig,
    *,
    tool_names: Collection[str],
    prompts: PromptSource | None = None,
    plan: PlanUpdate | None = None,
    approvals: Sequence[ToolRule] = (),
    screen_input: bool = False,
) -> Node[AimeState]:
    """The node before the planner; routes with ``Command(goto=...)``.

    A new run records the prompt version it uses, ``prompts.current()``, in
    ``prompt_version``: the run's nodes look their texts up by it, so a change of
    the source's current version takes effect from the next run on. It also gets
    its views of the thread's earlier turns, ``conversation`` (within
    ``max_conversation_tokens``) and ``recent_turns`` (a quarter of it, for actors).

    Raises a ``ValueError`` for settings the run cannot honour (approvals without a
    checkpointer, ``approve_tools`` naming no tool: the config's here, a run's
    override when it starts). A goal that cannot be used
    ends the run ``failed`` with the reason, through the reporter, so a chat app
    gets a reply saying what to change; the state keeps only its opening (see
    :func:`refused_goal`), not the whole text in every later checkpoint.

    A new run given no ``plan`` of its own gets ``plan`` (the graph's predefined
    plan), which the planner then uses instead of asking its model.

    New input while the run waits for the approval of its plan (``proposal``) is
    not taken: the goal stays the run's own (``run_goal``) and ``approve_plan``
    asks again, its ``error`` saying how to go on (``PLAN_PENDING``).

    ``approvals`` are the actors' approval rules beside the config's (a
    ``HumanInTheLoopMiddleware``'s): checked the same way. With ``screen_input``, a new
    run's goal goes to ``input_guardrails`` too, beside the planner, with ``screening``
    set (see :mod:`aimegraph.nodes.guarding`).
    """

    check_rules([*config.approve_tools, *approvals], tool_names)

    def intake(state: AimeState, runtime: Runtime[Any]) -> Command:
        cfg = config.for_run(runtime)
        if cfg.approve_tools != config.approve_tools:  # the built ones are checked above
            check_rules(cfg.approve_tools, tool_names)
        if cfg.approve_plan:
            require_checkpointer("approve_plan")
        if cfg.escalate != "off":
            require_checkpointer("escalate")
        if cfg.tool_policy is not None or any(
            r.decision == "ask" for r in as_rules([*cfg.approve_tools, *approvals])
        ):
            require_checkpointer("approve_tools")
        status = state.get("status")
        if status == "running":
            if state.get("proposal") is not None:
                goal = state.get("run_goal", state.get("goal"))
                return Command(
                    goto=APPROVE_PLAN, update={"goal": goal, "approval_error": PLAN_PENDING}
                )
            # Re-entered with new input before the run ended: it carries on.
            return Command(goto=PLANNER, update={"run_goal": state.get("goal")})
        update: dict[str, Any] = dict(_RUN_START, run_started_at=time.time())
        update["prompt_version"] = None
        if prompts is not None:
            update["prompt_version"] = version = prompts.current()
            prompts.texts(version)  # a broken stored prompt fails here, not mid-run
        if status in FINISHED and ("tasks" in state or "usage" in state):
            update |= _archive(state)
        try:
            goal = resolve_goal(state, max_chars=cfg.max_goal_chars)
        except GoalError as exc:
            refused = refused_goal(state, cfg.max_goal_chars)
            failed = {"status": "failed", "reason": str(exc), "plan": None}
            return Command(goto=REPORTER, update=update | refused | failed)
        if goal is not None:
            update |= {"goal": goal, **_conversation(state, goal, cfg)}
        update["run_goal"] = goal
        if plan is not None and state.get("plan") is None:
            update["plan"] = plan
        if screen_input and goal is not None:
            return Command(goto=[PLANNER, INPUT_GUARDRAILS], update=update | {"screening": True})
        return Command(goto=PLANNER, update=update)

    return intake


def refused_goal(state: AimeState, max_chars: int) -> dict[str, Any]:
    """The update that replaces a refused goal (the ``goal`` key, and a human message
    over ``max_chars``) with its opening and size: the reporter's answer and every
    later checkpoint would otherwise carry the whole text."""
    update: dict[str, Any] = {"goal": _opening(state.get("goal"))}
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and len(last.text) > max_chars:
        # Same id: add_messages replaces the message instead of appending one.
        update["messages"] = [HumanMessage(content=_opening(last.text), id=last.id)]
    return update


def _opening(goal: object) -> str:
    if not isinstance(goal, str):
        return f"(not a goal: {type(goal).__name__})"
    if len(goal) <= REFUSED_GOAL_CHARS:
        return goal
    return f"{goal[:REFUSED_GOAL_CHARS]}... ({len(goal):,} characters, refused)"


def _conversation(state: AimeState, goal: str, cfg: AimeConfig) -> dict[str, Any]:
    """The new run's views of the earlier turns; a goal given as ``goal`` (not as
    the last human message) joins ``messages`` as the request it is, so that later
    turns see it."""
    messages = list(state.get("messages") or [])
    last = messages[-1] if messages else None
    asked = isinstance(last, HumanMessage) and last.text.strip() == goal
    earlier = messages[:-1] if asked else messages
    status = state.get("status")
    outcome = (
        conversation_prompts.RUN_OUTCOME.format(status=status, reason=state.get("reason"))
        if status in FINISHED and status != "succeeded" and state.get("reason")
        else None
    )
    turns = past_turns(earlier, outcome=outcome)
    budget = cfg.max_conversation_tokens
    update: dict[str, Any] = {
        "conversation": conversation_view(turns, max_tokens=budget),
        "recent_turns": conversation_view(turns, max_tokens=budget // 4),
    }
    if not asked:
        update["messages"] = [HumanMessage(goal)]
    return update


def _finished_goal(state: AimeState) -> str:
    """The finished run's goal. A new goal given as ``goal`` has replaced it in the
    state before the intake runs; the finished run's request is then the last human
    message (the intake records a goal given as ``goal`` as one)."""
    messages = state.get("messages") or []
    if messages and not isinstance(messages[-1], HumanMessage):
        asked = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        if asked is not None:
            return asked.text
    return state.get("goal", "")


def _archive(state: AimeState) -> dict[str, Any]:
    """The finished run as a ``runs`` record, and its per-run keys emptied (past
    their reducers, which would otherwise merge the next run into this one)."""
    record = PastRun(
        goal=state.get("run_goal") or _finished_goal(state),
        status=state.get("status", "failed"),
        reason=state.get("reason"),
        final_answer=state.get("final_answer"),
        verdict=state.get("verdict"),
        tasks=dict(state.get("tasks") or {}),
        updates=list(state.get("updates") or []),
        usage=state.get("usage") or Usage(),
        prompt_version=state.get("prompt_version"),
        spans=list(state.get("spans") or []),
    )
    if (started_at := state.get("run_started_at")) is not None:
        record["run_started_at"] = started_at
    return {
        "runs": [record],
        "tasks": Overwrite({}),
        "updates": Overwrite([]),
        "spans": Overwrite([]),
        "usage": Overwrite(Usage()),
        "notes": Overwrite([]),
        "facts": Overwrite({}),  # the whiteboard is the run's own
    }
