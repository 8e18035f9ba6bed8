"""Tool steps (issue 34 point 1): a task whose plan gives its call (``TaskSpec.call``)
runs that call with no model call, through an actor's tool path (approval and edits,
time limits, kept outputs, usage); its output is the result and references to its
dependencies' results are filled in. Problems come back as plan errors or failed
tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.conftest import GraphFactory
from tests.scripted import plan, spec

from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.state import plan_update_schema, render_checklist

calls: list[tuple[str, dict[str, Any]]] = []


@tool
def lookup(city: str) -> str:
    """The weather record of a city, as JSON."""
    calls.append(("lookup", {"city": city}))
    return json.dumps({"city": city, "temp": {"max": 21, "min": 9}, "tags": ["dry", "mild"]})


@tool
def advise(temp: int, note: str = "") -> str:
    """Advice for a maximum temperature."""
    calls.append(("advise", {"temp": temp, "note": note}))
    return f"{'coat' if temp < 15 else 'shirt'} ({note})"


@tool
def fail_always(x: str) -> str:
    """Always fails."""
    calls.append(("fail_always", {"x": x}))
    raise ValueError("the service is down")


TOOLS = [lookup, advise, fail_always]


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    calls.clear()


def step(id: str, tool: str, *deps: str, **args: Any) -> dict[str, Any]:
    return spec(id, *deps, call={"tool": tool, "args": args})


CHAIN = plan(
    step("t1", "lookup", city="Oslo"),
    step("t2", "advise", "t1", temp="$t1.temp.max", note="${t1.city}: $t1.tags.0, $$5"),
)


def by_role(out: dict[str, Any], role: str) -> int:
    used = out["usage"].by_role.get(role)
    return used.llm_calls if used is not None else 0


@pytest.mark.parametrize(
    ("scheduler", "tool_calling"), [("eager", "native"), ("batch", "native"), ("eager", "json")]
)
def test_a_chain_of_tool_steps_runs_with_no_actor_call_and_fills_in_references(
    scripted_graph: GraphFactory, scheduler: str, tool_calling: str
) -> None:
    graph, model = scripted_graph(
        {"planner": [CHAIN], "reporter": [{"text": "{all_results}"}]},
        tools=TOOLS,
        scheduler=scheduler,
        tool_calling=tool_calling,
        verify="off",
    )
    out = graph.invoke({"goal": "What to wear in Oslo?"})
    assert out["status"] == "succeeded"
    assert calls == [
        ("lookup", {"city": "Oslo"}),
        ("advise", {"temp": 21, "note": "Oslo: dry, $5"}),  # a whole reference keeps its type
    ]
    assert out["tasks"]["t2"].result.summary == "shirt (Oslo: dry, $5)"
    assert "- [x] t2: Task t2 (after t1) [calls advise]" in render_checklist(out["tasks"])
    assert json.loads(out["tasks"]["t1"].result.summary)["city"] == "Oslo"
    assert by_role(out, "actor") == 0
    assert out["usage"].by_role["tool_step"].tool_calls == 2
    assert out["usage"].by_task["t2"].tool_calls == 1 and out["usage"].by_task["t2"].llm_calls == 0
    if tool_calling == "json":  # the schema in the planner's prompt has the tool step
        assert (
            '"call"' in model.prompts("planner")[0]
            and "ToolCallSpec" in model.prompts("planner")[0]
        )


def test_the_planner_schema_carries_the_call_of_a_tool_step() -> None:
    schema = plan_update_schema(8, first=True).model_json_schema()
    call = schema["$defs"]["ToolCallSpec"]
    assert set(call["properties"]) == {"tool", "args"} and call["required"] == ["tool"]
    spec_fields = schema["$defs"]["TaskSpec"]["properties"]
    assert "call" in spec_fields


def test_a_tool_step_names_a_tool_by_its_whole_long_name(scripted_graph: GraphFactory) -> None:
    @tool
    def get_dietary_restrictions_for_all_restaurants(city: str) -> str:
        """Dietary restrictions per restaurant (a name of 44 characters, as AgentDojo's)."""
        return f"{city}: vegan at Chez Nous"

    graph, _ = scripted_graph(
        {
            "planner": [
                plan(step("t1", "get_dietary_restrictions_for_all_restaurants", city="Paris"))
            ],
            "reporter": [{"text": "{all_results}"}],
        },
        tools=[get_dietary_restrictions_for_all_restaurants],
        verify="off",
    )
    out = graph.invoke({"goal": "Which restaurants in Paris are vegan?"})
    assert out["status"] == "succeeded"
    assert out["tasks"]["t1"].result.summary == "Paris: vegan at Chez Nous"


def test_a_tool_step_and_an_actor_task_mix_in_one_plan(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(step("t1", "lookup", city="Rome"), spec("t2", "t1"))],
            "actors": {"t2": [{"text": "Rome is warm: {dep:t1}"}]},
            "reporter": [{"text": "{all_results}"}],
        },
        tools=TOOLS,
        verify="off",
    )
    out = graph.invoke({"goal": "Rome weather"})
    assert out["status"] == "succeeded"
    assert calls == [("lookup", {"city": "Rome"})]
    assert by_role(out, "actor") == 1


