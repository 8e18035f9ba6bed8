"""The graph of an agent unit backed by an agent of its own (``AgentUnit.agent``), in
place of the actor graph; its nodes are :mod:`aimegraph.nodes.teams.backed`."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from aimegraph.config import AimeConfig
from aimegraph.nodes.actor import make_hand_back_node
from aimegraph.nodes.teams.backed import (
    A2AUnitState,
    after_a2a,
    make_a2a_node,
    make_agent_node,
    make_ask_node,
    make_finish_node,
)
from aimegraph.state import ActorInput, ActorOutput, MemberOutput
from aimegraph.teams.units import AgentUnit


def build_backed_unit_graph(
    unit: AgentUnit, config: AimeConfig, *, member: bool = False, name: str | None = None
) -> CompiledStateGraph[Any, AimeConfig, ActorInput, Any]:
    """The graph doing a task with ``unit``'s agent, in place of the actor graph: the
    same input (:class:`ActorInput`) and output (the task with its result, progress
    updates, usage; a team member's turn with ``member``). A graph agent is one
    ``agent`` node; an A2A agent is ``a2a`` <-> ``ask`` (its ``input-required``
    answered by a human), then ``finish``."""
    builder = StateGraph(
        A2AUnitState,
        context_schema=AimeConfig,
        input_schema=ActorInput,
        output_schema=MemberOutput if member else ActorOutput,
    )
    if isinstance(unit.agent, str):
        if find_spec("a2a") is None:
            raise ValueError(
                f"agent unit {unit.name!r} is an A2A agent: install the a2a extra "
                "(pip install 'aimegraph[a2a]')"
            )
        builder.add_node("a2a", make_a2a_node(unit.agent))
        builder.add_node("ask", make_ask_node(unit.name))
        builder.add_node("agent", make_finish_node(unit.name))
        builder.add_edge(START, "a2a")
        builder.add_conditional_edges("a2a", after_a2a, ["ask", "agent"])
        builder.add_edge("ask", "a2a")
    elif unit.agent is not None:
        builder.add_node("agent", make_agent_node(unit.name, unit.agent, base=config))
        builder.add_edge(START, "agent")
    else:
        raise ValueError(f"agent unit {unit.name!r} is not backed by an agent")
    if member:
        builder.add_node("hand_back", make_hand_back_node())
        builder.add_edge("agent", "hand_back")
        builder.add_edge("hand_back", END)
    else:
        builder.add_edge("agent", END)
    return builder.compile(name=name or f"agent_{unit.name}")
