"""Human in the loop through the public API, while actors work: tool approval
(``approve_tools``), ``ask_human``, parallel actors waiting together, and notes,
``update_state`` and durability around a waiting actor.

Each run pauses with ``interrupt()``; the tests read the payload from the
snapshot (``snapshot.interrupts``) and resume with ``Command(resume=...)``.
Plan approval is in ``test_human.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.conftest import GraphFactory
from tests.graph.conftest import CONFIG, pending
from tests.scripted import plan, spec, submit

from aimegraph.graphs.compiled import WaitingTasksError
from aimegraph.waits import NO_DEADLINE


def ask(question: str) -> dict[str, Any]:
    return {"tool": "ask_human", "args": {"question": question}}


# --- approve_tools ---


CALC = {
    "planner": [plan(spec("a", tool_bundles=["compute"]))],
    "actors": {
        "a": [
            {"tool": "calculator", "args": {"expression": "6*7"}},
            submit("observed: {last_tool_output}"),
        ]
    },
}


def test_listed_tool_pauses_with_name_and_arguments_then_runs_when_approved(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(CALC, checkpointer=saver, approve_tools=["calculator"])
    out = graph.invoke({"goal": "multiply"}, CONFIG)
    (item,) = out["__interrupt__"]
    assert {k: item.value[k] for k in ("kind", "task_id", "tool", "args", "error")} == {
        "kind": "approve_tool",
        "task_id": "a",
        "tool": "calculator",
        "args": {"expression": "6*7"},
        "error": None,
    }
    # LangChain's HITLRequest, as its HumanInTheLoopMiddleware pauses.
    (action,) = item.value["action_requests"]
    assert action["name"] == "calculator" and action["args"] == {"expression": "6*7"}
    assert item.value["review_configs"] == [
        {"action_name": "calculator", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    out = graph.invoke(Command(resume={"action": "approve"}), CONFIG)
    assert out["status"] == "succeeded"
    assert out["tasks"]["a"].result.summary == "observed: 42"
    assert out["usage"].tool_calls >= 1


def test_denied_tool_call_becomes_the_actors_observation(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(CALC, checkpointer=saver, approve_tools=["calculator"])
    graph.invoke({"goal": "multiply"}, CONFIG)
    out = graph.invoke(Command(resume={"action": "deny", "reason": "no maths today"}), CONFIG)
    summary = out["tasks"]["a"].result.summary
    assert "42" not in summary
    assert "denied" in summary and "no maths today" in summary
    # The actor saw the denial as the tool's (error) observation.
    second_step = [p for p in model.prompts("actor") if "no maths today" in p]
    assert second_step
    assert out["status"] == "succeeded"


def test_tools_not_listed_run_without_asking(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(CALC, checkpointer=saver, approve_tools=["python"])
    out = graph.invoke({"goal": "multiply"}, CONFIG)
    assert "__interrupt__" not in out and out["tasks"]["a"].result.summary == "observed: 42"


# --- ask_human ---


ASKING = {
    "planner": [plan(spec("a", tool_bundles=["human"]))],
    "actors": {"a": [ask("Which region?"), submit("the human said: {last_tool_output}")]},
}


@pytest.mark.parametrize("answer", ["North", {"answer": "North"}])
def test_ask_human_answer_comes_back_as_the_tool_result(
    scripted_graph: GraphFactory, saver: InMemorySaver, answer: Any
) -> None:
    graph, _ = scripted_graph(ASKING, checkpointer=saver)
    out = graph.invoke({"goal": "pick a region"}, CONFIG)
    (item,) = out["__interrupt__"]
    assert item.value == {"kind": "ask_human", "question": "Which region?"} | NO_DEADLINE
    out = graph.invoke(Command(resume=answer), CONFIG)
    assert out["status"] == "succeeded"
    assert out["tasks"]["a"].result.summary == "the human said: North"


def test_ask_human_with_an_empty_answer(scripted_graph: GraphFactory, saver: InMemorySaver) -> None:
    graph, _ = scripted_graph(ASKING, checkpointer=saver)
    graph.invoke({"goal": "g"}, CONFIG)
    out = graph.invoke(Command(resume=""), CONFIG)
    assert out["tasks"]["a"].result.summary == "the human said: (the human gave no answer)"


@pytest.mark.parametrize("tool_calling", ["native", "json"])
@pytest.mark.parametrize(
    ("question", "why"),
    [
        # What the bundled Gemma sends: the argument's own description.
        ("A short, specific question for the human user.", "only restates"),
        ("Ask the human user a question", "only restates"),
        ("  ", "is empty"),
    ],
)
def test_a_question_with_nothing_to_answer_is_refused_without_pausing(
    scripted_graph: GraphFactory, saver: InMemorySaver, tool_calling: str, question: str, why: str
) -> None:
    scenario = {
        "planner": [plan(spec("a", tool_bundles=["human"]))],
        "actors": {"a": [ask(question), submit("carried on: {last_tool_output}")]},
    }
    graph, _ = scripted_graph(scenario, checkpointer=saver, tool_calling=tool_calling, verify="off")
    out = graph.invoke({"goal": "pick a region"}, CONFIG)
    assert "__interrupt__" not in out and out["status"] == "succeeded"
    # The actor's next step saw the refusal as ask_human's error observation.
    summary = out["tasks"]["a"].result.summary
    assert summary.startswith("carried on: Error: invalid arguments for ask_human")
    assert f"the question {why}" in summary


PARALLEL = {
    "planner": [
        plan(
            spec("a", tool_bundles=["human"]),
            spec("b", tool_bundles=["human"]),
            spec("c", "a", "b"),
        )
    ],
    "actors": {
        "a": [ask("Question from a?"), submit("a got {last_tool_output}")],
        "b": [ask("Question from b?"), submit("b got {last_tool_output}")],
        "c": [submit("c combined [{dep:a}] [{dep:b}]")],
    },
}


def _by_question(interrupts: list[Any]) -> dict[str, str]:
    return {i.value["question"]: i.id for i in interrupts}


def test_parallel_actors_pause_together_and_resume_by_interrupt_id(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(PARALLEL, checkpointer=saver)
    out = graph.invoke({"goal": "ask twice"}, CONFIG)
    ids = _by_question(out["__interrupt__"])
    assert set(ids) == {"Question from a?", "Question from b?"}
    assert len(set(ids.values())) == 2

    out = graph.invoke(
        Command(
            resume={ids["Question from a?"]: "alpha", ids["Question from b?"]: {"answer": "beta"}}
        ),
        CONFIG,
    )
    assert out["status"] == "succeeded"
    assert out["tasks"]["a"].result.summary == "a got alpha"
    assert out["tasks"]["b"].result.summary == "b got beta"
    assert out["tasks"]["c"].result.summary == "c combined [a got alpha] [b got beta]"


def test_parallel_interrupts_can_be_answered_one_at_a_time(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(PARALLEL, checkpointer=saver)
    graph.invoke({"goal": "ask twice"}, CONFIG)
    ids = _by_question(pending(graph))

    out = graph.invoke(Command(resume={ids["Question from b?"]: "beta"}), CONFIG)
    # b is answered; a still waits, with the same id, and nothing else moved on.
    (left,) = out["__interrupt__"]
    assert left.id == ids["Question from a?"] and left.value["question"] == "Question from a?"
    assert not any('<task id="c"' in p for p in model.prompts("actor"))

    out = graph.invoke(Command(resume={left.id: "alpha"}), CONFIG)
    assert out["status"] == "succeeded"
    assert out["tasks"]["a"].result.summary == "a got alpha"
    assert out["tasks"]["b"].result.summary == "b got beta"
    # Each actor asked its question once: b was not re-asked while a waited.
    b_prompts = [p for p in model.prompts("actor") if '<task id="b"' in p]
    assert len(b_prompts) == 2  # the question, then the submission


def test_parallel_tool_approvals_each_get_their_own_answer(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    calc = {"tool": "calculator", "args": {"expression": "2+2"}}
    graph, _ = scripted_graph(
        {
            "planner": [
                plan(spec("a", tool_bundles=["compute"]), spec("b", tool_bundles=["compute"]))
            ],
            "actors": {
                "a": [calc, submit("a: {last_tool_output}")],
                "b": [calc, submit("b: {last_tool_output}")],
            },
        },
        checkpointer=saver,
        approve_tools=["calculator"],
    )
    out = graph.invoke({"goal": "g"}, CONFIG)
    ids = {i.value["task_id"]: i.id for i in out["__interrupt__"]}
    assert set(ids) == {"a", "b"}
    out = graph.invoke(
        Command(
            resume={
                ids["a"]: {"action": "approve"},
                ids["b"]: {"action": "deny", "reason": "not b"},
            }
        ),
        CONFIG,
    )
    assert out["tasks"]["a"].result.summary == "a: 4"
    assert "not b" in out["tasks"]["b"].result.summary


# --- notes and durability ---


REJECTED_ONCE = {
    "planner": [plan(spec("a")), plan(spec("b", "a"))],
    "actors": {"a": [submit("a ok")], "b": [submit("b ok")]},
    "verifier": [
        {"passed": False, "reasoning": "incomplete", "issues": ["b is missing"]},
        {"passed": True, "reasoning": "ok", "issues": []},
    ],
}
NOTE = "Prefer the EU mirror for b."


def _note_reached_only_the_replan(model: Any) -> None:
    first, *later = model.prompts("planner")
    assert NOTE not in first
    assert later and all(NOTE in p for p in later)


def test_a_note_added_between_steps_reaches_the_planner_at_the_next_replan(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, model = scripted_graph(REJECTED_ONCE, checkpointer=saver)
    graph.invoke({"goal": "g"}, CONFIG, interrupt_before=["orchestrator"])
    assert graph.get_state(CONFIG).next == ("orchestrator",)

    graph.update_state(CONFIG, {"notes": [NOTE]})
    assert graph.get_state(CONFIG).values["notes"] == [NOTE]
    assert graph.get_state(CONFIG).next == ("orchestrator",)
    out = graph.invoke(None, CONFIG)
    assert out["status"] == "succeeded" and out["replans"] == 1
    _note_reached_only_the_replan(model)
    assert "b is missing" in model.prompts("planner")[1]


def test_a_note_after_a_batch_of_actors(scripted_graph: GraphFactory, saver: InMemorySaver) -> None:
    # The executor runs the batch (with a streamed plan the planner's node would).
    graph, model = scripted_graph(REJECTED_ONCE, checkpointer=saver, stream_plans=False)
    graph.invoke({"goal": "g"}, CONFIG, interrupt_after=["executor"])
    assert graph.get_state(CONFIG).next == ("orchestrator",)
    # Executors start from Send, so LangGraph cannot infer them as the writer: name it.
    graph.update_state(CONFIG, {"notes": [NOTE]}, as_node="executor")
    assert graph.invoke(None, CONFIG)["status"] == "succeeded"
    _note_reached_only_the_replan(model)


def test_a_note_given_with_the_answer_to_a_waiting_actor(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    scenario = {
        **REJECTED_ONCE,
        "planner": [plan(spec("a", tool_bundles=["human"])), plan(spec("b", "a"))],
        "actors": {"a": [ask("Which mirror?"), submit("a ok")], "b": [submit("b ok")]},
    }
    graph, model = scripted_graph(scenario, checkpointer=saver)
    graph.invoke({"goal": "g"}, CONFIG)
    out = graph.invoke(Command(resume="any", update={"notes": [NOTE]}), CONFIG)
    assert out["status"] == "succeeded"
    assert graph.get_state(CONFIG).values["notes"] == [NOTE]
    _note_reached_only_the_replan(model)


def test_update_state_while_an_actor_waits_is_refused_and_keeps_the_actor(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    # LangGraph's update_state starts a new step without the pending Send tasks: the
    # waiting actor would be dropped. The engine refuses and names the ways that work.
    graph, _ = scripted_graph(ASKING, checkpointer=saver)
    graph.invoke({"goal": "g"}, CONFIG)
    with pytest.raises(WaitingTasksError, match=r"Command\(resume=\.\.\., update="):
        graph.update_state(CONFIG, {"notes": [NOTE]})
    assert pending(graph), "the ask_human interrupt was lost"
    assert graph.get_state(CONFIG).values.get("notes") in (None, [])

    # Command(update=...) alone keeps the actor waiting, with the note in the state.
    graph.invoke(Command(update={"notes": [NOTE]}), CONFIG)
    assert pending(graph) and graph.get_state(CONFIG).values["notes"] == [NOTE]
    out = graph.invoke(Command(resume="North"), CONFIG)
    assert out["status"] == "succeeded"
    assert out["tasks"]["a"].result.summary == "the human said: North"


async def test_aupdate_state_while_an_actor_waits_is_refused(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    graph, _ = scripted_graph(ASKING, checkpointer=saver)
    await graph.ainvoke({"goal": "g"}, CONFIG)
    with pytest.raises(WaitingTasksError):
        await graph.aupdate_state(CONFIG, {"notes": [NOTE]})
    assert (await graph.aget_state(CONFIG)).interrupts


def test_update_state_naming_the_node_may_replace_a_waiting_step(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    # An explicit as_node is the caller taking over the step, as LangGraph does it.
    graph, _ = scripted_graph(ASKING, checkpointer=saver)
    graph.invoke({"goal": "g"}, CONFIG)
    graph.update_state(CONFIG, {"notes": [NOTE]}, as_node="orchestrator")
    assert not pending(graph) and graph.get_state(CONFIG).values["notes"] == [NOTE]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_durability_is_passed_through_to_the_checkpointer(
    scripted_graph: GraphFactory, saver: InMemorySaver, durability: str
) -> None:
    graph, _ = scripted_graph({"planner": [plan(spec("a"), spec("b", "a"))]}, checkpointer=saver)
    out = graph.invoke({"goal": "g"}, CONFIG, durability=durability)
    assert out["status"] == "succeeded"
    history = list(graph.get_state_history(CONFIG))
    assert history[0].values["status"] == "succeeded" and history[0].next == ()
    if durability == "exit":
        # Only the final checkpoint and the input one that the DeltaChannel keys
        # (tasks, updates) replay from: no per-step saves, cheapest, not crash-safe.
        assert len(history) == 2 and history[1].metadata["step"] == -2
    else:
        assert len(history) > 5  # one per super-step: resumable from any of them


def test_cancelling_a_paused_run_keeps_the_usage_of_the_actor_that_waits(
    scripted_graph: GraphFactory, saver: InMemorySaver
) -> None:
    from aimegraph.steering import cancel_run

    scenario = {
        "planner": [plan(spec("a"), spec("b"))],
        "actors": {"a": [submit("a ok")], "b": [ask("Which region?"), submit("b ok")]},
    }
    graph, _ = scripted_graph(scenario, checkpointer=saver)
    out = graph.invoke({"goal": "ask once"}, CONFIG)
    assert [i.value["question"] for i in out["__interrupt__"]] == ["Which region?"]
    assert cancel_run(graph, CONFIG["configurable"]["thread_id"]) == "cancelled"
    final = graph.get_state(CONFIG).values
    assert final["status"] == "cancelled"
    # The planner's call, a's and b's (the one that asked, before the pause).
    assert final["usage"].llm_calls == 3
    assert final["usage"].by_task["b"].llm_calls == 1
