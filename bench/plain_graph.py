"""The plain baseline of the overhead section: the LangGraph graph a user would
write by hand for the engine's workflow, making the same model and tool calls.

A planner call with structured output, each ready task as a ``Send`` to a ReAct
subgraph (model with tools <-> ``ToolNode`` until ``submit_result``), then a
reporter call and a verifier call. Tables 1c and 1e time the engine against it.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Send

from aimegraph import PlanUpdate, Verdict
from aimegraph.tools.calculator import calculator
from bench.chat_models import BenchChatModel


class PlainState(TypedDict, total=False):
    goal: str
    deps: dict[str, list[str]]
    results: Annotated[dict[str, str], operator.or_]
    answer: str


class PlainTaskState(MessagesState, total=False):
    task_id: str


@tool("submit_result")
def plain_submit(status: str, summary: str, artifacts: dict[str, str] | None = None) -> str:
    """Submit the task's result."""
    return summary


@tool("update_progress")
def plain_progress(status: str, message: str) -> str:
    """Record progress."""
    return "Progress recorded."


def build_plain_graph(
    model: BenchChatModel,
    checkpointer: BaseCheckpointSaver[Any] | None,
    task_durability: str = "inherit",
) -> CompiledStateGraph:
    """What a LangGraph user would write by hand for the same workflow, making the
    same model and tool calls: a planner call (structured output), then each ready
    task as a ``Send`` to a ReAct subgraph (model with tools <-> ``ToolNode``, until
    ``submit_result``), a reporter call and a verifier call (structured output).
    ``task_durability="exit"`` runs the task subgraphs with that durability."""
    planner = model.with_structured_output(PlanUpdate)
    verifier = model.with_structured_output(Verdict)
    tools = [calculator, plain_submit, plain_progress]
    actor = model.bind_tools(tools)
    durability: dict[str, Any] = (
        {"durability": "exit"} if task_durability == "exit" and checkpointer else {}
    )

    def react(state: PlainTaskState) -> dict[str, Any]:
        return {"messages": [actor.invoke(state["messages"])]}

    def after_react(state: PlainTaskState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    def after_tools(state: PlainTaskState) -> str:
        called = state["messages"][-2]
        submitted = isinstance(called, AIMessage) and any(
            c["name"] == "submit_result" for c in called.tool_calls
        )
        return END if submitted else "react"

    sub = StateGraph(PlainTaskState)
    sub.add_node("react", react)
    sub.add_node("tools", ToolNode(tools))
    sub.add_edge(START, "react")
    sub.add_conditional_edges("react", after_react, ["tools", END])
    sub.add_conditional_edges("tools", after_tools, ["react", END])
    react_graph = sub.compile()

    def run_task(state: PlainTaskState) -> PlainState:
        out = react_graph.invoke(state, **durability)
        return {"results": {state["task_id"]: out["messages"][-1].text}}

    def plan(state: PlainState) -> PlainState:
        reply = planner.invoke([SystemMessage("# Role: planner"), HumanMessage(state["goal"])])
        update = PlanUpdate.model_validate(reply)
        return {"deps": {t.id: list(t.dependencies) for t in update.tasks}, "results": {}}

    def dispatch(state: PlainState) -> Command[Any]:
        done = state.get("results") or {}
        ready = [t for t, deps in state["deps"].items() if t not in done and set(deps) <= set(done)]
        if not ready:
            return Command(goto="report")
        return Command(
            goto=[
                Send(
                    "task",
                    {
                        "task_id": t,
                        "messages": [
                            SystemMessage("# Role: actor"),
                            HumanMessage(f'<task id="{t}">\nTitle: {t}'),
                        ],
                    },
                )
                for t in ready
            ]
        )

    def report(state: PlainState) -> PlainState:
        text = model.invoke([SystemMessage("# Role: reporter"), HumanMessage(state["goal"])]).text
        verifier.invoke([SystemMessage("# Role: verifier"), HumanMessage(text)])
        return {"answer": text}

    builder = StateGraph(PlainState)
    builder.add_node("plan", plan)
    builder.add_node("dispatch", dispatch, destinations=("task", "report"))
    builder.add_node("task", run_task)
    builder.add_node("report", report)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "dispatch")
    builder.add_edge("task", "dispatch")
    builder.add_edge("report", END)
    return builder.compile(checkpointer=checkpointer, name="plain")
