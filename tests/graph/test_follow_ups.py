"""Follow-up turns keep their context: a new run on a thread sees a bounded view of
the earlier turns (questions, answers, artifacts, what was left open), in the
planner's, the reporter's, the verifier's and the actors' prompts; the same when
the graph is a node of a ``MessagesState`` app and when it runs on a thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from tests.scripted import plan, spec, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.nodes.conversation import conversation_view, past_turns

FIRST = "What is the capital of France?"
FOLLOW_UP = "And what is its population?"


def capital_then_population() -> ScriptedChatModel:
    return ScriptedChatModel.from_dict(
        {
            "planner": [plan(spec("capital")), plan(spec("population"))],
            "actors": {
                "capital": [submit("Paris", city="Paris")],
                "population": [submit("About 2.1 million people live in Paris.")],
            },
            "reporter": [
                {"text": "The capital of France is Paris."},
                {"text": "Paris has about 2.1 million inhabitants."},
            ],
        }
    )


def second_prompts(model: ScriptedChatModel) -> dict[str, str]:
    """The follow-up run's prompt of each role (the second of each)."""
    return {role: model.prompts(role)[1] for role in ("planner", "actor", "reporter", "verifier")}


def assert_the_follow_up_sees_the_first_turn(model: ScriptedChatModel) -> None:
    for role, prompt in second_prompts(model).items():
        assert FOLLOW_UP in prompt, role
        # The first turn's question and answer: what "its" refers to.
        assert FIRST in prompt and "The capital of France is Paris." in prompt, role
    planner = second_prompts(model)["planner"]
    assert "Artifacts: city: Paris" in planner
    assert "Task capital" not in planner  # the view has the turns, never the old plan
    # The first run saw no earlier turn.
    assert "<conversation>" not in model.prompts("planner")[0]


def test_a_follow_up_on_a_thread_sees_the_earlier_turn(workspace: Path) -> None:
    model = capital_then_population()
    graph = build_aime_graph(
        model,
        config=AimeConfig(workspace=workspace),
        checkpointer=InMemorySaver(serde=make_serializer()),
    )
    thread = thread_config("follow-up")
    graph.invoke({"messages": [HumanMessage(FIRST)]}, thread)
    out = graph.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, thread)

    assert out["status"] == "succeeded" and out["goal"] == FOLLOW_UP
    assert_the_follow_up_sees_the_first_turn(model)


def test_a_follow_up_in_a_messages_state_app_sees_the_earlier_turn(workspace: Path) -> None:
    model = capital_then_population()
    aime = build_aime_graph(model, config=AimeConfig(workspace=workspace))
    app = StateGraph(MessagesState)
    app.add_node("aime", aime)
    app.add_edge(START, "aime")
    app.add_edge("aime", END)
    chat = app.compile(checkpointer=InMemorySaver(serde=make_serializer()))
    thread = thread_config("chat")
    chat.invoke({"messages": [HumanMessage(FIRST)]}, thread)
    out = chat.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, thread)

    assert [type(m) for m in out["messages"]] == [HumanMessage, AIMessage] * 2
    assert out["messages"][-1].content == "Paris has about 2.1 million inhabitants."
    assert_the_follow_up_sees_the_first_turn(model)


def test_a_goal_given_as_goal_joins_the_conversation_for_later_turns(workspace: Path) -> None:
    model = capital_then_population()
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace), checkpointer=InMemorySaver()
    )
    thread = thread_config("goals")
    first = graph.invoke({"goal": FIRST}, thread)
    assert [m.content for m in first["messages"]] == [FIRST, "The capital of France is Paris."]
    graph.invoke({"goal": FOLLOW_UP}, thread)
    assert FIRST in second_prompts(model)["planner"]


def test_what_a_run_left_open_is_in_the_next_runs_view(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict(
        {
            "planner": [plan(spec("capital")), plan(spec("population"))],
            "actors": {
                "capital": [submit("no atlas at hand", status="failed")],
                "population": [submit("2.1 million")],
            },
            "verifier": [{"passed": False, "reasoning": "No capital named.", "issues": ["x"]}],
        }
    )
    graph = build_aime_graph(
        model,
        config=AimeConfig(workspace=workspace, task_retries=0, max_replans=0),
        checkpointer=InMemorySaver(),
    )
    thread = thread_config("open")
    first = graph.invoke({"messages": [HumanMessage(FIRST)]}, thread)
    assert first["status"] == "budget_exhausted"
    graph.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, thread)
    planner = model.prompts("planner")[1]
    assert "Left open: Task capital (failed); the run ended budget_exhausted" in planner


def test_older_turns_are_shortened_then_left_out_past_the_budget() -> None:
    messages = []
    for n in range(1, 41):
        messages += [HumanMessage(f"Question {n}? " + "why " * 40), AIMessage(f"Answer {n}. " * 30)]
    turns = past_turns(messages)
    view = conversation_view(turns, max_tokens=800)

    assert "Question 40?" in view and "Answer 40. Answer 40." in view  # the newest, whole
    assert "In brief," in view and "- asked: Question 3?" not in view
    assert "older turn(s) left out" in view
    # Bounded: within the budget's characters (about four per token), labels included.
    assert len(view) <= 800 * 4 + 200
    assert conversation_view(turns, max_tokens=0) == ""
    assert conversation_view([], max_tokens=800) == ""


def test_a_reply_too_long_for_the_budget_is_shortened_not_dropped() -> None:
    turns = past_turns([HumanMessage("Summarise the report"), AIMessage("long " * 5000)])
    view = conversation_view(turns, max_tokens=200)
    assert "- asked: Summarise the report | replied: long long" in view and len(view) < 1000


def test_max_conversation_tokens_zero_shows_no_earlier_turns(workspace: Path) -> None:
    model = capital_then_population()
    graph = build_aime_graph(
        model,
        config=AimeConfig(workspace=workspace, max_conversation_tokens=0),
        checkpointer=InMemorySaver(),
    )
    thread = thread_config("off")
    graph.invoke({"messages": [HumanMessage(FIRST)]}, thread)
    graph.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, thread)
    assert FIRST not in second_prompts(model)["planner"]


def test_actors_get_the_newest_turns_within_a_quarter_of_the_budget(workspace: Path) -> None:
    model = capital_then_population()
    config = AimeConfig(workspace=workspace, max_conversation_tokens=600)
    graph = build_aime_graph(model, config=config, checkpointer=InMemorySaver())
    thread = thread_config("actors")
    long_first = FIRST + " Please be thorough." * 60
    graph.invoke({"messages": [HumanMessage(long_first)]}, thread)
    graph.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, thread)
    prompts: dict[str, Any] = second_prompts(model)
    assert long_first in prompts["planner"]  # whole within the full budget
    assert long_first not in prompts["actor"]  # a line of it within a quarter
    assert "- asked: What is the capital of France? Please be" in prompts["actor"]
