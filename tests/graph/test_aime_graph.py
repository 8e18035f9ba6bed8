"""The aime graph end to end through the public API, with the scripted model."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from tests.conftest import GraphFactory, steps_of
from tests.scripted import plan, spec, submit

NO_CHANGE = plan()


def test_diamond_runs_a_and_b_together_and_c_sees_both(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {
            "planner": [plan(spec("a", tool_bundles=["compute"]), spec("b"), spec("c", "a", "b"))],
            "actors": {
                "a": [
                    {"tool": "calculator", "args": {"expression": "6*7"}},
                    submit("a computed {last_tool_output}"),
                ],
                "b": [submit("b found 17 rows")],
                "c": [submit("c combined [{dep:a}] and [{dep:b}]")],
            },
            "reporter": [{"text": "Answer: {result:c}"}],
        },
        scheduler="batch",  # super-steps per batch; the eager runner: tests/graph/test_scheduler.py
    )
    steps = steps_of(graph, {"goal": "diamond"})
    executor_steps = [step for step, name in steps if name == "executor"]
    assert len(executor_steps) == 3
    assert executor_steps[0] == executor_steps[1] < executor_steps[2]

    model.reset()
    out = graph.invoke({"goal": "diamond"})
    assert out["status"] == "succeeded"
    assert out["tasks"]["c"].result.summary == "c combined [a computed 42] and [b found 17 rows]"
    assert out["final_answer"] == "Answer: c combined [a computed 42] and [b found 17 rows]"
    assert isinstance(out["messages"][-1], AIMessage)
    assert out["messages"][-1].content == out["final_answer"]
    assert out["verdict"].passed
    assert all(t.status == "completed" and t.attempts == 1 for t in out["tasks"].values())
    # The calculator; the three submit_result calls are reports, not tool calls.
    assert out["usage"].tool_calls == 1 and out["usage"].by_role["actor"].llm_calls == 4
    # The actor of c was handed both dependency results, and the verifier never saw the plan.
    actor_c = next(p for p in model.prompts("actor") if '<task id="c"' in p)
    assert '<dependency id="a">' in actor_c and '<dependency id="b">' in actor_c
    (verifier_prompt,) = model.prompts("verifier")
    assert "Task a" not in verifier_prompt and "Answer: c combined" in verifier_prompt


def test_failed_task_is_retried_then_replanned_then_succeeds(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {
            "planner": [
                plan(spec("t1")),
                plan(spec("t2", description="another way")),
            ],
            "actors": {
                "t1": {
                    "attempts": [
                        [submit("source offline", "failed")],
                        [submit("still offline", "failed")],
                    ]
                },
                "t2": [submit("done via mirror")],
            },
            "reporter": [{"text": "{all_results}"}],
        },
        task_retries=1,
    )
    out = graph.invoke({"goal": "fetch the data"})
    assert out["status"] == "succeeded"
    t1, t2 = out["tasks"]["t1"], out["tasks"]["t2"]
    assert t1.attempts == 2 and t1.status == "skipped" and t1.result.summary == "still offline"
    assert t2.status == "completed" and out["replans"] == 1
    # The second attempt was told why the first failed; the replan saw the failure.
    second_attempt = [p for p in model.prompts("actor") if 'attempt="2"' in p]
    assert second_attempt and "source offline" in second_attempt[0]
    replan_prompt = model.prompts("planner")[1]
    assert "failed after their retries" in replan_prompt and "still offline" in replan_prompt


def test_verifier_rejection_leads_to_a_successful_replan(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {
            "planner": [plan(spec("t1")), plan(spec("t2", "t1", title="Add the totals"))],
            "actors": {"t1": [submit("rows counted")], "t2": [submit("totals added: 99")]},
            "verifier": [
                {"passed": False, "reasoning": "incomplete", "issues": ["the totals are missing"]},
                {"passed": True, "reasoning": "complete", "issues": []},
            ],
        }
    )
    out = graph.invoke({"goal": "count and total"})
    assert out["status"] == "succeeded" and out["verdict"].passed
    assert out["replans"] == 1
    assert out["tasks"]["t1"].status == out["tasks"]["t2"].status == "completed"
    assert "the totals are missing" in model.prompts("planner")[1]
    assert "totals added: 99" in out["final_answer"]


def test_rejection_without_replans_left_ends_rejected(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("t1"))],
            "verifier": [{"passed": False, "reasoning": "wrong", "issues": ["wrong figure"]}],
        },
        max_replans=0,
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "rejected" and not out["verdict"].passed
    assert "no replans left" in out["reason"]


def test_llm_call_budget_stops_with_a_partial_report(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {
            "planner": [plan(spec("a"), spec("b", "a"), spec("c", "b"))],
            "actors": {"a": [submit("a done")], "b": [submit("b done")], "c": [submit("c done")]},
        },
        max_llm_calls=3,
    )
    out = graph.invoke({"goal": "chain"})
    assert out["status"] == "budget_exhausted"
    assert "max_llm_calls (3)" in out["reason"]
    assert out["usage"].llm_calls == 3  # planner + a + b: then the budget check stops the run
    assert out["tasks"]["b"].status == "completed" and out["tasks"]["c"].status == "pending"
    assert "stopped before finishing" in out["final_answer"] and "b done" in out["final_answer"]
    assert model.prompts("reporter") == []  # the partial report needs no model call


def test_step_budget_and_replan_budget(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph({"planner": [plan(spec("a"), spec("b", "a"))]}, max_steps=1)
    out = graph.invoke({"goal": "two steps"})
    assert out["status"] == "budget_exhausted" and "max_steps" in out["reason"]

    graph, _ = scripted_graph(
        {"planner": [plan(spec("a"))], "actors": {"a": [submit("no", "failed")]}},
        task_retries=0,
        max_replans=0,
    )
    out = graph.invoke({"goal": "fails"})
    assert out["status"] == "budget_exhausted" and "no replans left" in out["reason"]
    assert out["tasks"]["a"].status == "failed"


def test_cyclic_plan_is_repaired(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {
            "planner": [
                plan(spec("a", "b"), spec("b", "a")),
                plan(spec("a"), spec("b", "a")),
            ]
        }
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded"
    prompts = model.prompts("planner")
    assert len(prompts) == 2 and "dependency cycle" in prompts[1]


def test_plan_that_stays_invalid_fails_cleanly(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {"planner": [plan(spec("a", "b"), spec("b", "a"))]}, max_plan_repairs=2
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "failed"
    assert (
        "no valid plan in 3 draft(s): max_plan_repairs (2) used up" in out["reason"]
        and "dependency cycle" in out["reason"]
    )
    assert len(model.prompts("planner")) == 3
    assert out["tasks"] == {} or all(t.status == "pending" for t in out["tasks"].values())
    assert "stopped before finishing (failed)" in out["final_answer"]


def test_malformed_planner_output_is_sent_back(scripted_graph: GraphFactory) -> None:
    graph, model = scripted_graph(
        {"planner": [{"rationale": "no tasks key but bad type", "tasks": "oops"}, plan(spec("a"))]}
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded"
    assert "does not match the schema" in model.prompts("planner")[1]


def test_every_step_consults_the_planner_after_each_batch(scripted_graph: GraphFactory) -> None:
    scenario = {"planner": [plan(spec("a"), spec("b", "a"), spec("c", "b")), NO_CHANGE]}
    graph, model = scripted_graph(scenario, replan="every_step", scheduler="batch")
    names = [name for _, name in steps_of(graph, {"goal": "chain"})]
    assert names == [
        "intake", "planner", "orchestrator", "executor",
        "orchestrator", "planner", "orchestrator", "executor",
        "orchestrator", "planner", "orchestrator", "executor",
        "orchestrator", "reporter", "verifier",
    ]  # fmt: skip
    assert len(model.prompts("planner")) == 3

    on_failure, _ = scripted_graph(scenario)
    names = [name for _, name in steps_of(on_failure, {"goal": "chain"})]
    assert names.count("planner") == 1


def test_max_parallel_limits_each_batch(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {"planner": [plan(*(spec(f"t{i}") for i in range(5)))]}, max_parallel=2, scheduler="batch"
    )
    steps = steps_of(graph, {"goal": "five"})
    per_step: dict[int, int] = {}
    for step, name in steps:
        if name == "executor":
            per_step[step] = per_step.get(step, 0) + 1
    assert sorted(per_step.values()) == [1, 2, 2]


def test_run_context_overrides_the_built_config(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {"planner": [plan(*(spec(f"t{i}") for i in range(4)))]}, scheduler="batch"
    )
    events = [
        e
        for e in graph.stream({"goal": "four"}, stream_mode="debug", context={"max_parallel": 1})
        if e["type"] == "task" and e["payload"]["name"] == "executor"
    ]
    assert len({e["step"] for e in events}) == 4


def test_goal_from_the_last_human_message_inside_a_messages_graph(
    scripted_graph: GraphFactory,
) -> None:
    aime, model = scripted_graph(
        {"planner": [plan(spec("t1"))], "reporter": [{"text": "The answer is 42."}]}
    )
    app = StateGraph(MessagesState)
    app.add_node("aime", aime)
    app.add_edge(START, "aime")
    out = app.compile().invoke({"messages": [HumanMessage("What is six times seven?")]})
    assert [type(m) for m in out["messages"]] == [HumanMessage, AIMessage]
    assert out["messages"][-1].content == "The answer is 42."
    assert "What is six times seven?" in model.prompts("planner")[0]


def test_checklist_streams_in_custom_mode(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("a"))],
            "actors": {
                "a": [
                    {
                        "tool": "update_progress",
                        "args": {"status": "working", "message": "half way"},
                    },
                    submit("ok"),
                ]
            },
        }
    )
    custom = [
        payload
        for _, mode, payload in graph.stream(
            {"goal": "g"}, stream_mode=["updates", "custom"], subgraphs=True
        )
        if mode == "custom"
    ]
    checklists = [e["checklist"] for e in custom if e["type"] == "checklist"]
    assert checklists[0] == "- [~] a: Task a" and checklists[-1] == "- [x] a: Task a"
    assert {
        "type": "progress",
        "task_id": "a",
        "status": "working",
        "message": "half way",
    } in custom
    assert any(e["type"] == "final_answer" for e in custom)


def test_progress_updates_are_recorded(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("a"), spec("b"))],
            "actors": {
                "a": [
                    {
                        "tool": "update_progress",
                        "args": {"status": "working", "message": "reading"},
                    },
                    submit("a ok"),
                ]
            },
        }
    )
    out = graph.invoke({"goal": "g"})
    records = [(u.task_id, u.status, u.message) for u in out["updates"]]
    assert ("a", "working", "reading") in records
    assert ("a", "completed", "a ok") in records and ("b", "completed", "Task b: done") in records


def test_actor_step_cap_fails_the_task_and_keeps_partial_work(scripted_graph: GraphFactory) -> None:
    loop = [{"tool": "calculator", "args": {"expression": f"{i}*100"}} for i in range(1, 10)]
    graph, _ = scripted_graph(
        {"planner": [plan(spec("a", tool_bundles=["compute"]))], "actors": {"a": loop}},
        max_actor_steps=3,
        task_retries=0,
        max_replans=0,
    )
    out = graph.invoke({"goal": "g"})
    result = out["tasks"]["a"].result
    assert result.status == "failed" and "Stopped after 3 steps" in result.summary
    assert "max_actor_steps=3" in result.summary
    assert "300" in result.summary and "calculator" in result.summary  # the partial work


def test_model_failures_become_failed_tasks(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("a"))],
            "actors": {"a": [{"error": "fatal", "message": "model exploded"}]},
        },
        task_retries=0,
        max_replans=0,
    )
    out = graph.invoke({"goal": "g"})
    assert out["tasks"]["a"].result.summary == "model call failed: RuntimeError: model exploded"
    assert out["status"] == "budget_exhausted"


def test_transient_model_errors_are_retried_by_the_retry_policy(
    scripted_graph: GraphFactory,
) -> None:
    graph, _ = scripted_graph(
        {"planner": [{"error": "connection", "message": "reset by peer"}, plan(spec("a"))]}
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and out["usage"].by_role["planner"].llm_calls == 1


def test_answer_without_tool_call_is_the_final_summary(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {"planner": [plan(spec("a"))], "actors": {"a": [{"text": "The capital is Paris."}]}}
    )
    out = graph.invoke({"goal": "g"})
    assert out["tasks"]["a"].result.summary == "The capital is Paris."


def test_task_verification_fails_then_retry_passes(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(
        {
            "planner": [plan(spec("a", completion_criteria="states a number"))],
            "actors": {"a": {"attempts": [[submit("no number")], [submit("the number is 7")]]}},
            "task_checks": {
                "a": [
                    {"passed": False, "reasoning": "no number given", "issues": ["missing number"]},
                    {"passed": True, "reasoning": "ok", "issues": []},
                ]
            },
        },
        verify="tasks",
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded" and out["verdict"] is None
    task = out["tasks"]["a"]
    assert task.attempts == 2 and task.result.summary == "the number is 7"
    assert any("missing number" in u.message for u in out["updates"])


def test_empty_goal_fails_cleanly(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph({"planner": [plan(spec("a"))]})
    out = graph.invoke({"goal": "  "})
    assert out["status"] == "failed" and "no goal" in out["reason"]
