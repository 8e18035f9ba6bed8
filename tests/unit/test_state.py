"""Reducers, plan application and validation, the ready set and the checklist."""

from __future__ import annotations

import operator

import pytest
from pydantic import ValidationError

from aimegraph.state import (
    PlanError,
    PlanUpdate,
    RoleUsage,
    Task,
    TaskResult,
    TaskSpec,
    Usage,
    add_usage,
    apply_plan,
    ready_tasks,
    render_checklist,
    validate_plan,
)
from aimegraph.state.progress import dependency_results
from aimegraph.state.reducers import merge_tasks


def task(id: str, *deps: str, status: str = "pending", parent: str | None = None) -> Task:
    return Task(id=id, title=id.upper(), dependencies=deps, status=status, parent_id=parent)


def plan(*specs: TaskSpec, drop: tuple[str, ...] = ()) -> PlanUpdate:
    return PlanUpdate(rationale="r", tasks=list(specs), drop=list(drop))


def test_merge_tasks_replaces_by_id_and_keeps_the_rest() -> None:
    a, b = task("a"), task("b")
    done = a.model_copy(update={"status": "completed"})
    merged = merge_tasks({"a": a, "b": b}, {"a": done})
    assert merged == {"a": done, "b": b}
    assert merge_tasks(None, {"b": b}) == {"b": b}


def test_usage_adds_up_including_roles() -> None:
    one = Usage(
        llm_calls=1,
        input_tokens=10,
        output_tokens=2,
        by_role={"actor": RoleUsage(llm_calls=1, input_tokens=10, output_tokens=2)},
    )
    two = Usage(
        llm_calls=2,
        tool_calls=3,
        by_role={"actor": RoleUsage(llm_calls=2), "planner": RoleUsage(llm_calls=1)},
    )
    total = add_usage(one, two)
    assert (total.llm_calls, total.input_tokens, total.tool_calls) == (3, 10, 3)
    assert total.by_role["actor"] == RoleUsage(llm_calls=3, input_tokens=10, output_tokens=2)
    assert total.by_role["planner"].llm_calls == 1
    assert add_usage(None, one) == one


def test_adding_an_empty_usage_changes_nothing_and_anything_counted_is_not_empty() -> None:
    call = Usage.of_call("actor", input_tokens=10, model="m")
    assert Usage() + call is call and call + Usage() is call  # records are immutable
    assert Usage().counts_nothing()
    for counted in (
        Usage(tool_calls=1),
        Usage(cost_usd=0.5),
        Usage(by_task={"t1": RoleUsage()}),
        Usage(unknown_tasks=["t1"]),
        Usage(unknown_members=["m"]),
    ):
        assert not counted.counts_nothing()
        assert Usage() + counted == counted == counted + Usage()
    assert (Usage(tool_calls=1) + Usage(tool_calls=2)).tool_calls == 3


def test_usage_by_model_counts_each_call_under_the_model_that_answered() -> None:
    a = Usage.of_call("actor", input_tokens=10, output_tokens=2, model="claude-x")
    b = Usage.of_call("actor", input_tokens=5, output_tokens=1, model="llama3.2")
    total = add_usage(add_usage(a, b), a).for_task("t1")
    assert total.by_model == {
        "claude-x": RoleUsage(llm_calls=2, input_tokens=20, output_tokens=4),
        "llama3.2": RoleUsage(llm_calls=1, input_tokens=5, output_tokens=1),
    }
    assert Usage.of_call("actor").by_model == {}  # a reply naming no model


def test_updates_append() -> None:
    # The `updates` key uses operator.add: parallel actors' records are all kept.
    assert operator.add([1], [2, 3]) == [1, 2, 3]


def test_records_are_frozen() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        task("a").status = "completed"  # type: ignore[misc]


def test_ready_set_needs_all_dependencies_completed() -> None:
    tasks = {
        "a": task("a", status="completed"),
        "b": task("b"),
        "c": task("c", "a"),
        "d": task("d", "a", "b"),
        "e": task("e", status="failed"),
    }
    assert [t.id for t in ready_tasks(tasks)] == ["b", "c"]


