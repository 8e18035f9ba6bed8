"""Helpers for the team tests: scripted steps, units, and a team graph on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aimegraph import AimeConfig
from aimegraph.graphs import build_team_graph
from aimegraph.models import ScriptedChatModel
from aimegraph.state import Task, TeamSpec
from aimegraph.teams import AgentUnit

UNITS = [
    AgentUnit(
        name="writer",
        description="Writes clear reports and prose from notes and figures.",
        persona="You are a precise technical writer.",
    ),
    AgentUnit(
        name="reviewer",
        description="Reviews drafts: checks every figure and claim, finds errors.",
        persona="You are a sceptical reviewer.",
    ),
    AgentUnit(
        name="analyst",
        description="Computes statistics and sums with exact arithmetic over data.",
        persona="You are a quantitative analyst.",
        tool_bundles=("compute",),
    ),
]


def boom(message: str = "model down") -> dict[str, Any]:
    """A step whose model call fails for good: the member's turn fails."""
    return {"error": "fatal", "message": message}


def team_task(mode: str, *members: str, max_rounds: int = 3, **fields: Any) -> Task:
    team = TeamSpec(mode=mode, members=members, max_rounds=max_rounds)  # type: ignore[arg-type]
    return Task(id="t1", title="Report the total", team=team, status="in_progress", **fields)


def run_team(
    workspace: Path,
    task: Task,
    scenario: dict[str, Any],
    *,
    units: list[AgentUnit] | None = None,
    **config: Any,
) -> tuple[dict[str, Any], ScriptedChatModel]:
    """Run ``task``'s team mode graph on its own over a scripted model."""
    model = ScriptedChatModel.from_dict({"planner": [{"tasks": []}], **scenario})
    assert task.team is not None
    graph = build_team_graph(
        task.team.mode,
        model,
        agents=units or UNITS,
        config=AimeConfig(workspace=workspace, **config),
    )
    out = graph.invoke({"goal": "Report the total", "task": task, "dependency_results": {}})
    return out, model
