"""Limits and user mistakes: model timeouts, the wall-clock budget, approve_tools names,
goals that cannot be used, approvals without a checkpointer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from tests.conftest import GraphFactory
from tests.scripted import plan, spec, submit

from aimegraph import AimeConfig, build_aime_graph, build_planner_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.nodes.planner import GoalError

CHAIN = {
    "planner": [plan(spec("a"), spec("b", "a"))],
    "actors": {"a": [submit("a done")], "b": [submit("b done")]},
}


# --------------------------------------------------------------------------- model timeouts


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def test_an_unresponsive_model_server_fails_the_run_after_the_configured_attempts(
    workspace: Path, silent_server: SilentServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{silent_server.port}/v1")
    # With a key, resolving the spec makes no connection of its own: each one counted
    # below is a request.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = AimeConfig(workspace=workspace, model_timeout_s=0.2, model_retries=0)
    graph = build_aime_graph("openai:silent", config=config)

    out = graph.invoke({"goal": "anything"})

    assert out["status"] == "failed"
    assert "the planner stopped" in out["reason"] and "Timeout" in out["reason"]
    # 3 node attempts (LLM_RETRY_POLICY), each 1 + model_retries client attempts (the
    # default model_retries=1 would make 6, the client's own default 12).
    assert len(silent_server.accepted) == 3


def test_model_timeout_and_retries_are_set_when_the_graph_is_built(workspace: Path) -> None:
    graph, _ = _graph(workspace, CHAIN)
    with pytest.raises(ValueError, match="model_timeout_s apply when the graph is built"):
        graph.invoke({"goal": "chain"}, context={"model_timeout_s": 5})


def _graph(workspace: Path, scenario: dict[str, Any], **config: Any) -> tuple[Any, Any]:
    model = ScriptedChatModel.from_dict(scenario)
    return build_aime_graph(model, config=AimeConfig(workspace=workspace, **config)), model


# --------------------------------------------------------------------------- wall clock


class SlowPlanner(ScriptedChatModel):
    """The scripted model, with a planner that takes ``delay_s`` to answer."""

    delay_s: float = 0.05

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if any("planner" in str(m.content)[:400].lower() for m in messages[:1]):
            time.sleep(self.delay_s)
        return super()._generate(messages, *args, **kwargs)


def test_max_wall_s_ends_the_run_cleanly_like_the_other_budgets(workspace: Path) -> None:
    model = SlowPlanner.from_dict(CHAIN)
    assert isinstance(model, SlowPlanner)
    graph = build_aime_graph(model, config=AimeConfig(workspace=workspace, max_wall_s=0.01))

    out = graph.invoke({"goal": "chain"})

    assert out["status"] == "budget_exhausted"
    assert out["reason"].startswith("max_wall_s (0.01 s) reached")
    assert not model.prompts("actor")  # stopped before dispatching anything
    assert "max_wall_s" in out["final_answer"]  # the partial report says why
    assert isinstance(out["messages"][-1], AIMessage)


def test_each_run_of_a_thread_gets_its_own_wall_clock(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict(
        {"planner": [plan(spec("a")), plan(spec("b"))], "actors": CHAIN["actors"]}
    )
    graph = build_aime_graph(
        model,
        config=AimeConfig(workspace=workspace),
        checkpointer=InMemorySaver(serde=make_serializer()),
    )
    thread = thread_config("wall")
    graph.invoke({"goal": "first"}, thread)
    first_start = graph.get_state(thread).values["run_started_at"]
    graph.invoke({"goal": "second"}, thread)
    second_start = graph.get_state(thread).values["run_started_at"]
    assert first_start < second_start <= time.time()


# --------------------------------------------------------------------------- approve_tools


def test_unknown_approve_tools_names_are_refused_when_building(workspace: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown tool\(s\) 'pyhton'.*python"):
        build_aime_graph(
            ScriptedChatModel.from_dict(CHAIN),
            config=AimeConfig(workspace=workspace, approve_tools=("pyhton",)),
        )


def test_unknown_approve_tools_names_are_refused_per_run(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict(CHAIN)
    graph = build_aime_graph(
        model,
        config=AimeConfig(workspace=workspace),
        checkpointer=InMemorySaver(serde=make_serializer()),
    )
    with pytest.raises(ValueError, match=r"unknown tool\(s\) 'pyhton'; the tools are: .*python"):
        graph.invoke({"goal": "x"}, thread_config("t"), context={"approve_tools": ["pyhton"]})
    assert model.prompts() == []


# --------------------------------------------------------------------------- goals


@pytest.mark.parametrize(
    ("goal", "says"),
    [
        (42, "the goal must be a string"),
        ("x" * 100_000, "the goal is 100,000 characters, more than max_goal_chars (20,000)"),
    ],
)
def test_a_goal_that_cannot_be_used_ends_the_run_saying_why(
    scripted_graph: GraphFactory, goal: Any, says: str
) -> None:
    graph, model = scripted_graph(CHAIN)
    out = graph.invoke({"goal": goal})
    assert out["status"] == "failed"
    assert says in out["reason"]
    assert says in out["final_answer"]  # also the reply a chat app shows
    assert model.prompts() == []  # no prompt carries it


def test_the_planner_alone_refuses_a_goal_that_is_not_text(workspace: Path) -> None:
    planner = build_planner_graph(ScriptedChatModel.from_dict(CHAIN))
    with pytest.raises(GoalError, match="the goal must be a string"):
        planner.invoke({"goal": ["a", "list"]})


def test_the_planner_alone_starts_a_new_run_on_a_finished_state(workspace: Path) -> None:
    # No intake node before it: the planner resets the run's own keys itself.
    planner = build_planner_graph(ScriptedChatModel.from_dict(CHAIN))
    out = planner.invoke(
        {"goal": "chain", "status": "rejected", "replans": 2, "replan_reason": "stale"}
    )
    assert out["status"] == "running" and out["replans"] == 0
    assert out["replan_reason"] is None and set(out["tasks"]) == {"a", "b"}


# --------------------------------------------------------------------------- approvals need a checkpointer


@pytest.mark.parametrize(
    ("config", "context"),
    [
        ({"approve_plan": True}, None),
        ({}, {"approve_plan": True}),
        ({"approve_tools": ("python",)}, None),
    ],
)
def test_approvals_without_a_checkpointer_are_refused_before_any_model_call(
    scripted_graph: GraphFactory, config: dict[str, Any], context: dict[str, Any] | None
) -> None:
    graph, model = scripted_graph(CHAIN, **config)
    with pytest.raises(ValueError, match="needs a checkpointer"):
        graph.invoke({"goal": "chain"}, context=context)
    assert model.prompts() == []


def test_the_planner_alone_refuses_plan_approval_without_a_checkpointer() -> None:
    planner = build_planner_graph(
        ScriptedChatModel.from_dict(CHAIN), config=AimeConfig(approve_plan=True)
    )
    with pytest.raises(ValueError, match="approve_plan needs a checkpointer"):
        planner.invoke({"goal": "chain"})
