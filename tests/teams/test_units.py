"""Agent units through ``build_aime_graph(agents=...)``: the planner sees and assigns
them (unknown names go back to it), the matcher picks one for a task naming none
(its scores in the ActorSpec), a unit's own model, the checklist and drawing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aimegraph import AgentUnit, AimeConfig, Task, build_aime_graph, draw
from aimegraph.graphs import build_team_executor
from aimegraph.models import ScriptedChatModel
from aimegraph.nodes import DefaultActorFactory
from aimegraph.nodes.actor_factory import UnitActorFactory
from aimegraph.state import render_checklist
from aimegraph.teams import AgentRegistry, UnitMatcher
from aimegraph.tools import default_registry
from tests.scripted import plan, submit
from tests.teams.helpers import UNITS


def run(workspace: Path, scenario: dict[str, Any], **config: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel.from_dict({"reporter": [{"text": "{all_results}"}], **scenario})
    graph = build_aime_graph(model, agents=UNITS, config=AimeConfig(workspace=workspace, **config))
    return graph.invoke({"goal": "Report the Q3 total"}), model


def test_planner_sees_the_units_and_unknown_names_go_back_to_it(workspace: Path) -> None:
    bad = plan(
        {
            "id": "t1",
            "title": "Write",
            "team": {"mode": "sequential", "members": ["writer", "editor"]},
        }
    )
    good = plan(
        {
            "id": "t1",
            "title": "Write",
            "team": {"mode": "sequential", "members": ["writer", "reviewer"]},
        },
        {"id": "t2", "title": "Sum", "agent": "analyst", "dependencies": ["t1"]},
    )
    scenario = {
        "planner": [bad, good],
        "actors": {
            "t1/writer": [submit("draft")],
            "t1/reviewer": [submit("ok")],
            "t2": [submit("48213")],
        },
    }
    out, model = run(workspace, scenario)
    assert out["status"] == "succeeded"
    first, repair = model.prompts("planner")
    assert "- reviewer: Reviews drafts" in first and "(tools: compute)" in first
    assert "unknown agent units ['editor']" in repair
    tasks = out["tasks"]
    assert tasks["t1"].team is not None and [m.member for m in tasks["t1"].members] == [
        "writer",
        "reviewer",
    ]
    assert tasks["t2"].agent == "analyst" and tasks["t2"].members == ()
    # The analyst's actor: its persona and its compute bundle.
    (analyst,) = [p for p in model.prompts("actor") if '<task id="t2"' in p]
    assert "You are a quantitative analyst." in analyst and "calculator, python" in analyst
    checklist = render_checklist(tasks)
    assert "- [x] t1: Write\n  - team (sequential): [x] writer, [x] reviewer" in checklist
    assert "- [x] t2: Sum (after t1) [agent analyst]" in checklist


def test_planner_schema_has_team_fields_only_with_units(workspace: Path) -> None:
    scenario = {"planner": [plan({"id": "t1", "title": "Sum", "agent": "analyst"})]}
    model = ScriptedChatModel.from_dict(scenario)
    plain = build_aime_graph(model, config=AimeConfig(workspace=workspace))
    out = plain.invoke({"goal": "g"})
    # Without units the field is not in the schema, so the planner's value is dropped.
    assert out["tasks"]["t1"].agent is None
    assert "Agent units" not in model.prompts("planner")[0]


def test_matcher_picks_the_unit_and_shows_its_scores(workspace: Path) -> None:
    registry = default_registry(workspace)
    units = AgentRegistry(UNITS, tools=registry)
    factory = UnitActorFactory(
        DefaultActorFactory(registry, workspace=workspace), units, UnitMatcher(units)
    )
    task = Task(
        id="t1", title="Review the draft", description="Check every figure and claim for errors."
    )
    spec = factory.build(task, "goal", {})
    assert spec.unit == "reviewer"
    names = [name for name, _ in spec.unit_scores]
    assert names[0] == "reviewer" and sorted(names) == ["analyst", "reviewer", "writer"]
    assert spec.unit_scores[0][1] > spec.unit_scores[1][1]
    assert spec.persona == "You are a sceptical reviewer."
    # A named unit wins over the matcher, and no scores are needed.
    named = factory.build(task.model_copy(update={"agent": "writer"}), "goal", {})
    assert (named.unit, named.unit_scores) == ("writer", ())
    # Nothing similar: no unit, the default actor, the scores still shown.
    other = factory.build(Task(id="t2", title="Zzz qqq"), "goal", {})
    assert other.unit is None and other.persona == DefaultActorFactory(
        registry, workspace=workspace
    ).persona(Task(id="t2", title="Zzz qqq"))


def test_unassigned_task_runs_as_the_matched_unit_and_says_so_in_the_stream(
    workspace: Path,
) -> None:
    scenario = {
        "planner": [
            plan(
                {
                    "id": "t1",
                    "title": "Review the draft",
                    "description": "Check every figure and claim.",
                }
            )
        ],
        "actors": {"t1": [submit("two errors found")]},
        "reporter": [{"text": "{all_results}"}],
    }
    model = ScriptedChatModel.from_dict(scenario)
    graph = build_aime_graph(model, agents=UNITS, config=AimeConfig(workspace=workspace))
    started = [
        event
        for _, event in graph.stream({"goal": "g"}, stream_mode="custom", subgraphs=True)
        if event.get("type") == "actor" and event.get("event") == "started"
    ]
    assert [e["unit"] for e in started] == ["reviewer"]
    assert "You are a sceptical reviewer." in model.prompts("actor")[0]


def test_unit_with_its_own_model_runs_on_it(workspace: Path) -> None:
    own = ScriptedChatModel.from_dict(
        {"planner": [{"tasks": []}], "actors": {"t1/analyst": [submit("exact: 48213")]}}
    )
    units = [*UNITS[:2], UNITS[2].model_copy(update={"model": own})]
    scenario = {
        "planner": [
            plan(
                {
                    "id": "t1",
                    "title": "Sum",
                    "team": {"mode": "broadcast", "members": ["analyst", "writer"]},
                }
            )
        ],
        "actors": {"t1/writer": [submit("about 48k", answer="48000")]},
        "team_merges": {"t1": [{"summary": "48213", "answer": "48213", "agreeing": ["analyst"]}]},
    }
    model = ScriptedChatModel.from_dict({"reporter": [{"text": "{all_results}"}], **scenario})
    graph = build_aime_graph(model, agents=units, config=AimeConfig(workspace=workspace))
    out = graph.invoke({"goal": "g"})
    assert len(own.prompts("actor")) == 1 and '<member name="analyst"' in own.prompts("actor")[0]
    assert all("analyst" not in p.split("<member name=")[1][:12] for p in model.prompts("actor"))
    assert out["tasks"]["t1"].result.artifacts["answer"] == "48213"
    # A unit with its own model doing a task alone: a team of one, on its model.
    alone = ScriptedChatModel.from_dict(
        {"planner": [{"tasks": []}], "actors": {"t1/analyst": [submit("48213")]}}
    )
    units = [UNITS[0], UNITS[2].model_copy(update={"model": alone})]
    scenario = {
        "planner": [plan({"id": "t1", "title": "Sum", "agent": "analyst"})],
        "reporter": [{"text": "x"}],
    }
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(scenario), agents=units, config=AimeConfig(workspace=workspace)
    )
    out = graph.invoke({"goal": "g"})
    assert out["tasks"]["t1"].result.summary == "48213" and len(alone.prompts("actor")) == 1


def test_units_are_checked_when_the_graph_is_built(workspace: Path) -> None:
    with pytest.raises(ValueError, match="unknown tool bundles"):
        build_aime_graph(
            "scripted:demo",
            agents=[AgentUnit(name="x", description="d", tool_bundles=("nope",))],
            config=AimeConfig(workspace=workspace),
        )
    with pytest.raises(ValueError, match="two agent units"):
        build_aime_graph(
            "scripted:demo", agents=[UNITS[0], UNITS[0]], config=AimeConfig(workspace=workspace)
        )
    with pytest.raises(ValueError):
        AgentUnit(name="has space", description="d")


@pytest.mark.parametrize("scheduler", ["eager", "batch"])
def test_draw_xray_shows_the_team_subgraphs(workspace: Path, scheduler: str) -> None:
    # Under "eager" the executor node is a runner calling the team executor; LangGraph
    # still sees that graph as the node's subgraph.
    config = AimeConfig(workspace=workspace, scheduler=scheduler)
    graph = build_aime_graph("scripted:demo", agents=UNITS, config=config)
    nodes = set(graph.get_graph(xray=2).nodes)
    for mode in ("sequential", "joint", "hierarchical", "broadcast"):
        assert f"executor:{mode}:member" in nodes and f"executor:{mode}:finish" in nodes
    assert {"executor:single:react", "executor:hierarchical:split"} <= nodes
    # xray=3 opens a member's turn: the actor's own ReAct loop.
    assert "executor:sequential:member:react" in set(graph.get_graph(xray=3).nodes)
    text = draw(graph, xray=2, format="mermaid").source
    assert "executor\\3ahierarchical\\3asplit" in text
    executor = build_team_executor("scripted:demo", agents=UNITS, config=config)
    assert {"broadcast:aggregate", "joint:member", "single:react"} <= set(
        executor.get_graph(xray=1).nodes
    )


def test_prompt_overrides_reach_every_member(workspace: Path) -> None:
    from aimegraph.prompts import DEFAULT_PROMPTS

    actor = DEFAULT_PROMPTS["actor"].replace(
        "# Role: actor\n", "# Role: actor\nHOUSE STYLE: terse.\n"
    )
    scenario = {
        "planner": [
            plan(
                {
                    "id": "t1",
                    "title": "Write",
                    "team": {"mode": "broadcast", "members": ["writer", "reviewer"]},
                }
            )
        ],
        "actors": {
            "t1/writer": [submit("x", answer="1")],
            "t1/reviewer": [submit("y", answer="1")],
        },
        "reporter": [{"text": "{all_results}"}],
    }
    model = ScriptedChatModel.from_dict(scenario)
    graph = build_aime_graph(
        model, agents=UNITS, config=AimeConfig(workspace=workspace), prompts={"actor": actor}
    )
    assert graph.invoke({"goal": "g"})["status"] == "succeeded"
    prompts = model.prompts("actor")
    assert len(prompts) == 2 and all("HOUSE STYLE: terse." in p for p in prompts)


def test_units_sharing_a_model_share_one_member_graph(workspace: Path) -> None:
    from aimegraph.graphs.team import team_parts

    planner = ScriptedChatModel.from_dict({"planner": [{"tasks": []}]})
    units = [
        AgentUnit(name="a", description="A.", model="scripted:demo"),
        AgentUnit(name="b", description="B.", model="scripted:demo"),
        AgentUnit(name="c", description="C.", model="planner"),
        AgentUnit(name="d", description="D."),
    ]
    parts = team_parts(
        "scripted:demo",
        agents=units,
        config=AimeConfig(workspace=workspace),
        models={"planner": planner},
    )
    # One resolved model per distinct spec; a role key names the graph's role model.
    assert parts.chat_of["a"] is parts.chat_of["b"] and parts.chat_of["c"] is planner
    assert parts.node_of == {"a": "member_a", "b": "member_a", "c": "member_c", "d": "member"}
    assert set(parts.member_graphs) == {"member", "member_a", "member_c"}
