"""Predefined plans (issue 34 point 3): ``build_aime_graph(plan=...)`` and the invoke
input ``plan`` start a run from a given plan, checked like the planner's, with no
planner call; failures still replan through the planner model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from tests.scripted import plan, spec

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.state import PlanError, PlanUpdate

ran: list[str] = []


@tool
def shout(text: str) -> str:
    """The text in capitals."""
    ran.append(text)
    if text == "boom":
        raise ValueError("cannot shout boom")
    return text.upper()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def step(id: str, text: str, *deps: str) -> dict[str, Any]:
    return spec(id, *deps, call={"tool": "shout", "args": {"text": text}})


GIVEN = plan(step("a", "hello"), spec("b", "a"))
SCENARIO = {
    "planner": [plan(spec("p1"), drop=("b",))],  # only for a replan
    "actors": {"b": [{"text": "b saw {dep:a}"}], "p1": [{"text": "p1 done"}]},
    "reporter": [{"text": "{all_results}"}],
}


def build(workspace: Path, *, scenario: dict[str, Any] = SCENARIO, **kwargs: Any) -> Any:
    model = ScriptedChatModel.from_dict(scenario)
    config = AimeConfig(workspace=workspace, verify="off", task_retries=0)
    return build_aime_graph(model, tools=[shout], config=config, **kwargs), model


def planner_calls(out: dict[str, Any]) -> int:
    used = out["usage"].by_role.get("planner")
    return used.llm_calls if used is not None else 0


@pytest.mark.parametrize(
    "given",
    [
        PlanUpdate.model_validate(GIVEN),
        GIVEN,
        GIVEN["tasks"],  # a list of task specs
        "file",
    ],
    ids=["PlanUpdate", "dict", "list", "yaml-file"],
)
def test_a_graph_built_with_a_plan_runs_it_with_no_planner_call(
    workspace: Path, tmp_path: Path, given: Any
) -> None:
    if given == "file":
        given = tmp_path / "plan.yaml"
        given.write_text(json.dumps(GIVEN))  # JSON is YAML
    graph, model = build(workspace, plan=given)
    out = graph.invoke({"goal": "greet"})
    assert out["status"] == "succeeded"
    assert model.prompts("planner") == [] and planner_calls(out) == 0
    assert ran == ["hello"]
    assert out["tasks"]["b"].result.summary == "b saw HELLO"


def test_the_invoke_input_plan_is_used_once_and_before_the_graphs_own(workspace: Path) -> None:
    graph, model = build(workspace, plan=GIVEN, checkpointer=InMemorySaver(serde=make_serializer()))
    config = thread_config("given")
    out = graph.invoke({"goal": "greet", "plan": [step("x", "input plan")]}, config)
    assert out["status"] == "succeeded" and ran == ["input plan"]
    assert set(out["tasks"]) == {"x"} and model.prompts("planner") == []
    assert graph.get_state(config).values.get("plan") is None  # taken
    # The next run on the thread gets the graph's plan again: no planner call either.
    out = graph.invoke({"goal": "greet again"}, config)
    assert out["status"] == "succeeded" and ran == ["input plan", "hello"]
    assert model.prompts("planner") == []


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ([step("a", "hi"), spec("b", "zz")], "depends on unknown task 'zz'"),
        ([step("a", "hi"), {"id": "c", "title": "C", "call": {"tool": "nope"}}], "unknown tool"),
        ({"tasks": "a"}, "tasks: Input should be a valid list"),
    ],
)
def test_an_invalid_input_plan_fails_the_run_before_anything_runs(
    workspace: Path, bad: Any, says: str
) -> None:
    graph, model = build(workspace)
    out = graph.invoke({"goal": "greet", "plan": bad})
    assert out["status"] == "failed"
    assert out["reason"].startswith("the given plan is invalid: ") and says in out["reason"]
    assert ran == [] and model.prompts("planner") == [] and not out.get("tasks")


def test_an_input_plan_with_a_misspelled_field_is_refused(workspace: Path) -> None:
    graph, _ = build(workspace)
    out = graph.invoke({"goal": "greet", "plan": [{"id": "a", "title": "A", "dependecies": []}]})
    assert out["status"] == "failed"
    assert "unknown field 'dependecies' (did you mean 'dependencies'?)" in out["reason"]


def test_a_misspelled_field_of_a_tool_steps_call_names_the_call_and_its_task(
    workspace: Path,
) -> None:
    graph, _ = build(workspace)
    bad = [{"id": "t2", "title": "A", "call": {"tool": "shout", "argz": {}}}]
    out = graph.invoke({"goal": "greet", "plan": bad})
    assert out["status"] == "failed"
    said = "the call of task 't2' has an unknown field 'argz' (did you mean 'args'?)"
    assert said in out["reason"] and "''" not in out["reason"]


def test_an_invalid_plan_given_to_the_builder_is_refused_there(workspace: Path) -> None:
    with pytest.raises(PlanError, match="calls unknown tool 'nope'"):
        build(workspace, plan=[{"id": "a", "title": "A", "call": {"tool": "nope"}}])
    with pytest.raises(PlanError, match="cannot read the plan file"):
        build(workspace, plan=workspace / "missing.yaml")


def test_a_failure_in_a_given_plan_is_replanned_by_the_planner_model(workspace: Path) -> None:
    graph, model = build(workspace, plan=plan(step("a", "boom"), spec("b", "a")))
    out = graph.invoke({"goal": "greet"})
    assert out["status"] == "succeeded"
    assert ran == ["boom"]
    assert planner_calls(out) == 1
    (replan,) = model.prompts("planner")
    assert "cannot shout boom" in replan
    assert out["tasks"]["p1"].status == "completed"


def test_a_given_plan_waits_for_approval_when_plans_need_it(workspace: Path) -> None:
    graph, model = build(workspace, plan=GIVEN, checkpointer=InMemorySaver(serde=make_serializer()))
    config = thread_config("approve")
    graph.invoke({"goal": "greet"}, config, context={"approve_plan": True})
    (pause,) = graph.get_state(config).interrupts
    assert pause.value["kind"] == "approve_plan" and ran == []
    assert model.prompts("planner") == []
