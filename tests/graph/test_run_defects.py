"""Issue 29, point 7, through the public API: plan-approval answers that are no
decision, new input while a plan awaits approval, a refused goal kept out of the
answer and later checkpoints, and usage that counts a stopped step's calls."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import open_checkpointer, thread_config
from aimegraph.checkpoints.delta import with_finished_tasks
from aimegraph.models import ScriptedChatModel
from aimegraph.nodes.intake import PLAN_PENDING

CONFIG = thread_config("defects")
TWO_TASKS = {
    "planner": [plan(spec("a"), spec("b", "a")), plan(spec("x"))],
    "actors": {"a": [submit("a ok")], "b": [submit("b ok")], "x": [submit("x ok")]},
}


def waiting(out: dict[str, Any]) -> dict[str, Any]:
    """The one interrupt a run returned with: its value."""
    (item,) = out["__interrupt__"]
    return dict(item.value)


@pytest.mark.parametrize(
    "answer", [{"action": "aprove"}, {"answer": "yes"}, {"action": "edit"}, 42, ["approve"]]
)
def test_a_plan_answer_that_is_no_decision_is_asked_again(
    scripted_graph: GraphFactory, saver: InMemorySaver, answer: Any
) -> None:
    graph, model = scripted_graph(TWO_TASKS, checkpointer=saver, approve_plan=True)
    first = waiting(graph.invoke({"goal": "two steps"}, CONFIG))
    again = waiting(graph.invoke(Command(resume=answer), CONFIG))
    assert again["kind"] == "approve_plan" and again["checklist"] == first["checklist"]
    assert (
        again["error"].startswith("unrecognised answer") and '"action": "approve"' in again["error"]
    )
    assert graph.get_state(CONFIG).values["status"] == "running"  # not rejected
    out = graph.invoke(Command(resume={"action": "approve"}), CONFIG)
    assert out["status"] == "succeeded" and set(out["tasks"]) == {"a", "b"}
    assert len(model.prompts("planner")) == 1


@pytest.mark.parametrize(
    "request_", [{"goal": "another goal"}, {"messages": [HumanMessage("another goal")]}]
)
def test_new_input_while_a_plan_awaits_approval_is_not_taken(
    scripted_graph: GraphFactory, saver: InMemorySaver, request_: dict[str, Any]
) -> None:
    graph, model = scripted_graph(TWO_TASKS, checkpointer=saver, approve_plan=True)
    first = waiting(graph.invoke({"goal": "two steps"}, CONFIG))
    again = waiting(graph.invoke(request_, CONFIG))
    assert again["kind"] == "approve_plan" and again["error"] == PLAN_PENDING
    assert again["plan"] == first["plan"]
    assert graph.get_state(CONFIG).values["goal"] == "two steps"
    assert len(model.prompts("planner")) == 1  # the new request was not planned
    out = graph.invoke(Command(resume={"action": "approve"}), CONFIG)
    assert out["status"] == "succeeded" and out["goal"] == "two steps"
    assert set(out["tasks"]) == {"a", "b"}


def test_a_refused_goal_is_not_copied_into_the_answer_or_later_checkpoints(
    tmp_path: Path,
) -> None:
    goal = "Summarise this: " + "x" * 1_000_000
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    with open_checkpointer(url) as saver:
        model = ScriptedChatModel.from_dict(TWO_TASKS)
        graph = build_aime_graph(model, config=AimeConfig(workspace=tmp_path), checkpointer=saver)
        out = graph.invoke({"goal": goal}, CONFIG, durability="sync")
        assert out["status"] == "failed" and "1,000,016 characters" in out["reason"]
        assert len(out["final_answer"]) < 2_000 and "Summarise this: xxx" in out["final_answer"]
        assert out["goal"].startswith("Summarise this: x") and len(out["goal"]) < 200
        assert model.prompts() == []
        # Only LangGraph's own record of the input (the input checkpoint and the
        # step that reads it) holds the text; from the intake on, no checkpoint does.
        steps = {
            item.metadata["step"]: len(str(item.checkpoint["channel_values"].get("goal", "")))
            for item in saver.list(CONFIG)
        }
    assert max(steps) >= 2 and all(size < 200 for step, size in steps.items() if step >= 1)


def test_a_refused_goal_in_a_message_is_replaced_by_its_opening(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(TWO_TASKS, checkpointer=saver)
    out = graph.invoke({"messages": [HumanMessage("y" * 50_000)]}, CONFIG)
    assert out["status"] == "failed" and "50,000 characters" in out["reason"]
    assert all(len(m.text) < 2_000 for m in out["messages"])
    assert sum(isinstance(m, HumanMessage) for m in out["messages"]) == 1


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so nothing handles it."""


def test_usage_of_a_crashed_step_counts_every_call_made(tmp_path: Path) -> None:
    crashed = threading.Event()

    @tool
    def side_effect(task: str) -> str:
        """Record that a task did its work."""
        if task == "b":
            time.sleep(0.3)  # its sibling a finishes first
            if not crashed.is_set():
                crashed.set()
                raise Crash(task)
        return f"{task} recorded"

    def step(task: str) -> list[dict[str, Any]]:
        return [call("side_effect", task=task), submit(f"{task} ok")]

    custom = {"tool_bundles": ["custom"]}
    scenario = {
        "planner": [plan(spec("a", **custom), spec("b", **custom))],
        "actors": {"a": step("a"), "b": step("b")},
    }
    model = ScriptedChatModel.from_dict(scenario)
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    with open_checkpointer(url) as saver:
        graph = build_aime_graph(
            model, tools=[side_effect], config=AimeConfig(workspace=tmp_path), checkpointer=saver
        )
        with pytest.raises(Crash):
            graph.invoke({"goal": "two steps"}, CONFIG, durability="sync")
        snapshot = graph.get_state(CONFIG)
        now = with_finished_tasks(snapshot, saver).values
    # planner 1, a 2 (side_effect, submit), b 1 (the call whose tool crashed)
    assert len(model.prompts()) == 4
    assert now["usage"].llm_calls == 4 and now["usage"].by_role["actor"].llm_calls == 3
    assert now["tasks"]["a"].status == "completed" and now["tasks"]["b"].status != "completed"
    assert snapshot.values["usage"].llm_calls < 4  # what get_state alone says
