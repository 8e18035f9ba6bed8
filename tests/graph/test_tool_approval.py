"""Tool approval with edits and policies (issue 27 point 2): a human approves a call,
edits its arguments (checked against the tool's schema, an invalid edit asked
again) or rejects it with a reason the actor reads; a policy decides per call which
calls are asked. The pause is LangChain's HITLRequest and takes its decisions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware.human_in_the_loop import HITLRequest
from langchain_core.messages import ToolCall
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import TypeAdapter
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig
from aimegraph.checkpoints import thread_config
from aimegraph.state import Task

CONFIG = thread_config("approval")

sent: list[tuple[str, int]] = []


@tool
def send_money(to: str, amount: int) -> str:
    """Send money to someone."""
    sent.append((to, amount))
    return f"sent {amount} to {to}"


@pytest.fixture(autouse=True)
def _no_money_sent() -> None:
    sent.clear()


PAY = {
    "planner": [plan(spec("a", tool_bundles=["custom"]))],
    "actors": {"a": [call("send_money", to="bob", amount=500), submit("{last_tool_output}")]},
}


def paused(graph: Any) -> Any:
    (item,) = graph.get_state(CONFIG).interrupts
    return item


def start(scripted_graph: GraphFactory, saver: InMemorySaver, **config: Any) -> tuple[Any, Any]:
    graph, model = scripted_graph(
        PAY, checkpointer=saver, tools=[send_money], approve_tools=["send_money"], **config
    )
    graph.invoke({"goal": "pay bob"}, CONFIG)
    return graph, model


def test_the_pause_is_a_langchain_hitl_request(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = start(scripted_graph, saver)
    value = paused(graph).value
    request = TypeAdapter(HITLRequest).validate_python(
        {k: value[k] for k in ("action_requests", "review_configs")}
    )
    assert request["action_requests"][0]["args"] == {"to": "bob", "amount": 500}
    assert "Task a" in request["action_requests"][0]["description"]
    assert sent == []


EDITS = {
    "hitl": {
        "decisions": [
            {
                "type": "edit",
                "edited_action": {"name": "send_money", "args": {"to": "bob", "amount": 50}},
            }
        ]
    },
    "decision": {
        "type": "edit",
        "edited_action": {"name": "send_money", "args": {"to": "bob", "amount": 50}},
    },
    "engine": {"action": "edit", "args": {"to": "bob", "amount": 50}},
}


@pytest.mark.parametrize("shape", list(EDITS))
def test_an_edited_call_runs_with_the_edited_arguments(
    scripted_graph: GraphFactory, saver: InMemorySaver, shape: str
) -> None:
    graph, model = start(scripted_graph, saver)
    out = graph.invoke(Command(resume=EDITS[shape]), CONFIG)
    assert out["status"] == "succeeded"
    assert sent == [("bob", 50)]
    summary = out["tasks"]["a"].result.summary
    # The actor's observation is the edited call's result, and says a human edited it.
    assert "sent 50 to bob" in summary and "a human edited this call" in summary
    assert '"amount": 50' in summary


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"to": "bob", "amount": "lots"}, "amount"),  # wrong type
        ({"to": "bob"}, "amount"),  # missing
        ({"name": "delete_all", "args": {}}, "not the tool"),  # another tool
    ],
)
def test_an_invalid_edit_is_asked_again_with_the_reason(
    scripted_graph: GraphFactory, saver: InMemorySaver, bad: dict[str, Any], problem: str
) -> None:
    graph, _ = start(scripted_graph, saver)
    first = paused(graph)
    action = bad if "name" in bad else {"name": "send_money", "args": bad}
    out = graph.invoke(
        Command(resume={"decisions": [{"type": "edit", "edited_action": action}]}), CONFIG
    )
    (again,) = out["__interrupt__"]
    assert again.id != first.id and again.value["kind"] == "approve_tool"
    assert problem in again.value["error"]
    assert sent == []
    out = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert out["status"] == "succeeded" and sent == [("bob", 500)]


@pytest.mark.parametrize(
    "rejection",
    [
        {"decisions": [{"type": "reject", "message": "not this month"}]},
        {"action": "reject", "reason": "not this month"},
        {"action": "deny", "reason": "not this month"},
    ],
)
def test_a_rejection_reason_is_the_actors_observation(
    scripted_graph: GraphFactory, saver: InMemorySaver, rejection: dict[str, Any]
) -> None:
    graph, model = start(scripted_graph, saver)
    out = graph.invoke(Command(resume=rejection), CONFIG)
    assert sent == []
    summary = out["tasks"]["a"].result.summary
    assert "denied" in summary and "not this month" in summary
    assert any("not this month" in p for p in model.prompts("actor"))


@pytest.mark.parametrize(
    "unclear", [{"action": "aprove"}, {"decisions": []}, {"type": "respond", "message": "x"}, 42]
)
def test_an_answer_that_is_no_decision_is_asked_again(
    scripted_graph: GraphFactory, saver: InMemorySaver, unclear: Any
) -> None:
    graph, _ = start(scripted_graph, saver)
    out = graph.invoke(Command(resume=unclear), CONFIG)
    assert out["__interrupt__"][0].value["error"]
    assert sent == []  # neither run nor denied


# --- policies ---

FILES = {
    "planner": [plan(spec("a", tool_bundles=["files"]))],
    "actors": {
        "a": [
            call("read_file", path="data/sales.csv"),
            call("read_file", path="data/../secret.txt"),
            call("read_file", path="notes.txt"),
            submit("read three"),
        ]
    },
}
DATA_ALLOWED = [
    {"tool": "read_file", "args": {"path": "data/*"}, "decision": "allow"},
    {"tool": "read_file", "reason": "outside data/"},
]


def _files(workspace: Path) -> None:
    (workspace / "data").mkdir()
    (workspace / "data" / "sales.csv").write_text("north,10\n")
    (workspace / "secret.txt").write_text("s3cret\n")
    (workspace / "notes.txt").write_text("notes\n")


def test_a_rule_list_allows_one_path_and_asks_for_another(
    scripted_graph: GraphFactory, saver: InMemorySaver, workspace: Path
) -> None:
    _files(workspace)
    graph, model = scripted_graph(FILES, checkpointer=saver, approve_tools=DATA_ALLOWED)
    out = graph.invoke({"goal": "read"}, CONFIG)
    # data/sales.csv ran unasked; the path leaving data/ is asked, with the rule's reason.
    (item,) = out["__interrupt__"]
    assert item.value["args"] == {"path": "data/../secret.txt"}
    assert "outside data/" in item.value["action_requests"][0]["description"]
    assert any("north,10" in p for p in model.prompts("actor"))
    out = graph.invoke(Command(resume={"action": "reject", "reason": "private"}), CONFIG)
    (item,) = out["__interrupt__"]
    assert item.value["args"] == {"path": "notes.txt"}
    out = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert out["status"] == "succeeded"
    prompts = "\n".join(model.prompts("actor"))
    assert "s3cret" not in prompts and "notes\n" in prompts


def review(call: ToolCall, task: Task | None) -> str | None:
    """A policy: money to bob under 100 runs, other payments are asked, the rest
    is left to the rules."""
    if call["name"] != "send_money":
        return None
    return "allow" if call["args"]["to"] == "bob" and call["args"]["amount"] < 100 else "ask"


@pytest.mark.parametrize("policy", [review, "tests.graph.test_tool_approval:review"])
def test_a_callable_policy_decides_per_call(
    scripted_graph: GraphFactory, saver: InMemorySaver, policy: Any
) -> None:
    scenario = {
        "planner": [plan(spec("a", tool_bundles=["custom"]))],
        "actors": {
            "a": [
                call("send_money", to="bob", amount=50),
                call("send_money", to="eve", amount=50),
                submit("paid"),
            ]
        },
    }
    graph, _ = scripted_graph(scenario, checkpointer=saver, tools=[send_money], tool_policy=policy)
    out = graph.invoke({"goal": "pay"}, CONFIG)
    assert sent == [("bob", 50)]
    assert out["__interrupt__"][0].value["args"] == {"to": "eve", "amount": 50}
    assert graph.invoke(Command(resume=True), CONFIG)["status"] == "succeeded"
    assert sent == [("bob", 50), ("eve", 50)]


def test_a_deny_rule_refuses_without_asking(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(
        PAY,
        checkpointer=saver,
        tools=[send_money],
        approve_tools=[{"tool": "send_*", "decision": "deny", "reason": "no payments in tests"}],
    )
    out = graph.invoke({"goal": "pay"}, CONFIG)
    assert "__interrupt__" not in out and sent == []
    assert "refuses" in out["tasks"]["a"].result.summary
    assert "no payments in tests" in out["tasks"]["a"].result.summary


def test_a_rule_matching_no_tool_is_refused(workspace: Path) -> None:
    from aimegraph import build_aime_graph

    with pytest.raises(ValueError, match="unknown tool"):
        build_aime_graph(
            "scripted:demo",
            config=AimeConfig(workspace=workspace, approve_tools=[{"tool": "raed_*"}]),
        )