@pytest.mark.parametrize(
    ("bad_step", "says"),
    [
        (step("t1", "teleport", to="Mars"), "calls unknown tool 'teleport'"),
        (step("t1", "advise", temp="hot"), "temp: Input should be a valid integer"),
        (step("t1", "advise", note="x"), "temp: Field required"),
        (step("t1", "lookup", city="Oslo", country="NO"), "unknown arguments ['country']"),
        (step("t1", "lookup", city="$t0"), "references to $t0, which are not among its"),
    ],
)
def test_a_tool_step_that_cannot_run_is_a_plan_error_sent_back_to_the_planner(
    scripted_graph: GraphFactory, bad_step: dict[str, Any], says: str
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [plan(bad_step), plan(step("t1", "lookup", city="Oslo"))],
            "reporter": [{"text": "{all_results}"}],
        },
        tools=TOOLS,
        verify="off",
    )
    out = graph.invoke({"goal": "weather"})
    assert out["status"] == "succeeded"
    repair = model.prompts("planner")[1]
    assert says in repair
    assert calls == [("lookup", {"city": "Oslo"})]  # the bad step never ran


def test_a_reference_the_result_lacks_fails_the_task_then_replans(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [
                plan(
                    step("t1", "lookup", city="Oslo"), step("t2", "advise", "t1", temp="$t1.wind")
                ),
                plan(step("t3", "advise", "t1", temp="$t1.temp.min")),
            ],
            "reporter": [{"text": "{all_results}"}],
        },
        tools=TOOLS,
        verify="off",
        task_retries=0,
    )
    out = graph.invoke({"goal": "weather"})
    assert out["status"] == "succeeded"
    failed = out["tasks"]["t2"]
    assert failed.status == "skipped" and failed.result is not None
    assert "$t1.wind: no field 'wind'" in failed.result.summary
    assert "(fields: city, temp, tags)" in failed.result.summary
    assert "$t1.wind: no field 'wind'" in model.prompts("planner")[1]  # the replan's reason
    assert [name for name, _ in calls] == ["lookup", "advise"]  # t2 made no call
    assert calls[1][1]["temp"] == 9


def test_a_failing_tool_step_is_retried_then_replanned_and_its_dependent_never_runs(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [
                plan(step("t1", "fail_always", x="a"), step("t2", "advise", "t1", temp="$t1")),
                plan(step("t3", "lookup", city="Oslo"), drop=("t2",)),
            ],
            "reporter": [{"text": "{all_results}"}],
        },
        tools=TOOLS,
        verify="off",
        task_retries=1,
    )
    out = graph.invoke({"goal": "weather"})
    assert out["status"] == "succeeded"
    assert [name for name, _ in calls] == ["fail_always", "fail_always", "lookup"]
    t1 = out["tasks"]["t1"]
    assert t1.attempts == 2 and "the service is down" in t1.result.summary
    assert out["tasks"]["t2"].status == "skipped" and out["tasks"]["t2"].result is None
    assert "the service is down" in model.prompts("planner")[1]


def test_a_long_output_is_kept_as_a_file_named_in_the_result(
    scripted_graph: GraphFactory, workspace: Path
) -> None:
    @tool
    def dump(n: int) -> str:
        """Many lines."""
        return "\n".join(f"line {i}" for i in range(n))

    graph, _ = scripted_graph(
        {"planner": [plan(step("t1", "dump", n=2000))], "reporter": [{"text": "ok"}]},
        tools=[dump],
        verify="off",
        max_observation_chars=500,
    )
    out = graph.invoke({"goal": "dump"})
    result = out["tasks"]["t1"].result
    kept = workspace / result.artifacts["output_file"]
    assert kept.read_text().endswith("line 1999") and len(result.summary) < 1000


# --- approval ---

CONFIG = thread_config("tool-step-approval")


def approving(scripted_graph: GraphFactory) -> tuple[Any, Any]:
    graph, model = scripted_graph(
        {"planner": [CHAIN, plan(drop=("t2",))], "reporter": [{"text": "{all_results}"}]},
        tools=TOOLS,
        checkpointer=InMemorySaver(serde=make_serializer()),
        approve_tools=["advise"],
        verify="off",
        task_retries=0,
    )
    graph.invoke({"goal": "What to wear in Oslo?"}, CONFIG)
    (pause,) = graph.get_state(CONFIG).interrupts
    assert pause.value["task_id"] == "t2" and pause.value["args"]["temp"] == 21
    return graph, model


def test_a_tool_step_waits_for_approval_and_runs_with_the_humans_edit(
    scripted_graph: GraphFactory,
) -> None:
    graph, _ = approving(scripted_graph)
    assert [name for name, _ in calls] == ["lookup"]
    edit = {"type": "edit", "edited_action": {"name": "advise", "args": {"temp": 3}}}
    out = graph.invoke(Command(resume={"decisions": [edit]}), CONFIG)
    assert out["status"] == "succeeded"
    assert calls == [("lookup", {"city": "Oslo"}), ("advise", {"temp": 3, "note": ""})]
    t2 = out["tasks"]["t2"]
    assert t2.result.summary == "coat ()"  # the output alone, without the edit note
    edited = [u for u in out["updates"] if u.task_id == "t2" and u.status == "edited"]
    assert edited and '"temp": 3' in edited[0].message


def test_a_rejected_tool_step_fails_with_the_reason_and_is_replanned(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = approving(scripted_graph)
    reject = {"type": "reject", "message": "not today"}
    out = graph.invoke(Command(resume={"decisions": [reject]}), CONFIG)
    t2 = out["tasks"]["t2"]
    assert t2.status == "skipped" and t2.result is not None and t2.result.status == "failed"
    assert "The human denied this call to advise: not today" in t2.result.summary
    assert "not today" in model.prompts("planner")[1]
    assert [name for name, _ in calls] == ["lookup"]
