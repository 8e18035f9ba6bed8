"""Planner and verifier replies shaped like those of real models (issue 10, items 3, 7-10):
transient errors on a re-ask, restated plans, unusable replies, extra fields, bounds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.conftest import GraphFactory
from tests.scripted import plan, spec

from aimegraph.models import calls
from aimegraph.state import PlanError, PlanUpdate, Task, TaskSpec, Verdict, apply_plan
from aimegraph.state.models import plan_update_schema

NO_TOOL_CALL = {"text": "Sure! I will plan this carefully."}
CONNECTION_RESET = {"error": "connection", "message": "connection reset by peer"}


@pytest.fixture
def fast_in_place_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's retry policy without its waits (same attempts, same classification)."""
    fast = calls.LLM_RETRY_POLICY._replace(initial_interval=0.001, max_interval=0.001, jitter=False)
    monkeypatch.setattr(calls, "LLM_RETRY_POLICY", fast)


# --------------------------------------------------------------------------- item 3


@pytest.mark.parametrize("mode", ["native", "json"])
def test_a_transient_error_on_the_planners_re_ask_is_retried(
    scripted_graph: GraphFactory, fast_in_place_retries: None, mode: str
) -> None:
    graph, model = scripted_graph(
        {"planner": [NO_TOOL_CALL, CONNECTION_RESET, plan(spec("a"))]}, tool_calling=mode
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    # The unusable reply and the good one are both counted; the failed call is not a reply.
    assert out["usage"].by_role["planner"].llm_calls == 2
    assert len(model.prompts("planner")) == 3


def test_a_transient_error_on_the_verifiers_re_ask_is_retried(
    scripted_graph: GraphFactory, fast_in_place_retries: None
) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("a"))],
            "verifier": [
                NO_TOOL_CALL,
                CONNECTION_RESET,
                {"passed": True, "reasoning": "fine", "issues": []},
            ],
        }
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["verdict"].passed and out["usage"].by_role["verifier"].llm_calls == 2


def test_a_re_ask_that_keeps_failing_becomes_data_with_the_spent_usage(
    scripted_graph: GraphFactory, fast_in_place_retries: None
) -> None:
    graph, _ = scripted_graph({"planner": [NO_TOOL_CALL, *[CONNECTION_RESET] * 3]})
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed"
    assert "model call failed: ConnectionError" in out["reason"]
    assert out["usage"].by_role["planner"].llm_calls == 1


# --------------------------------------------------------------------------- item 7


def _completed(id: str, **fields: Any) -> Task:
    return Task(id=id, title=f"Task {id}", status="completed", **fields)


def test_an_unchanged_restatement_of_a_completed_task_is_a_no_op() -> None:
    tasks = {"a": _completed("a", description="Count the rows.", tool_bundles=("compute",))}
    restated = PlanUpdate(
        rationale="r",
        tasks=[
            TaskSpec(id="a", title="task A", description="Count  the rows."),  # spacing, case
            TaskSpec(id="b", title="Task b", dependencies=["a"]),
        ],
    )
    changed = apply_plan(tasks, restated, max_tasks=5)
    assert set(changed) == {"b"}


@pytest.mark.parametrize(
    "change",
    [
        {"title": "Something else"},
        {"description": "Count the columns."},
        {"dependencies": ["z"]},
        {"tool_bundles": ["files"]},
    ],
)
def test_a_real_change_to_a_completed_task_is_still_refused(change: dict[str, Any]) -> None:
    tasks = {
        "a": _completed("a", description="Count the rows.", tool_bundles=("compute",)),
        "z": _completed("z"),
    }
    fields = {"id": "a", "title": "Task a", **change}
    revised = PlanUpdate(rationale="r", tasks=[TaskSpec.model_validate(fields)])
    with pytest.raises(PlanError, match="already completed and cannot be revised"):
        apply_plan(tasks, revised, max_tasks=5)


def test_every_step_planner_that_restates_completed_tasks_costs_no_re_ask(
    scripted_graph: GraphFactory,
) -> None:
    first = plan(spec("a"), spec("b", "a"))
    restated = plan(spec("a"), spec("b", "a"))  # what real planners send back each time
    graph, model = scripted_graph({"planner": [first, restated]}, replan="every_step")
    out = graph.invoke({"goal": "chain"})
    assert out["status"] == "succeeded", out.get("reason")
    assert all(t.status == "completed" for t in out["tasks"].values())
    # One draft per planner visit: first plan, after a, after b is not needed (nothing pending).
    assert len(model.prompts("planner")) == 2
    assert not any("cannot be revised" in p for p in model.prompts("planner"))


