"""A hierarchical team on the bundled Gemma 3 270M (extra ``[local]``): the lead's
structured split and the members' turns run against a real model, and whatever it
replies, the team ends with the task settled and a reason, its calls counted."""

from __future__ import annotations

from pathlib import Path

from aimegraph import AgentUnit, AimeConfig, Task, TeamSpec
from aimegraph.graphs import build_team_graph
from tests.markers import LOCAL_LLM

pytestmark = LOCAL_LLM


def test_hierarchical_team_on_the_local_model_ends_as_data(workspace: Path) -> None:
    units = [
        # Both units name their tools: a unit naming none is given the bundles its task's
        # words match, which may include ask_human, and an unattended invoke then pauses.
        AgentUnit(
            name="lead",
            description="Leads the team and writes the answer.",
            tool_bundles=("compute",),
        ),
        AgentUnit(name="math", description="Does arithmetic.", tool_bundles=("compute",)),
    ]
    config = AimeConfig(workspace=workspace, max_actor_steps=2, max_output_retries=1)
    graph = build_team_graph("hierarchical", "local", agents=units, config=config)
    team = TeamSpec(mode="hierarchical", members=("lead", "math"))
    task = Task(id="t1", title="Compute 6 x 7 and state the product", team=team)
    out = graph.invoke({"goal": "What is 6 x 7?", "task": task, "dependency_results": {}})
    assert "__interrupt__" not in out, out["__interrupt__"]

    settled = out["tasks"]["t1"]
    assert settled.status in ("completed", "failed") and settled.result is not None
    assert settled.result.summary.strip()
    # The lead's split was asked for, and at least the lead's own turn ran.
    assert out["usage"].by_role["team"].llm_calls >= 1
    assert out["usage"].by_role["actor"].llm_calls >= 1
    assert any(turn.role == "lead" for turn in settled.members)