def test_dependency_results_are_the_direct_ones() -> None:
    result = TaskResult(status="completed", summary="42")
    tasks = {
        "a": task("a", status="completed").model_copy(update={"result": result}),
        "b": task("b", "a"),
    }
    assert dependency_results(tasks, tasks["b"]) == {"a": result}


def test_checklist_indents_children_and_marks_status() -> None:
    tasks = {
        "t1": task("t1", status="completed"),
        "t1a": task("t1a", status="in_progress", parent="t1"),
        "t1b": task("t1b", "t1a", parent="t1"),
        "t2": task("t2", status="failed"),
        "t3": task("t3", status="skipped"),
    }
    assert render_checklist(tasks) == (
        "- [x] t1: T1\n  - [~] t1a: T1A\n  - [ ] t1b: T1B (after t1a)\n- [!] t2: T2\n- [-] t3: T3"
    )
    assert render_checklist({}) == "(no tasks yet)"


def test_checklist_with_results() -> None:
    done = task("a", status="completed").model_copy(
        update={"result": TaskResult(status="completed", summary="found\n  42 rows")}
    )
    assert "  - result (completed): found 42 rows" in render_checklist(
        {"a": done}, with_results=True
    )


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([TaskSpec(id="a", title="A", dependencies=["a"])], "depends on itself"),
        ([TaskSpec(id="a", title="A", dependencies=["zz"])], "unknown task 'zz'"),
        (
            [
                TaskSpec(id="a", title="A", dependencies=["b"]),
                TaskSpec(id="b", title="B", dependencies=["a"]),
            ],
            "dependency cycle",
        ),
        ([TaskSpec(id="a", title="A"), TaskSpec(id="a", title="A again")], "duplicate task id 'a'"),
        ([TaskSpec(id=f"t{i}", title="x") for i in range(4)], "at most 3"),
        ([TaskSpec(id="a", title="A", tool_bundles=["nope"])], "unknown tool bundles"),
        ([TaskSpec(id="a", title="A", parent_id="ghost")], "unknown parent"),
    ],
)
def test_invalid_plans_are_refused_with_the_reason(specs: list[TaskSpec], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        apply_plan({}, plan(*specs), max_tasks=3, bundles=["files"])


def test_completed_tasks_cannot_be_revised_or_dropped() -> None:
    tasks = {"a": task("a", status="completed")}
    with pytest.raises(PlanError, match="already completed"):
        apply_plan(tasks, plan(TaskSpec(id="a", title="again")), max_tasks=5)
    with pytest.raises(PlanError, match="cannot drop task 'a'"):
        apply_plan(tasks, plan(drop=("a",)), max_tasks=5)


def test_replan_revises_drops_and_skips_unhandled_failures() -> None:
    failed = task("b", status="failed").model_copy(
        update={"attempts": 2, "result": TaskResult(status="failed", summary="boom")}
    )
    tasks = {"a": task("a", status="completed"), "b": failed, "c": task("c"), "d": task("d")}
    changed = apply_plan(
        tasks,
        plan(
            TaskSpec(id="c", title="C revised", dependencies=["a"]),
            TaskSpec(id="e", title="E"),
            drop=("d",),
        ),
        max_tasks=10,
    )
    assert changed["c"].title == "C revised" and changed["c"].status == "pending"
    assert changed["d"].status == "skipped"
    assert changed["e"].status == "pending"
    # The failure the planner did not revise is skipped, its reason kept.
    assert changed["b"].status == "skipped" and changed["b"].result.summary == "boom"
    assert "a" not in changed


def test_revising_a_failed_task_restarts_it() -> None:
    failed = task("b", status="failed").model_copy(update={"attempts": 2})
    changed = apply_plan({"b": failed}, plan(TaskSpec(id="b", title="B, differently")), max_tasks=5)
    assert changed["b"].status == "pending" and changed["b"].attempts == 0


def test_pending_task_may_not_depend_on_a_skipped_one() -> None:
    tasks = {"a": task("a", status="skipped"), "b": task("b", "a")}
    with pytest.raises(PlanError, match="skipped"):
        validate_plan(tasks, max_tasks=5)


def test_parent_cycles_are_refused() -> None:
    tasks = {"a": task("a", parent="b"), "b": task("b", parent="a")}
    with pytest.raises(PlanError, match="parent cycle"):
        validate_plan(tasks, max_tasks=5)