# --------------------------------------------------------------------------- item 8


def test_unusable_planner_replies_use_the_plan_repairs_too(scripted_graph: GraphFactory) -> None:
    # Three unusable replies exhaust one draft's re-asks (max_output_retries=2); the
    # next draft succeeds: max_plan_repairs is used, not ignored.
    graph, model = scripted_graph(
        {"planner": [NO_TOOL_CALL] * 3 + [plan(spec("a"))]}, max_output_retries=2
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["usage"].by_role["planner"].llm_calls == 4
    # The second draft tells the model what was wrong with the first.
    assert "could not be used" in model.prompts("planner")[3]


def test_the_failure_reason_names_both_budgets(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph({"planner": [NO_TOOL_CALL]}, max_output_retries=1, max_plan_repairs=1)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed"
    assert "no valid plan in 2 draft(s): max_plan_repairs (1) used up" in out["reason"]
    assert "max_output_retries=1 re-asks used up" in out["reason"]
    assert out["usage"].by_role["planner"].llm_calls == 4  # (1 + 1) x (1 + 1)


# --------------------------------------------------------------------------- item 9


def test_model_facing_schemas_ignore_unknown_fields() -> None:
    verdict = Verdict.model_validate({"passed": True, "reasoning": "ok", "confidence": 0.9})
    assert verdict.passed and not hasattr(verdict, "confidence")
    spec_ = TaskSpec.model_validate({"id": "a", "title": "A", "priority": "high"})
    assert spec_.id == "a"
    assert PlanUpdate.model_validate({"rationale": "r", "tasks": [], "notes": "x"}).tasks == []


def test_a_verdict_with_extra_fields_costs_no_re_ask(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("a"))],
            "verifier": [{"passed": True, "reasoning": "fine", "issues": [], "confidence": 0.8}],
        }
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and out["usage"].by_role["verifier"].llm_calls == 1


# --------------------------------------------------------------------------- item 10


def _unbounded(schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths of strings without maxLength and arrays without maxItems in a JSON schema."""
    found: list[str] = []
    kind = schema.get("type")
    if kind == "string" and "maxLength" not in schema and "enum" not in schema:
        found.append(path or "/")
    if kind == "array" and "maxItems" not in schema:
        found.append(path or "/")
    for key, sub in schema.get("properties", {}).items():
        found += _unbounded(sub, f"{path}.{key}")
    for sub in schema.get("anyOf", []):
        found += _unbounded(sub, path)
    if isinstance(schema.get("items"), dict):
        found += _unbounded(schema["items"], f"{path}[]")
    for name, sub in schema.get("$defs", {}).items():
        found += _unbounded(sub, f"#{name}")
    return found


@pytest.mark.parametrize("schema", [plan_update_schema(30), Verdict], ids=["PlanUpdate", "Verdict"])
def test_model_facing_schemas_bound_every_string_and_list(schema: type) -> None:
    json_schema = schema.model_json_schema()
    assert _unbounded(json_schema) == []
    assert len(json_schema.get("required", [])) <= 1


def test_the_plan_schema_bounds_the_tasks_by_max_tasks() -> None:
    schema = plan_update_schema(4).model_json_schema()
    assert schema["properties"]["tasks"]["maxItems"] == 4
    assert plan_update_schema(4) is plan_update_schema(4)


def test_over_long_text_from_an_unconstrained_model_is_clipped_not_refused() -> None:
    limit = TaskSpec.model_json_schema()["properties"]["title"]["maxLength"]
    spec_ = TaskSpec.model_validate({"id": "a", "title": "x" * (limit + 50)})
    assert len(spec_.title) == limit
    assert json.loads(spec_.model_dump_json())["title"] == "x" * limit


def test_dropping_an_unknown_task_is_a_no_op() -> None:
    # Small models fill `drop` with ids that never existed; there is nothing to cancel.
    plan_ = PlanUpdate(rationale="r", tasks=[TaskSpec(id="a", title="A")], drop=["", "id:", "9"])
    assert set(apply_plan({}, plan_, max_tasks=3)) == {"a"}
