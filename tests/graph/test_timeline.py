"""Timestamps a run records: each task's ready, start and end times, each tool call's
span, and the planner's, reporter's and verifier's calls (``spans``). Only their
order is asserted, never how long anything took."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from tests.conftest import GraphFactory
from tests.scripted import call, plan, spec, submit

from aimegraph.state import Task, run_timeline


def ordered(task: Task) -> bool:
    assert task.ready_at is not None and task.started_at is not None
    assert task.ended_at is not None
    return task.ready_at <= task.started_at <= task.ended_at


@pytest.mark.parametrize("scheduler", ["eager", "batch"])
def test_parallel_and_dependent_tasks_record_ready_started_and_ended_in_order(
    scripted_graph: GraphFactory, scheduler: str
) -> None:
    scenario = {
        "planner": [plan(spec("a"), spec("b"), spec("c", "a", "b"))],
        "actors": {"a": [submit("a ok")], "b": [submit("b ok")], "c": [submit("c ok")]},
        "reporter": [{"text": "done"}],
    }
    graph, _ = scripted_graph(
        scenario, scheduler=scheduler, verify="final", checkpointer=InMemorySaver()
    )
    config: dict[str, Any] = {"configurable": {"thread_id": scheduler}}
    assert graph.invoke({"goal": "g"}, config)["status"] == "succeeded"
    out = graph.get_state(config).values  # with the run's start, which is no output key
    a, b, c = (out["tasks"][i] for i in "abc")
    assert all(ordered(t) for t in (a, b, c))
    assert a.ended_at is not None and b.ended_at is not None and c.started_at is not None
    # a and b ran side by side, both ready when the plan was committed ...
    assert a.ready_at == b.ready_at and a.started_at == b.started_at
    assert a.started_at <= b.ended_at and b.started_at <= a.ended_at
    # ... and c was ready when the later of them ended, and started after that.
    assert c.ready_at == max(a.ended_at, b.ended_at) <= c.started_at

    spans = out["spans"]
    assert [s.name for s in spans] == ["planner", "reporter", "verifier"]
    planner, reporter, verifier = spans
    assert all(s.started_at <= s.ended_at for s in spans)
    assert planner.ended_at <= a.ready_at and out["run_started_at"] <= planner.started_at
    assert c.ended_at is not None and c.ended_at <= reporter.started_at
    assert reporter.ended_at <= verifier.started_at

    timeline = run_timeline(out)
    assert [bar.name for bar in timeline.bars] == ["planner", "a", "b", "c", "reporter", "verifier"]
    assert timeline.time_to_first_task_s == a.started_at - out["run_started_at"]
    assert timeline.critical_path[-1] == "c" and timeline.critical_path[0] in ("a", "b")


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_tool_calls_span_brackets_the_call_itself(scripted_graph: GraphFactory, run: str) -> None:
    called_at: list[float] = []

    @tool
    def stamp() -> str:
        """Note when it ran."""
        called_at.append(time.time())
        return "stamped"

    scenario = {
        "planner": [plan(spec("t1", tool_bundles=["custom"]))],
        "actors": {"t1": [call("stamp"), call("stamp"), submit("{last_tool_output}")]},
    }
    graph, _ = scripted_graph(scenario, tools=[stamp])
    out = (
        graph.invoke({"goal": "g"})
        if run == "invoke"
        else asyncio.run(graph.ainvoke({"goal": "g"}))
    )
    task = out["tasks"]["t1"]
    assert task.status == "completed" and ordered(task)
    assert [s.name for s in task.tool_spans] == ["stamp", "stamp"]
    for span, at in zip(task.tool_spans, called_at, strict=True):
        assert task.started_at is not None and task.ended_at is not None
        assert task.started_at <= span.started_at <= at <= span.ended_at <= task.ended_at
    first, second = task.tool_spans
    assert first.ended_at <= second.started_at and first.duration_s >= 0


def test_a_tool_steps_call_is_timed_too(scripted_graph: GraphFactory) -> None:
    scenario = {
        "planner": [plan(spec("t1", call={"tool": "calculator", "args": {"expression": "6*7"}}))],
    }
    graph, _ = scripted_graph(scenario)
    task = graph.invoke({"goal": "g"})["tasks"]["t1"]
    assert task.result is not None and task.result.summary == "42" and ordered(task)
    assert [s.name for s in task.tool_spans] == ["calculator"]


def test_a_retried_task_is_ready_again_when_its_failed_attempt_ended(
    scripted_graph: GraphFactory,
) -> None:
    scenario = {
        "planner": [plan(spec("t1"))],
        "actors": {"t1": {"attempts": [[submit("not yet", status="failed")], [submit("done")]]}},
    }
    graph, _ = scripted_graph(scenario, task_retries=1)
    out = graph.invoke({"goal": "g"})
    task = out["tasks"]["t1"]
    assert task.status == "completed" and task.attempts == 2 and ordered(task)
    failed = next(u for u in out["updates"] if u.status == "failed")
    # Ready since the failed attempt ended (just before its failure was recorded),
    # not since the plan was committed.
    assert task.ready_at is not None
    assert out["spans"][0].ended_at < task.ready_at <= failed.at.timestamp()
    (past,) = task.past_attempts
    assert past.started_at <= past.ended_at == task.ready_at


def test_a_replan_adds_a_planner_span_and_a_new_run_starts_its_own(
    scripted_graph: GraphFactory,
) -> None:
    scenario = {
        "planner": [
            plan(spec("t1")),
            plan(spec("t2")),
            plan(spec("t3")),
        ],
        "actors": {
            "t1": [submit("no", status="failed")],
            "t2": [submit("yes")],
            "t3": [submit("again")],
        },
        "reporter": [{"text": "first"}, {"text": "second"}],
    }
    graph, _ = scripted_graph(scenario, task_retries=0, verify="off", checkpointer=InMemorySaver())
    config: dict[str, Any] = {"configurable": {"thread_id": "turns"}}
    graph.invoke({"goal": "one"}, config)
    first = graph.get_state(config).values
    assert [s.name for s in first["spans"]] == ["planner", "planner", "reporter"]
    graph.invoke({"goal": "two"}, config)
    second = graph.get_state(config).values
    assert [s.name for s in second["spans"]] == ["planner", "reporter"]
    archived = second["runs"][0]
    assert archived["spans"] == first["spans"]
    assert archived["run_started_at"] == first["run_started_at"] < second["run_started_at"]
