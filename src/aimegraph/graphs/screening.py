"""The input guardrails' part of the aime graph: ``input_guardrails`` beside the first
planner call, joined with it in ``screen`` (see :mod:`aimegraph.nodes.guarding`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import StateGraph

from aimegraph.guardrails import Guards
from aimegraph.nodes.guarding import (
    INPUT_GUARDRAILS,
    SCREEN,
    make_input_guard_node,
    make_screen_node,
)
from aimegraph.state import AimeState

__all__ = ["INPUT_GUARDRAILS", "SCREEN", "add_input_screen"]


def add_input_screen(
    builder: StateGraph[AimeState, Any, Any, Any],
    guards: Guards,
    after_plan: Callable[[AimeState], str],
    destinations: tuple[str, ...],
) -> None:
    """Adds the two nodes; ``screen`` goes on to the reporter (blocked), the planner
    (a redacted goal) or where ``after_plan`` routes a plan (one of ``destinations``)."""
    builder.add_node(INPUT_GUARDRAILS, make_input_guard_node(guards))
    builder.add_node(
        SCREEN,
        make_screen_node(after_plan),
        destinations=("reporter", "planner", *destinations),
    )
    builder.add_edge(INPUT_GUARDRAILS, SCREEN)
