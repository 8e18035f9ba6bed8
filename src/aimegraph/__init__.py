"""aimegraph: AIME-style multi-agent workflows as LangGraph graphs.

from aimegraph import build_aime_graph, AimeConfig
graph = build_aime_graph("scripted:demo", config=AimeConfig(max_parallel=4))
out = graph.invoke({"goal": "..."}, {"configurable": {"thread_id": "t1"}})
out["final_answer"], out["status"], out["tasks"], out["verdict"]
aimegraph.evaluate("bundled", model="openai:gpt-4o-mini", systems=["aimegraph", "create_agent"])

Every name below is imported on first use: ``import aimegraph`` loads none of the
engine, and the evaluation harness, drawing and the optimiser load only when asked for.
"""

from typing import TYPE_CHECKING

from aimegraph.lazy import lazy_exports

if TYPE_CHECKING:
    from aimegraph.checkpoints.lease import ThreadBusyError, hold_thread
    from aimegraph.config import AimeConfig, WebConfig
    from aimegraph.drawing import draw, draw_plan
    from aimegraph.eval.harness import evaluate
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

_HOMES = {
    "ThreadBusyError": ".checkpoints.lease",
    "hold_thread": ".checkpoints.lease",
    "AimeConfig": ".config",
    "WebConfig": ".config",
    "draw": ".drawing",
    "draw_plan": ".drawing",
    "OptimizeResult": ".eval.optimize",
    "optimize": ".eval.optimize",
    "evaluate": ".eval.runner",
    **dict.fromkeys(
        ["build_actor_graph", "build_aime_graph", "build_planner_graph", "build_verifier_graph"],
        ".graphs",
    ),
    **dict.fromkeys(["ActorFactory", "ActorSpec", "DefaultActorFactory"], ".nodes"),
    "PromptStore": ".optimizer",
    **dict.fromkeys(
        [
            "AimeState",
            "MemberResult",
            "PlanUpdate",
            "ProgressUpdate",
            "Task",
            "TaskResult",
            "TaskSpec",
            "TeamSpec",
            "Usage",
            "Verdict",
            "render_checklist",
        ],
        ".state",
    ),
    "AgentUnit": ".teams.units",
    "ToolRegistry": ".tools",
    "default_registry": ".tools",
}

# `eval` is not listed: `from aimegraph import *` must not shadow the builtin. The
# package stays reachable as `aimegraph.eval` (a submodule, imported on first access).
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
    "evaluate",
    "hold_thread",
    "optimize",
    "render_checklist",
]

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
