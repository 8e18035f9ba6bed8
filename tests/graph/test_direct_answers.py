"""One call where one will do, and verification that pays (issue 34 points 2 and 6).

The planner's first reply may be the answer (a greeting; a follow-up the earlier turn
answers), or plain calls of the run's tools (native tool calling), each a tool step.
``verify="auto"`` skips the verifier only for an answer written from clean tool steps
that passes the figure check; a hollow answer never ends ``succeeded``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.models.offline.fuzz import FuzzChatModel
from aimegraph.nodes.verify_policy import ungrounded

GREETING = {"rationale": "A greeting.", "tasks": [], "answer": "Hello! How can I help?"}
HOLLOW = {"rationale": "Nothing to do.", "tasks": [], "answer": "Done: all of it is handled."}
REJECTED = {"passed": False, "reasoning": "Nothing was counted.", "issues": ["no count"]}


@tool
def lookup(city: str) -> str:
    """The weather record of a city, as JSON."""
    return json.dumps({"city": city, "max": {"Oslo": 21, "Bergen": 17}.get(city, 0)})


failures = {"left": 0}


@tool
def flaky(city: str) -> str:
    """Fails on every other call."""
    failures["left"] = 1 - failures["left"]
    if failures["left"]:
        raise ValueError("the service is busy")
    return f"{city}: 21"


def calls_by_role(out: dict[str, Any]) -> dict[str, int]:
    return {role: used.llm_calls for role, used in out["usage"].by_role.items() if used.llm_calls}


def test_a_greeting_is_answered_by_the_planner_and_checked_once(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph({"planner": [GREETING]})
    out = graph.invoke({"goal": "Hi there"})
    assert out["status"] == "succeeded" and out["tasks"] == {}
    assert out["final_answer"] == "Hello! How can I help?"
    assert isinstance(out["messages"][-1], AIMessage)
    assert out["messages"][-1].text == "Hello! How can I help?"
    # The planner's call and the verifier's: no reporter call for an answer written.
    assert calls_by_role(out) == {"planner": 1, "verifier": 1}
    assert model.prompts("reporter") == [] and model.prompts("actor") == []
    assert "Hello! How can I help?" in model.prompts("verifier")[0]


def test_a_greeting_without_verification_is_one_call(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph({"planner": [GREETING]}, verify="off")
    out = graph.invoke({"goal": "Hi there"})
    assert out["status"] == "succeeded" and out["final_answer"] == "Hello! How can I help?"
    assert out["usage"].llm_calls == 1


def test_a_follow_up_the_earlier_turn_answers_is_answered_directly(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict(
        {
            "planner": [
                plan(spec("capital")),
                {"tasks": [], "answer": "As I said: Paris is the capital of France."},
            ],
            "actors": {"capital": [submit("Paris")]},
            "reporter": [{"text": "The capital of France is Paris."}],
        }
    )
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace), checkpointer=InMemorySaver()
    )
    config = thread_config("capital")
    first = graph.invoke({"goal": "What is the capital of France?"}, config)
    assert first["status"] == "succeeded"
    out = graph.invoke({"goal": "Remind me: which city was it?"}, config)
    assert out["status"] == "succeeded" and out["tasks"] == {}
    assert out["final_answer"] == "As I said: Paris is the capital of France."
    assert calls_by_role(out) == {"planner": 1, "verifier": 1}
    # The planner saw the earlier turn, which is what let it answer.
    assert "The capital of France is Paris." in model.prompts("planner")[1]
    assert [m.text for m in out["messages"] if isinstance(m, AIMessage)] == [
        "The capital of France is Paris.",
        "As I said: Paris is the capital of France.",
    ]


@pytest.mark.parametrize("mode", ["native", "json"])
@pytest.mark.parametrize("seed", range(4))
def test_a_hollow_direct_answer_to_work_never_succeeds_even_fuzzed(
    workspace: Path, mode: str, seed: int
) -> None:
    inner = ScriptedChatModel.from_dict({"planner": [HOLLOW], "verifier": [REJECTED]})
    model = FuzzChatModel(inner=inner, seed=seed)
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace, tool_calling=mode, max_replans=1)
    )
    out = graph.invoke({"goal": "Count the files in the workspace"})
    assert out["status"] == "rejected", out.get("reason")
    # Each direct answer went to the verifier (the fuzz model's empty replies re-asked).
    answers = [p for p in inner.prompts("verifier") if HOLLOW["answer"] in p]
    assert len({p for p in answers}) >= 1 and len(answers) >= 2
    assert inner.prompts("reporter") == []


def test_planner_tool_calls_are_tool_steps_run_in_parallel(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {
            "planner": [{"calls": [call("lookup", city="Oslo"), call("lookup", city="Bergen")]}],
            "reporter": [{"text": "Oslo reaches 21 degrees, Bergen 17."}],
        },
        tools=[lookup],
        planner_tools=True,
    )
    out = graph.invoke({"goal": "Highest temperatures in Oslo and Bergen?"})
    assert out["status"] == "succeeded", out.get("reason")
    tasks = out["tasks"]
    assert [(t.id, t.title, t.dependencies) for t in tasks.values()] == [
        ("t1", "lookup", ()),
        ("t2", "lookup", ()),
    ]
    assert json.loads(tasks["t2"].result.summary) == {"city": "Bergen", "max": 17}
    # Planner and reporter: the answer is made from clean tool steps and quotes them.
    assert calls_by_role(out) == {"planner": 1, "reporter": 1}
    assert model.prompts("actor") == [] and model.prompts("verifier") == []


def test_planner_tool_calls_beside_a_plan_join_it(scripted_graph: GraphFactory) -> None:
    both = {
        "calls": [{"tool": "PlanUpdate", "args": plan(spec("t1"))}, call("lookup", city="Oslo")]
    }
    graph, _ = scripted_graph(
        {"planner": [both], "actors": {"t1": [submit("Wrote the advice.")]}},
        tools=[lookup],
        planner_tools=True,
    )
    out = graph.invoke({"goal": "Weather advice for Oslo"})
    assert out["status"] == "succeeded", out.get("reason")
    assert out["tasks"]["t1"].call is None and out["tasks"]["t2"].call is not None
    assert out["tasks"]["t2"].call.args == {"city": "Oslo"}


def test_a_planner_call_of_an_unknown_tool_goes_back_to_the_planner(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [
                {"calls": [call("forecast", city="Oslo")]},
                {"calls": [call("lookup", city="Oslo")]},
            ],
            "reporter": [{"text": "Oslo reaches 21 degrees."}],
        },
        tools=[lookup],
        planner_tools=True,
    )
    out = graph.invoke({"goal": "Highest temperature in Oslo?"})
    assert out["status"] == "succeeded", out.get("reason")
    assert "calls unknown tool 'forecast'" in model.prompts("planner")[1]
    assert list(out["tasks"]) == ["t1"]


def test_the_planner_is_bound_the_work_tools_but_not_the_actors_own(
    scripted_graph: GraphFactory,
) -> None:
    bound: list[list[str]] = []

    class Recording(ScriptedChatModel):
        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
            bound.append([t["function"]["name"] for t in kw.get("tools") or []])
            return super()._generate(messages, stop, run_manager, **kw)

    model = Recording.from_dict({"planner": [GREETING]})
    graph = build_aime_graph(model, tools=[lookup], config=AimeConfig(verify="off"))
    graph.invoke({"goal": "Hi"})
    # By default the planner is bound the plan schema alone (its tool steps are `call`s).
    assert bound[0] == ["PlanUpdate"]
    graph.invoke({"goal": "Hi"}, context={"planner_tools": True})
    names = bound[-1]
    assert names[0] == "PlanUpdate" and "lookup" in names and "read_file" in names
    assert not {"ask_human", "submit_result", "update_progress", "remember"} & set(names)


def tool_steps_run(
    scripted_graph: GraphFactory, answer: str, **config: Any
) -> tuple[dict[str, Any], ScriptedChatModel]:
    graph, model = scripted_graph(
        {
            "planner": [plan(spec("t1", call={"tool": "lookup", "args": {"city": "Oslo"}}))],
            "reporter": [{"text": answer}],
            "verifier": [REJECTED],
        },
        tools=[lookup],
        max_replans=0,
        **config,
    )
    return graph.invoke({"goal": "How warm does it get in Oslo today?"}), model


def test_auto_skips_the_verifier_for_an_answer_from_clean_tool_steps(
    scripted_graph: GraphFactory,
) -> None:
    out, model = tool_steps_run(scripted_graph, "Oslo reaches 21 degrees today.")
    assert out["status"] == "succeeded" and model.prompts("verifier") == []
    assert out["usage"].llm_calls == 2


@pytest.mark.parametrize(
    "answer", ["Oslo reaches 25 degrees today.", "It is handled, all done and fine."]
)
def test_auto_verifies_an_answer_the_tool_outputs_do_not_support(
    scripted_graph: GraphFactory, answer: str
) -> None:
    out, model = tool_steps_run(scripted_graph, answer)
    assert out["status"] == "rejected" and len(model.prompts("verifier")) == 1


def test_final_still_verifies_every_answer(scripted_graph: GraphFactory) -> None:
    out, model = tool_steps_run(scripted_graph, "Oslo reaches 21 degrees today.", verify="final")
    assert out["status"] == "rejected" and len(model.prompts("verifier")) == 1


def test_auto_verifies_runs_with_actors_files_or_failures(scripted_graph: GraphFactory) -> None:
    answer = {"text": "Oslo reaches 21 degrees today."}
    cases = [
        # An actor did a task.
        {"planner": [plan(spec("t1"))], "actors": {"t1": [submit("21 degrees")]}},
        # A tool step wrote a file.
        {
            "planner": [
                plan(
                    spec("t1", call={"tool": "lookup", "args": {"city": "Oslo"}}),
                    spec(
                        "t2", call={"tool": "write_file", "args": {"path": "a.txt", "content": "x"}}
                    ),
                )
            ]
        },
        # A tool step failed once (then passed on its retry).
        {"planner": [plan(spec("t1", call={"tool": "flaky", "args": {"city": "Oslo"}}))]},
    ]
    for scenario in cases:
        graph, model = scripted_graph(
            {**scenario, "reporter": [answer], "verifier": [REJECTED]},
            tools=[lookup, flaky],
            max_replans=0,
            verifier_inspects="never",
        )
        out = graph.invoke({"goal": "How warm does it get in Oslo today?"})
        assert out["status"] == "rejected", (scenario, out.get("reason"))
        assert len(model.prompts("verifier")) == 1


def test_the_figure_check() -> None:
    outputs = ['{"total": 1300.50, "rows": 6}']
    assert ungrounded("The total is 1,300.5 over 6 rows.", outputs) is None
    assert ungrounded("17% of the total is 221.09.", outputs, ["What is 17% of it?"]) == (
        "the answer has figures no tool output shows: 221.09"
    )
    assert ungrounded("Six rows.", ["rows: 6"], ["How many rows?"]) == (
        "the answer quotes none of the tool outputs"
    )
    assert ungrounded("The file holds the invoice rows.", ["invoice rows: a, b"]) is None


class Reply(BaseModel):
    text: str


def test_a_direct_answer_with_a_response_format_is_typed_from_it(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict(
        {
            "planner": [GREETING],
            "reporter": [{"tool": "Reply", "args": {"text": "Hello! How can I help?"}}],
        }
    )
    graph = build_aime_graph(
        model, config=AimeConfig(workspace=workspace, verify="off"), response_format=Reply
    )
    out = graph.invoke({"goal": "Hi there"})
    assert out["status"] == "succeeded"
    assert out["structured_response"] == Reply(text="Hello! How can I help?")
    # The reporter typed the planner's answer (it had no task results to go on).
    assert "Hello! How can I help?" in model.prompts("reporter")[0]
