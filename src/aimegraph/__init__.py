"""aimegraph: AIME-style multi-agent workflows as LangGraph graphs.

from aimegraph import build_aime_graph, AimeConfig
graph = build_aime_graph("scripted:demo", config=AimeConfig(max_parallel=4))
out = graph.invoke({"goal": "..."}, {"configurable": {"thread_id": "t1"}})
out["final_answer"], out["status"], out["tasks"], out["verdict"]
aimegraph.eval("bundled", model="openai:gpt-4o-mini", systems=["aimegraph", "create_agent"])
"""

from aimegraph import eval  # the package; aimegraph.eval(...) runs an eval (DESIGN.md s. 17)
from aimegraph.checkpoints.lease import ThreadBusyError, hold_thread
from aimegraph.config import AimeConfig, WebConfig
from aimegraph.drawing import draw, draw_plan
from aimegraph.eval.optimize import OptimizeResult, optimize
from aimegraph.graphs import (
    build_actor_graph,
    build_aime_graph,
    build_planner_graph,
    build_verifier_graph,
)
from aimegraph.nodes import ActorFactory, ActorSpec, DefaultActorFactory
from aimegraph.optimizer import PromptStore
from aimegraph.state import (
    AimeState,
    MemberResult,
    PlanUpdate,
    ProgressUpdate,
    Task,
    TaskResult,
    TaskSpec,
    TeamSpec,
    Usage,
    Verdict,
    render_checklist,
)
from aimegraph.teams.units import AgentUnit
from aimegraph.tools import ToolRegistry, default_registry

__all__ = [
    "ActorFactory",
    "ActorSpec",
    "AgentUnit",
    "AimeConfig",
    "AimeState",
    "DefaultActorFactory",
    "MemberResult",
    "OptimizeResult",
    "PlanUpdate",
    "ProgressUpdate",
    "PromptStore",
    "Task",
    "TaskResult",
    "TaskSpec",
    "TeamSpec",
    "ThreadBusyError",
    "ToolRegistry",
    "Usage",
    "Verdict",
    "WebConfig",
    "build_actor_graph",
    "build_aime_graph",
    "build_planner_graph",
    "build_verifier_graph",
    "default_registry",
    "draw",
    "draw_plan",
    "hold_thread",
    "eval",
    "optimize",
    "render_checklist",
]
