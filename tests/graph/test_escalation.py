"""Escalation instead of failure (issue 27 point 3): with ``escalate`` set, where the
run would end for want of plan repairs or replans (or, with ``"failures"``, where a
task fails for good) it pauses for a human, who edits the plan, answers for the task,
grants a replan or gives up; an unattended run's escalation takes its default at its
deadline."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.conftest import GraphFactory
from tests.scripted import plan, spec, submit

from aimegraph.checkpoints import thread_config
from aimegraph.steering import await_overdue, overdue_answers

CONFIG = thread_config("escalation")

FAILING = {
    "planner": [plan(spec("a"), spec("b", "a")), plan(spec("c"), drop=("b",))],
    "actors": {
        "a": [submit("the source is offline", status="failed")],
        "b": [submit("b used [{dep:a}]")],
        "c": [submit("c ok")],
    },
    "reporter": [{"text": "{all_results}"}],
}
EXHAUSTED = {"escalate": "exhausted", "max_replans": 0, "task_retries": 0}


def waiting(out: dict[str, Any]) -> Any:
    (item,) = out["__interrupt__"]
    assert item.value["kind"] == "escalation"
    return item


def test_without_escalation_the_run_ends(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(FAILING, max_replans=0, task_retries=0)
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "budget_exhausted" and "no replans left" in out["reason"]


def test_replans_run_out_the_run_pauses_with_the_reason_and_the_choices(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(FAILING, checkpointer=saver, **EXHAUSTED)
    out = graph.invoke({"goal": "g"}, CONFIG)
    value = waiting(out).value
    assert value["trigger"] == "replans" and "no replans left" in value["reason"]
    assert value["failed_tasks"] == [
        {"id": "a", "title": "Task a", "reason": "the source is offline"}
    ]
    assert value["choices"] == ["edit", "answer", "replan", "give_up"]
    assert value["checklist"] == "- [!] a: Task a\n- [ ] b: Task b (after a)"
    assert [t["id"] for t in value["plan"]["tasks"]] == ["a", "b"]
    assert value["deadline"] is None and value["error"] is None
    assert graph.get_state(CONFIG).values["status"] == "running"


def test_answer_for_the_failed_task_and_the_run_goes_on(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(FAILING, checkpointer=saver, **EXHAUSTED)
    graph.invoke({"goal": "g"}, CONFIG)
    out = graph.invoke(Command(resume={"action": "answer", "answer": "Q3 was 1250"}), CONFIG)
    assert out["status"] == "succeeded"
    assert out["tasks"]["a"].result.summary == "(answered by a human) Q3 was 1250"
    assert out["tasks"]["b"].result.summary == "b used [(answered by a human) Q3 was 1250]"
    assert len(model.prompts("planner")) == 1


def test_edit_the_plan(scripted_graph: GraphFactory, saver: InMemorySaver) -> None:
    graph, _ = scripted_graph(FAILING, checkpointer=saver, **EXHAUSTED)
    graph.invoke({"goal": "g"}, CONFIG)
    # An invalid edit is asked again, saying why.
    cyclic = plan(spec("x", "y"), spec("y", "x"))
    out = graph.invoke(Command(resume={"action": "edit", "plan": cyclic}), CONFIG)
    assert "cycle" in waiting(out).value["error"]
    edited = plan(spec("c"), drop=("b",))
    out = graph.invoke(Command(resume={"action": "edit", "plan": edited}), CONFIG)
    assert out["status"] == "succeeded"
    assert out["tasks"]["c"].result.summary == "c ok"
    assert {t.status for i, t in out["tasks"].items() if i in "ab"} == {"skipped"}


def test_a_replan_granted_by_the_human(scripted_graph: GraphFactory, saver: InMemorySaver) -> None:
    graph, model = scripted_graph(FAILING, checkpointer=saver, **EXHAUSTED)
    graph.invoke({"goal": "g"}, CONFIG)
    out = graph.invoke(Command(resume={"action": "replan", "note": "use the mirror"}), CONFIG)
    assert out["status"] == "succeeded" and out["replans"] == 1
    second = model.prompts("planner")[1]
    assert "the source is offline" in second and "use the mirror" in second


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "give_up", "reason": "not worth it"},
        {"action": "reject", "reason": "not worth it"},
    ],
)
def test_give_up_ends_the_run_as_it_would_have(
    scripted_graph: GraphFactory, saver: InMemorySaver, answer: dict[str, Any]
) -> None:
    graph, _ = scripted_graph(FAILING, checkpointer=saver, **EXHAUSTED)
    graph.invoke({"goal": "g"}, CONFIG)
    out = graph.invoke(Command(resume=answer), CONFIG)
    assert out["status"] == "budget_exhausted"
    assert "no replans left" in out["reason"] and "gave up on it: not worth it" in out["reason"]


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"action": "approve"}, "not one of"),
        ({"action": "answer", "answer": ""}, "needs its text"),
        ({"action": "answer", "answer": "x", "task_id": "zz"}, "one of a"),
        ("give up", "unrecognised"),
    ],
)
def test_an_answer_that_is_no_choice_is_asked_again(
    scripted_graph: GraphFactory, saver: InMemorySaver, answer: Any, problem: str
) -> None:
    graph, _ = scripted_graph(FAILING, checkpointer=saver, **EXHAUSTED)
    graph.invoke({"goal": "g"}, CONFIG)
    out = graph.invoke(Command(resume=answer), CONFIG)
    assert problem in waiting(out).value["error"]


def test_failures_mode_asks_as_soon_as_a_task_fails_for_good(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(
        FAILING, checkpointer=saver, escalate="failures", task_retries=0, max_replans=3
    )
    value = waiting(graph.invoke({"goal": "g"}, CONFIG)).value
    assert value["trigger"] == "task_failed" and "failed after their retries" in value["reason"]
    assert len(model.prompts("planner")) == 1  # asked before any replan
    out = graph.invoke(Command(resume={"action": "replan"}), CONFIG)
    assert out["status"] == "succeeded"


def test_the_planner_giving_up_is_escalated_and_a_human_plan_runs(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    broken = {**FAILING, "planner": [plan(spec("x", "y"), spec("y", "x"))]}
    graph, _ = scripted_graph(broken, checkpointer=saver, escalate="exhausted", max_plan_repairs=1)
    value = waiting(graph.invoke({"goal": "g"}, CONFIG)).value
    assert value["trigger"] == "plan" and "max_plan_repairs" in value["reason"]
    assert value["choices"] == ["edit", "replan", "give_up"]
    out = graph.invoke(Command(resume={"action": "edit", "plan": plan(spec("c"))}), CONFIG)
    assert out["status"] == "succeeded" and out["tasks"]["c"].result.summary == "c ok"


REJECTING = {
    "planner": [plan(spec("c")), plan(spec("d"))],
    "actors": {"c": [submit("c ok")], "d": [submit("d ok")]},
    "verifier": [
        {"passed": False, "reasoning": "incomplete", "issues": ["d is missing"]},
        {"passed": True, "reasoning": "ok", "issues": []},
    ],
}


def test_a_rejection_with_no_replans_left_is_escalated(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(
        REJECTING, checkpointer=saver, escalate="exhausted", max_replans=0
    )
    value = waiting(graph.invoke({"goal": "g"}, CONFIG)).value
    assert value["trigger"] == "verifier" and "no replans left" in value["reason"]
    out = graph.invoke(Command(resume={"action": "replan", "note": "add d"}), CONFIG)
    assert out["status"] == "succeeded" and out["verdict"].passed
    assert "d is missing" in model.prompts("planner")[1]


def test_a_rejection_given_up_on_stays_rejected(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(REJECTING, checkpointer=saver, escalate="exhausted", max_replans=0)
    graph.invoke({"goal": "g"}, CONFIG)
    out = graph.invoke(Command(resume={"action": "give_up"}), CONFIG)
    assert out["status"] == "rejected" and out["verdict"].issues == ["d is missing"]


class Clock:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.mark.parametrize(
    ("default", "status"), [("give_up", "budget_exhausted"), ("replan", "succeeded")]
)
def test_an_unanswered_escalation_takes_its_default_at_its_deadline(
    scripted_graph: GraphFactory,
    saver: InMemorySaver,
    monkeypatch: pytest.MonkeyPatch,
    default: str,
    status: str,
) -> None:
    clock = Clock()
    monkeypatch.setattr("aimegraph.waits.time.time", clock.time)
    graph, _ = scripted_graph(
        FAILING,
        checkpointer=saver,
        escalation_timeout_s=30,
        escalation_default=default,
        **EXHAUSTED,
    )
    value = waiting(graph.invoke({"goal": "g"}, CONFIG)).value
    assert value["deadline"] == 1_030.0 and value["default"] == default
    pending = graph.get_state(CONFIG).interrupts
    assert overdue_answers(pending, now=1_029.0) == {}

    command = await_overdue(
        lambda: graph.get_state(CONFIG).interrupts, poll_s=10, clock=clock.time, sleep=clock.sleep
    )
    assert clock.slept == [10, 10, 10] and command is not None
    out = graph.invoke(command, CONFIG)
    assert out["status"] == status
    if default == "give_up":
        assert "no answer within 30 s" in out["reason"]


def test_waiting_stops_when_someone_answers_first(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(FAILING, checkpointer=saver, escalation_timeout_s=30, **EXHAUSTED)
    graph.invoke({"goal": "g"}, CONFIG)
    clock = Clock()

    def answered_meanwhile(seconds: float) -> None:
        clock.sleep(seconds)
        graph.invoke(Command(resume={"action": "answer", "answer": "42"}), CONFIG)

    got = await_overdue(
        lambda: graph.get_state(CONFIG).interrupts,
        poll_s=1,
        clock=clock.time,
        sleep=answered_meanwhile,
    )
    assert got is None and graph.get_state(CONFIG).values["status"] == "succeeded"


def test_escalation_needs_a_checkpointer(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(FAILING, escalate="exhausted")
    with pytest.raises(ValueError, match="escalate needs a checkpointer"):
        graph.invoke({"goal": "g"})
