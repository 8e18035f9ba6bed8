"""A chat app around the aime graph: each new request on a finished thread is a new run.

Two setups, both on one thread: the aime graph invoked directly with one message per
turn, and the aime graph as a node of an app whose state extends ``AimeState``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from tests.scripted import submit

from aimegraph import AimeConfig, AimeState, Task, build_aime_graph
from aimegraph.checkpoints import thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.state import thread_usage

FIRST, SECOND = "How many miles is 5 km?", "And how many feet is 2 m?"


def two_turns() -> ScriptedChatModel:
    """One plan, one actor and one report per turn: 4 model calls with the verifier."""
    return ScriptedChatModel.from_dict(
        {
            "planner": [
                {"rationale": "one step", "tasks": [{"id": "miles", "title": "Convert km"}]},
                {"rationale": "one step", "tasks": [{"id": "feet", "title": "Convert m"}]},
            ],
            "actors": {"miles": [submit("3.11 miles")], "feet": [submit("6.56 feet")]},
            "reporter": [{"text": "5 km is 3.11 miles."}, {"text": "2 m is 6.56 feet."}],
        }
    )


def test_a_new_message_on_a_finished_thread_starts_a_new_run(
    workspace: Path, saver: InMemorySaver
) -> None:
    model = two_turns()
    # Room for one run's four calls: a second run must not count the first one's.
    config = AimeConfig(workspace=workspace, max_llm_calls=4)
    graph = build_aime_graph(model, config=config, checkpointer=saver)
    thread = thread_config("chat")

    first = graph.invoke({"messages": [HumanMessage(FIRST)]}, thread)
    assert first["status"] == "succeeded" and first["usage"].llm_calls == 4
    second = graph.invoke({"messages": [HumanMessage(SECOND)]}, thread)

    assert second["goal"] == SECOND
    assert second["status"] == "succeeded", second.get("reason")
    assert second["final_answer"] == "2 m is 6.56 feet."
    assert list(second["tasks"]) == ["feet"]  # the new plan only
    assert second["usage"].llm_calls == 4  # this run's usage, within its own budget
    new_prompt = model.prompts("planner")[1]
    # The new run sees the earlier turn (tests/graph/test_follow_ups.py), never its plan.
    assert SECOND in new_prompt and FIRST in new_prompt and "Convert km" not in new_prompt
    assert [m.content for m in second["messages"]] == [
        FIRST,
        "5 km is 3.11 miles.",
        SECOND,
        "2 m is 6.56 feet.",
    ]

    # The first run is kept as history, with its own plan and usage.
    state = graph.get_state(thread).values
    (past,) = state["runs"]
    assert past["goal"] == FIRST and past["status"] == "succeeded"
    assert list(past["tasks"]) == ["miles"] and past["tasks"]["miles"].result is not None
    assert past["usage"].llm_calls == 4 and past["final_answer"] == "5 km is 3.11 miles."
    assert thread_usage(state).llm_calls == 8


class ChatState(AimeState, total=False):
    """A chat app's state: the aime keys plus its own."""

    turns: int


def count_turn(state: Mapping[str, Any]) -> dict[str, Any]:
    return {"turns": state.get("turns", 0) + 1}


def chat_app(aime: Any, state: type[Any], saver: InMemorySaver) -> Any:
    app = StateGraph(state)
    app.add_node("count_turn", count_turn)
    app.add_node("aime", aime)
    app.add_edge(START, "count_turn")
    app.add_edge("count_turn", "aime")
    app.add_edge("aime", END)
    return app.compile(checkpointer=saver)


def test_inside_a_chat_app_each_turn_plans_its_own_request(
    workspace: Path, saver: InMemorySaver, serde_events: list[dict[str, Any]]
) -> None:
    model = two_turns()
    aime = build_aime_graph(model, config=AimeConfig(workspace=workspace, max_llm_calls=4))
    app = chat_app(aime, ChatState, saver)
    thread = thread_config("chat-app")

    app.invoke({"messages": [HumanMessage(FIRST)]}, thread)
    out = app.invoke({"messages": [HumanMessage(SECOND)]}, thread)

    assert out["goal"] == SECOND and out["turns"] == 2
    assert out["status"] == "succeeded", out.get("reason")
    assert isinstance(out["messages"][-1], AIMessage)
    assert out["messages"][-1].content == "2 m is 6.56 feet."
    new_prompt = model.prompts("planner")[1]
    assert SECOND in new_prompt and FIRST in new_prompt and "Convert km" not in new_prompt
    # The parent's own reducers add up the turns: usage is the thread's total.
    assert out["usage"].llm_calls == 8 and thread_usage(out).llm_calls == 8
    # With aimegraph's serializer, every state record is revived without a warning.
    assert [e for e in serde_events if e["module"].startswith("aimegraph")] == []


class LatestPlanChatState(AimeState, total=False):
    tasks: dict[str, Task]  # no reducer: each turn's plan replaces the last one


def test_a_chat_app_can_keep_only_the_latest_plan(workspace: Path, saver: InMemorySaver) -> None:
    aime = build_aime_graph(two_turns(), config=AimeConfig(workspace=workspace))
    app = chat_app(aime, LatestPlanChatState, saver)
    thread = thread_config("latest-plan")
    app.invoke({"messages": [HumanMessage(FIRST)]}, thread)
    out = app.invoke({"messages": [HumanMessage(SECOND)]}, thread)
    assert list(out["tasks"]) == ["feet"]


def test_a_plain_saver_warns_about_aimegraph_types_which_is_why_the_docs_name_the_serializer(
    workspace: Path, serde_events: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    aime = build_aime_graph(two_turns(), config=AimeConfig(workspace=workspace))
    # A parent app's saver is the parent's to configure. With LangGraph's default
    # serializer as it is outside strict mode (this suite runs in strict mode),
    # aimegraph's records are revived with a warning each.
    default = JsonPlusSerializer(allowed_msgpack_modules=True)
    app = chat_app(aime, ChatState, InMemorySaver(serde=default))
    with caplog.at_level(logging.WARNING):
        app.invoke({"messages": [HumanMessage(FIRST)]}, thread_config("plain"))
        app.invoke({"messages": [HumanMessage(SECOND)]}, thread_config("plain"))
    unregistered = {(e["module"], e["name"]) for e in serde_events}
    assert ("aimegraph.state.models", "Task") in unregistered
