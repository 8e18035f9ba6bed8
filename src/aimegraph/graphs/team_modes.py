"""A team mode's graph: the members, the mode's own nodes and edges (their nodes are
:mod:`aimegraph.nodes.teams`, one module per mode), finish, check, record.

Team modes (BMW Agents' workflow types) as LangGraph subgraphs, one per mode.

Every mode graph takes the executor's input (:class:`ActorInput` whose task has a
``team``) and hands back its output (the task with its result and its members'
turns, progress updates, usage), so it drops into the executor, or any graph, in
place of a single actor. A member's turn is the actor graph itself, built as a
team member (``build_actor_graph(member=True)``) and added as a node: its ReAct
loop, tools, approvals, ``ask_human``, streaming and checkpoints are the single
actor's. Turns are dispatched with ``Send`` and each runs in its own super-step
(parallel ones in the same), so a resumed run never redoes a finished turn.

* ``sequential``: members in order, each handed the previous result; another round
  when the last member fails, up to ``max_rounds``.
* ``joint``: one shared conversation in turns (round robin, or the model picks the
  next speaker with ``speaker="model"``) until a proposal stands that every other
  member has heard without objecting, or ``max_rounds`` rounds.
* ``hierarchical``: the first member leads: it splits the task (a structured call),
  the parts go to members in parallel (``Send``), failed parts are split again up to
  ``max_rounds`` times, and the lead integrates the results in a turn of its own.
* ``broadcast``: every member does the task independently, in parallel; a vote
  (strict majority of the completed results, on the artifact ``answer`` or else the
  summary) or, without a majority, a merge by the model; the agreement is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from aimegraph.config import AimeConfig
from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.nodes.memory import make_task_record_node
from aimegraph.nodes.teams import broadcast, hierarchical, joint, sequential
from aimegraph.nodes.teams.common import (
    MODES,
    Conclude,
    TeamBuilder,
    TeamParts,
    TeamState,
    make_finish_node,
)
from aimegraph.nodes.verifier import make_task_check_node
from aimegraph.state import (
    ActorInput,
    ActorOutput,
    TeamMode,
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
    """Wire ``mode``'s graph from ``parts`` (see the module docstring)."""
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
