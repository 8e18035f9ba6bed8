"""Node factories, one module per role. Each factory closes over its model, tools
and config and returns a plain ``(state, runtime)`` function for a StateGraph."""

from aimegraph.nodes.actor import make_assemble_node, make_conclude_node, make_react_node
from aimegraph.nodes.actor_factory import ActorFactory, ActorSpec, DefaultActorFactory
from aimegraph.nodes.orchestrator import make_orchestrator_node
from aimegraph.nodes.planner import make_draft_node, make_give_up_node, make_validate_node
from aimegraph.nodes.reporter import make_reporter_node
from aimegraph.nodes.verifier import make_judge_node, make_task_check_node

__all__ = [
    "ActorFactory",
    "ActorSpec",
    "DefaultActorFactory",
    "make_assemble_node",
    "make_conclude_node",
    "make_draft_node",
    "make_give_up_node",
    "make_judge_node",
    "make_orchestrator_node",
    "make_react_node",
    "make_reporter_node",
    "make_task_check_node",
    "make_validate_node",
]
