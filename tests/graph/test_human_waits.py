"""Human waits that end (issue 37, point 3), in Python: plan approval, tool approval
and ``ask_human`` record their deadline and default in the interrupt, and the process
driving the run answers the default at the deadline (``await_overdue``); a pause is
announced to the run's ``notify_webhook``, once per interrupt."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.conftest import GraphFactory
from tests.human_scenarios import EVERY_WAIT, UNATTENDED
from tests.webhook_receiver import Receiver

from aimegraph import AimeConfig
from aimegraph.steering import run_thread
from aimegraph.waits import await_overdue, overdue_answers

CONFIG: dict[str, Any] = {"configurable": {"thread_id": "w1"}}


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def pending_kind(graph: Any) -> str | None:
    interrupts = graph.get_state(CONFIG).interrupts
    return interrupts[0].value["kind"] if interrupts else None


def take_defaults(graph: Any, clock: Clock) -> list[str]:
    """Answer every wait with its default once its deadline passes (as a front end
    does), until the run ends; the kinds waited for, in order."""
    kinds = []
    while (kind := pending_kind(graph)) is not None:
        kinds.append(kind)
        command = await_overdue(
            lambda: graph.get_state(CONFIG).interrupts,
            poll_s=60,
            clock=clock.time,
            sleep=clock.sleep,
        )
        assert command is not None, f"{kind} has no deadline"
        graph.invoke(command, CONFIG)
    return kinds


def test_each_kind_of_wait_records_its_deadline_and_takes_its_default(
    scripted_graph: GraphFactory, saver: InMemorySaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr("aimegraph.waits.time.time", clock.time)
    config = UNATTENDED | {"approval_timeout_s": 30, "ask_human_timeout_s": 60}
    graph, _ = scripted_graph(EVERY_WAIT, checkpointer=saver, **config)
    graph.invoke({"goal": "g"}, CONFIG)
    (plan_wait,) = graph.get_state(CONFIG).interrupts
    assert plan_wait.value["kind"] == "approve_plan"
    assert (plan_wait.value["deadline"], plan_wait.value["default"]) == (1_030.0, "approve")
    assert overdue_answers([plan_wait], now=1_029.0) == {}  # not yet
    kinds = take_defaults(graph, clock)
    assert kinds == ["approve_plan", "approve_tool", "ask_human"]
    state = graph.get_state(CONFIG).values
    assert state["status"] == "succeeded"
    assert state["tasks"]["t1"].result.summary == "North"  # ask_human_default


def test_an_unanswered_plan_approval_rejects_by_default(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(EVERY_WAIT, checkpointer=saver, approve_plan=True,
                              approval_timeout_s=5)  # fmt: skip
    graph.invoke({"goal": "g"}, CONFIG)
    assert take_defaults(graph, Clock(time.time())) == ["approve_plan"]
    state = graph.get_state(CONFIG).values
    assert state["status"] == "rejected"
    assert state["reason"] == "plan rejected: no answer within 5 s"


def test_an_unanswered_tool_approval_denies_the_call(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(
        EVERY_WAIT,
        checkpointer=saver,
        approve_tools=["calculator"],
        approval_timeout_s=5,
        ask_human_timeout_s=5,  # ask_human_default "": no answer
    )
    graph.invoke({"goal": "g"}, CONFIG)
    assert take_defaults(graph, Clock(time.time())) == ["approve_tool", "ask_human"]
    state = graph.get_state(CONFIG).values
    denied = [
        m.text
        for saved in saver.list(CONFIG)
        for m in saved.checkpoint["channel_values"].get("messages", [])
        if "denied this call" in m.text
    ]
    assert denied and "The human denied this call to calculator: no answer within 5 s" in denied[0]
    assert state["tasks"]["t1"].result.summary == "(the human gave no answer)"


def test_a_wait_without_a_timeout_has_no_deadline(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(EVERY_WAIT, checkpointer=saver, approve_plan=True)
    graph.invoke({"goal": "g"}, CONFIG)
    (waiting,) = graph.get_state(CONFIG).interrupts
    assert waiting.value["deadline"] is None
    assert await_overdue(lambda: graph.get_state(CONFIG).interrupts) is None


def test_each_pause_is_announced_to_the_webhook_once(
    scripted_graph: GraphFactory, saver: InMemorySaver, webhook: Receiver
) -> None:
    config = UNATTENDED | {
        "approval_timeout_s": 30,
        "notify_webhook": webhook.url,
        "dashboard_url": "http://dash.example:8765/",
    }
    graph, _ = scripted_graph(EVERY_WAIT, checkpointer=saver, **config)
    run_thread(graph, {"goal": "g"}, CONFIG)
    (notice,) = webhook.bodies
    waiting = graph.get_state(CONFIG).interrupts[0]
    assert notice["event"] == "human_wait" and notice["kind"] == "approve_plan"
    assert notice["thread_id"] == "w1" and notice["interrupt_id"] == waiting.id
    assert notice["default"] == "approve" and notice["timeout_s"] == 30
    assert notice["deadline"] == pytest.approx(waiting.value["deadline"])
    assert notice["url"] == "http://dash.example:8765/threads/w1"
    assert "Compute, then ask" in notice["summary"]
    # Resuming the plan leads to the tool's approval: only that new wait is announced.
    run_thread(graph, Command(resume={"action": "approve"}), CONFIG)
    assert webhook.kinds() == ["approve_plan", "approve_tool"]
    assert "calculator" in webhook.bodies[1]["summary"]
    # A step that ends on the same pending wait (nothing answered) tells nobody again.
    run_thread(graph, None, CONFIG)
    assert webhook.kinds() == ["approve_plan", "approve_tool"]


def test_an_unreachable_webhook_costs_the_run_nothing(
    scripted_graph: GraphFactory, saver: InMemorySaver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = Receiver()
    receiver.close()  # nothing listens there any more
    graph, _ = scripted_graph(
        EVERY_WAIT, checkpointer=saver, approve_plan=True, notify_webhook=receiver.url
    )
    state = run_thread(graph, {"goal": "g"}, CONFIG)
    assert state["status"] == "running" and graph.get_state(CONFIG).interrupts
    assert "notify_webhook" in caplog.text


def test_the_webhook_must_be_a_web_address() -> None:
    with pytest.raises(ValueError, match="not an http"):
        AimeConfig(notify_webhook="file:///etc/passwd")
