"""The planner's draft when the run was given its plan (``plan`` in the state: the
invoke input's, or the graph's own, ``build_aime_graph(plan=...)``): the plan itself,
with no model call. It is checked by the planner's ``validate`` as any draft is; a
plan that does not pass ends the run ``failed`` with the reason (no model is asked
to repair a person's plan). The ``plan`` key is cleared: later replans (a task failed
for good, the verifier rejected the answer) ask the planner model as usual."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from aimegraph.config import ContextSettings
from aimegraph.nodes.planner import FINISHED, RUN_START, GoalError, resolve_goal
from aimegraph.nodes.types import Node
from aimegraph.state import PlanError, PlannerState, Usage, as_plan

GIVEN = "given"


def route_planner_start(otherwise: str) -> Callable[[PlannerState], str]:
    """The planner's entry: ``given`` when the state holds a plan, else ``otherwise``."""

    def route(state: PlannerState) -> str:
        return GIVEN if state.get("plan") is not None else otherwise

    return route


def make_given_plan_node(config: ContextSettings) -> Node[PlannerState]:
    """Takes the given plan as the draft for ``validate``."""

    def given(state: PlannerState, runtime: Runtime[Any]) -> dict[str, Any]:
        new_run = state.get("status") in FINISHED or "status" not in state
        update: dict[str, Any] = {
            "plan": None,
            "plan_given": True,
            "model_failed": False,
            # No call of its own: the planner hands back no usage (see PlannerInput).
            "usage_before": Usage() if new_run else state.get("usage") or Usage(),
            "usage": Usage(),
            "draft": None,
        }
        if new_run:
            update |= RUN_START
        try:
            goal = resolve_goal(state, max_chars=config.for_run(runtime).max_goal_chars)
            plan = as_plan(state.get("plan"))
        except (GoalError, PlanError) as exc:
            return update | {"plan_error": str(exc)}
        if goal is None:
            return update | {"plan_error": "no goal: pass 'goal' or a human message"}
        return update | {"goal": goal, "draft": plan.model_dump(), "plan_error": None}

    return given
