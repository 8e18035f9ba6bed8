"""Human in the loop through the public API: plan approval (``approve_plan``) with
every answer.

The run pauses with ``interrupt()`` before any actor starts; the tests read the
payload from the snapshot (``snapshot.interrupts``) and resume with
``Command(resume=...)``. Tool approval, ``ask_human`` and notes are in
``test_human_actors.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.conftest import GraphFactory
from tests.graph.conftest import CONFIG, pending
from tests.scripted import plan, spec, submit

TWO_TASKS = {
    "planner": [plan(spec("a"), spec("b", "a"))],
    "actors": {"a": [submit("a ok")], "b": [submit("b ok")]},
}


def test_plan_approval_pauses_with_checklist_and_data_then_approve_runs_it(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(TWO_TASKS, checkpointer=saver, approve_plan=True)
    out = graph.invoke({"goal": "two steps"}, CONFIG)
    (item,) = out["__interrupt__"]
    assert item.value["kind"] == "approve_plan"
    assert item.value["checklist"] == "- [ ] a: Task a\n- [ ] b: Task b (after a)"
    assert [t["id"] for t in item.value["plan"]["tasks"]] == ["a", "b"]
    assert item.value["plan"]["tasks"][1]["dependencies"] == ["a"]
    assert item.value["error"] is None
    assert model.prompts("actor") == []  # nothing ran before the approval
    snapshot = graph.get_state(CONFIG)
    assert snapshot.next == ("approve_plan",) and snapshot.interrupts[0].id == item.id

    out = graph.invoke(Command(resume={"action": "approve"}), CONFIG)
    assert out["status"] == "succeeded"
    assert {t.id: t.status for t in out["tasks"].values()} == {"a": "completed", "b": "completed"}
    assert len(model.prompts("planner")) == 1  # approving does not redraft
    assert pending(graph) == []


@pytest.mark.parametrize("answer", [True, "approve"])
def test_bare_approvals_are_accepted(
    scripted_graph: GraphFactory, saver: InMemorySaver, answer: Any
) -> None:
    graph, _ = scripted_graph(TWO_TASKS, checkpointer=saver, approve_plan=True)
    graph.invoke({"goal": "g"}, CONFIG)
    assert graph.invoke(Command(resume=answer), CONFIG)["status"] == "succeeded"


def test_plan_rejection_ends_the_run_rejected_with_the_reason(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(TWO_TASKS, checkpointer=saver, approve_plan=True)
    graph.invoke({"goal": "two steps"}, CONFIG)
    out = graph.invoke(Command(resume={"action": "reject", "reason": "too costly"}), CONFIG)
    assert out["status"] == "rejected"
    assert "too costly" in out["reason"]
    assert model.prompts("actor") == [] and model.prompts("verifier") == []
    assert out["tasks"] == {}  # the rejected plan never entered the progress list
    snapshot = graph.get_state(CONFIG)
    assert snapshot.next == () and snapshot.interrupts == ()


def test_edited_plan_is_validated_and_runs_instead(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(
        {**TWO_TASKS, "actors": {**TWO_TASKS["actors"], "x": [submit("x ok")]}},
        checkpointer=saver,
        approve_plan=True,
    )
    graph.invoke({"goal": "g"}, CONFIG)

    # An invalid edit (a cycle) is shown again with the error; nothing runs.
    cyclic = plan(spec("x", "y"), spec("y", "x"))
    out = graph.invoke(Command(resume={"action": "edit", "plan": cyclic}), CONFIG)
    (again,) = out["__interrupt__"]
    assert again.value["kind"] == "approve_plan" and "cycle" in again.value["error"]
    assert model.prompts("actor") == []
    # So is one that does not even match the schema.
    out = graph.invoke(Command(resume={"action": "edit", "plan": {"tasks": "not a list"}}), CONFIG)
    assert out["__interrupt__"][0].value["error"]

    edited = plan(spec("x", title="Only x"))
    out = graph.invoke(Command(resume={"action": "edit", "plan": edited}), CONFIG)
    assert out["status"] == "succeeded"
    assert set(out["tasks"]) == {"x"} and out["tasks"]["x"].result.summary == "x ok"
    assert out["tasks"]["x"].title == "Only x"
    assert len(model.prompts("planner")) == 1


UNUSABLE = {"text": "Sure, I will plan this."}


def test_usage_at_the_plan_approval_pause_counts_the_planners_calls(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    # One unusable reply re-asked, then the plan: two planner calls before the pause.
    graph, _ = scripted_graph(
        {**TWO_TASKS, "planner": [UNUSABLE, *TWO_TASKS["planner"]]},
        checkpointer=saver,
        approve_plan=True,
    )
    graph.invoke({"goal": "two steps"}, CONFIG)
    paused = graph.get_state(CONFIG).values
    assert paused["usage"].llm_calls == 2 and paused["usage"].by_role["planner"].llm_calls == 2
    assert paused["tasks"] == {}  # proposed, not yet in the progress list
    out = graph.invoke(Command(resume={"action": "approve"}), CONFIG)
    assert out["status"] == "succeeded"
    assert out["usage"].by_role["planner"].llm_calls == 2  # counted once


def test_a_budget_the_planner_spent_ends_the_run_without_asking(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(
        {**TWO_TASKS, "planner": [UNUSABLE, *TWO_TASKS["planner"]]},
        checkpointer=saver,
        approve_plan=True,
        max_llm_calls=2,
    )
    out = graph.invoke({"goal": "two steps"}, CONFIG)
    assert "__interrupt__" not in out and pending(graph) == []
    assert out["status"] == "budget_exhausted"
    assert out["reason"] == "max_llm_calls (2) reached before the plan could be approved"
    assert model.prompts("actor") == [] and out["tasks"] == {}


def test_plan_approval_turned_on_per_run_through_the_context(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(TWO_TASKS, checkpointer=saver)
    out = graph.invoke({"goal": "g"}, CONFIG, context={"approve_plan": True})
    assert out["__interrupt__"][0].value["kind"] == "approve_plan"
    assert graph.get_state(CONFIG).values["usage"].llm_calls == 1
    out = graph.invoke(Command(resume=True), CONFIG, context={"approve_plan": True})
    assert out["status"] == "succeeded"


@pytest.mark.parametrize(
    ("answer", "tasks", "status"),
    [
        ({"action": "approve"}, {"a", "b"}, None),
        ({"action": "edit", "plan": plan(spec("x"))}, {"x"}, None),
        ({"action": "reject", "reason": "no"}, set(), "rejected"),
    ],
)
def test_the_planner_graph_on_its_own_still_asks_for_approval(
    saver: InMemorySaver, answer: Any, tasks: set[str], status: str | None
) -> None:
    from aimegraph import AimeConfig, build_planner_graph
    from aimegraph.models import ScriptedChatModel

    planner = build_planner_graph(
        ScriptedChatModel.from_dict(TWO_TASKS),
        config=AimeConfig(approve_plan=True),
        checkpointer=saver,
    )
    out = planner.invoke({"goal": "g"}, CONFIG)
    assert out["__interrupt__"][0].value["kind"] == "approve_plan"
    assert planner.get_state(CONFIG).next == ("approve_plan",)
    out = planner.invoke(Command(resume=answer), CONFIG)
    assert set(out.get("tasks") or {}) == tasks
    assert out.get("status") == status or (status is None and out["status"] == "running")
    assert out["proposal"] is None and out["usage"].llm_calls == 1
