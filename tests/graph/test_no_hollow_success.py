"""No hollow success: a first plan without tasks is re-asked unless the planner says
the goal needs no work, and a final answer that only restates the reporter's
prompt is not a success (issue 24 point 6)."""

from __future__ import annotations

from tests.conftest import GraphFactory
from tests.scripted import plan, spec, submit

from aimegraph.prompts import reporter as reporter_prompts

EMPTY = {"rationale": "Nothing to do.", "tasks": []}

# What a small model sends back when it echoes its prompt (the local Gemma).
ECHO = reporter_prompts.SYSTEM + reporter_prompts.REQUEST.format(
    goal="{goal}", conversation="", results="(no results)"
)


def test_an_empty_first_plan_is_sent_back_and_the_next_one_runs(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph(
        {"planner": [EMPTY, plan(spec("t1"))], "actors": {"t1": [submit("done it")]}},
        verify="off",
    )
    out = graph.invoke({"goal": "Count the files"})
    assert out["status"] == "succeeded" and list(out["tasks"]) == ["t1"]
    repair = model.prompts("planner")[1]
    assert "the plan has no tasks" in repair and "no_work_needed" in repair


def test_empty_plans_until_the_repairs_run_out_fail_the_run_saying_so(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph({"planner": [EMPTY]}, verify="off", max_plan_repairs=1)
    out = graph.invoke({"goal": "Count the files"})
    assert out["status"] == "failed"
    assert "max_plan_repairs (1) used up" in out["reason"] and "no tasks" in out["reason"]
    assert model.prompts("reporter") == [] and model.prompts("actor") == []


def test_a_plan_that_says_no_work_is_needed_is_answered_directly(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [{**EMPTY, "no_work_needed": True}],
            "reporter": [{"text": "Hello! How can I help?"}],
        }
    )
    out = graph.invoke({"goal": "Hi there"})
    assert out["status"] == "succeeded" and out["tasks"] == {}
    assert out["final_answer"] == "Hello! How can I help?"
    assert len(model.prompts("planner")) == 1 and model.prompts("actor") == []


def test_an_answer_restating_the_reporters_prompt_fails_the_run_without_verification(
    scripted_graph: GraphFactory,
) -> None:
    graph, model = scripted_graph(
        {
            "planner": [plan(spec("t1"))],
            "actors": {"t1": [submit("There are 3 files.")]},
            "reporter": [{"text": ECHO}],
        },
        verify="off",
    )
    out = graph.invoke({"goal": "Count the files in the workspace"})
    assert out["status"] == "failed"
    assert "restated its instructions in 3 replies (max_output_retries=2)" in out["reason"]
    assert "There are 3 files." in out["final_answer"]  # the results as they are
    assert len(model.prompts("reporter")) == 3
    assert reporter_prompts.RESTATED.split("\n")[0] in model.prompts("reporter")[1]


def test_an_echo_is_asked_again_and_a_real_answer_then_succeeds(
    scripted_graph: GraphFactory,
) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("t1"))],
            "actors": {"t1": [submit("There are 3 files.")]},
            "reporter": [{"text": ECHO}, {"text": "The workspace holds 3 files."}],
        },
        verify="off",
    )
    out = graph.invoke({"goal": "Count the files in the workspace"})
    assert out["status"] == "succeeded" and out["final_answer"] == "The workspace holds 3 files."
    assert out["usage"].by_role["reporter"].llm_calls == 2


def test_an_answer_that_repeats_the_goal_is_still_an_answer(scripted_graph: GraphFactory) -> None:
    goal = "List the three largest files in the workspace with their sizes in bytes"
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("t1"))],
            "reporter": [{"text": f"{goal}: a.csv 300, b.csv 200, c.csv 100."}],
        },
        verify="off",
    )
    out = graph.invoke({"goal": goal})
    assert out["status"] == "succeeded", out.get("reason")
