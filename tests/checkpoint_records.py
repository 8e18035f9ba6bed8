"""Checkpointed records shared by the checkpoint tests: a state holding every project
record and the usual LangChain messages, LangGraph's msgpack ext records, and a one-node
graph that checkpoints that state (the unit tests' savers and the Postgres ones)."""

from __future__ import annotations

import operator
from datetime import UTC, datetime
from typing import Annotated, Any

import ormsgpack
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from aimegraph.state.models import ProgressUpdate, RoleUsage, Task, TaskResult, Usage, Verdict


def sample_state() -> dict[str, Any]:
    """A state dict holding every project record and the usual LangChain messages."""
    result = TaskResult(status="completed", summary="42", artifacts={"answer.txt": "42"})
    task = Task(
        id="t2",
        title="Compute",
        description="Add the numbers",
        parent_id="t1",
        dependencies=("t0", "t1"),
        status="completed",
        completion_criteria="a number",
        tool_bundles=("compute",),
        persona="mathematician",
        result=result,
        attempts=2,
    )
    return {
        "goal": "add numbers",
        "tasks": {"t2": task, "t0": Task(id="t0", title="Start")},
        "updates": [
            ProgressUpdate(
                task_id="t2",
                status="completed",
                message="done",
                at=datetime(2025, 1, 2, tzinfo=UTC),
            )
        ],
        "verdict": Verdict(passed=False, reasoning="missing units", issues=["no units"]),
        "usage": Usage(
            llm_calls=3,
            input_tokens=10,
            output_tokens=5,
            tool_calls=1,
            cost_usd=0.25,
            by_role={"planner": RoleUsage(llm_calls=1, input_tokens=4, output_tokens=2)},
        ),
        "messages": [
            HumanMessage("add 40 and 2", id="m1"),
            AIMessage(
                "",
                id="m2",
                tool_calls=[{"name": "calculator", "args": {"expr": "40+2"}, "id": "call-1"}],
                usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
            ),
            ToolMessage("42", tool_call_id="call-1", name="calculator", id="m3"),
        ],
    }


def ext(code: int, *fields: Any) -> ormsgpack.Ext:
    """A msgpack ext record the way LangGraph writes them: (module, name, args...)."""
    return ormsgpack.Ext(code, ormsgpack.packb(tuple(fields)))


class MiniState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    tasks: dict[str, Task]
    updates: Annotated[list[ProgressUpdate], operator.add]
    verdict: Verdict | None
    usage: Usage


def _work(state: MiniState) -> MiniState:
    records = sample_state()
    return {
        "messages": records["messages"][1:],
        "tasks": records["tasks"],
        "updates": records["updates"],
        "verdict": records["verdict"],
        "usage": records["usage"],
    }


def build_graph(saver: Any) -> Any:
    """A one-node graph whose state holds every kind of record we checkpoint."""
    builder = StateGraph(MiniState)
    builder.add_node("work", _work)
    builder.add_edge(START, "work")
    return builder.compile(checkpointer=saver)


def expected_values() -> dict[str, Any]:
    records = sample_state()
    return {key: records[key] for key in ("messages", "tasks", "updates", "verdict", "usage")}
