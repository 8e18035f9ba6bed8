"""A team mode's graph: the members, the mode's own nodes and edges, finish, check, record."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from aimegraph.config import AimeConfig
from aimegraph.memory.nodes import make_task_record_node
from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.nodes.verifier import make_task_check_node
from aimegraph.state import (
    ActorInput,
    ActorOutput,
    TeamMode,
)
from aimegraph.teams.modes import broadcast, hierarchical, joint, sequential
from aimegraph.teams.modes.common import (
    MODES,
    Conclude,
    TeamBuilder,
    TeamParts,
    TeamState,
    make_finish_node,
)

Wire = Callable[[TeamBuilder, TeamParts, Sequence[str]], None]

_MODE: dict[str, tuple[Wire, Conclude]] = {
    "sequential": (sequential.wire, sequential.conclude),
    "joint": (joint.wire, joint.conclude),
    "hierarchical": (hierarchical.wire, hierarchical.conclude),
    "broadcast": (broadcast.wire, broadcast.conclude),
}


def mode_graph(
    mode: TeamMode, parts: TeamParts, *, checkpointer: Checkpointer = None
) -> CompiledStateGraph[TeamState, AimeConfig, ActorInput, ActorOutput]:
    """Wire ``mode``'s graph from ``parts`` (see :mod:`aimegraph.teams.modes`)."""
    if mode not in MODES:
        raise ValueError(f"unknown team mode {mode!r}; modes: {', '.join(MODES)}")
    builder = StateGraph(
        TeamState, context_schema=AimeConfig, input_schema=ActorInput, output_schema=ActorOutput
    )
    nodes = list(parts.member_graphs)
    for node, graph in parts.member_graphs.items():
        builder.add_node(node, graph)
    wire, conclude = _MODE[mode]
    builder.add_node("finish", make_finish_node(parts, conclude))
    wire(builder, parts, nodes)
    if parts.checker is not None:
        builder.add_node(
            "check",
            make_task_check_node(
                parts.checker,
                config=parts.config,
                prompt_source=parts.prompts,
                wrap=parts.checker_wrap,
            ),
            retry_policy=LLM_RETRY_POLICY,
        )
        builder.add_edge("finish", "check")
        last = "check"
    else:
        last = "finish"
    if parts.memory:
        # The task's episode, as a single actor's (its lesson after a retry included).
        builder.add_node("record", make_task_record_node(parts.default_chat, parts.config))
        builder.add_edge(last, "record")
        last = "record"
    builder.add_edge(last, END)
    return builder.compile(checkpointer=checkpointer, name=mode)
