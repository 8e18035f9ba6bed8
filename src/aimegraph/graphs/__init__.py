"""Graph builders: each returns a compiled LangGraph graph, usable on its own or as a node."""

from aimegraph.graphs.actor import build_actor_graph
from aimegraph.graphs.aime import build_aime_graph
from aimegraph.graphs.parts import GraphParts
from aimegraph.graphs.planner import build_planner_graph
from aimegraph.graphs.team import build_team_executor, build_team_graph
from aimegraph.graphs.verifier import build_verifier_graph

__all__ = [
    "GraphParts",
    "build_actor_graph",
    "build_aime_graph",
    "build_planner_graph",
    "build_team_executor",
    "build_team_graph",
    "build_verifier_graph",
]
