"""Agent units backed by agents of their own (``AgentUnit.agent``).

Such a unit does its task as aimegraph's actor would, with its own agent: any
graph with a ``messages`` channel, such as ``create_agent``'s, a deepagents agent
or a user's graph. It gets the task (goal, description, dependency results, a
team member's brief) as one human message, and its last message is the result.

A local graph runs inside the unit's node on the run's checkpointer (a subgraph):
an ``interrupt()`` in it pauses the run for a human like aimegraph's own, and
``Command(resume=...)`` continues the agent where it stopped. Its usage is what its
replies report (``usage_metadata``); an agent that reports none is said to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel.protocol import PregelProtocol
from langgraph.pregel.remote import RemoteGraph
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.models.calls import usage_of
from aimegraph.nodes.executor import make_hand_back_node, task_message
from aimegraph.state import (
    ActorInput,
    ActorOutput,
    ActorState,
    MemberOutput,
    ProgressUpdate,
    TaskResult,
    Usage,
)
from aimegraph.teams.remote import remote_thread_id, run_remote
from aimegraph.teams.units import AgentUnit
from aimegraph.tools.progress import settled


def build_backed_unit_graph(
    unit: AgentUnit, config: AimeConfig, *, member: bool = False, name: str | None = None
) -> CompiledStateGraph[ActorState, AimeConfig, ActorInput, Any]:
    """The graph doing a task with ``unit``'s agent, in place of the actor graph: the
    same input (:class:`ActorInput`) and output (the task with its result, progress
    updates, usage; a team member's turn with ``member``)."""
    if unit.agent is None:
        raise ValueError(f"agent unit {unit.name!r} is not backed by an agent")
    builder = StateGraph(
        ActorState,
        context_schema=AimeConfig,
        input_schema=ActorInput,
        output_schema=MemberOutput if member else ActorOutput,
    )
    builder.add_node("agent", _make_agent_node(unit.name, unit.agent, base=config))
    builder.add_edge(START, "agent")
    if member:
        builder.add_node("hand_back", make_hand_back_node())
        builder.add_edge("agent", "hand_back")
        builder.add_edge("hand_back", END)
    else:
        builder.add_edge("agent", END)
    return builder.compile(name=name or f"agent_{unit.name}")


def _make_agent_node(unit: str, agent: PregelProtocol, *, base: AimeConfig) -> Any:
    def run_agent(
        state: ActorState, config: RunnableConfig, runtime: Runtime[Any]
    ) -> dict[str, Any]:
        cfg = base.for_run(runtime)
        task = state["task"]
        runtime.stream_writer(
            {"type": "actor", "event": "started", "task_id": task.id, "unit": unit, "tools": []}
        )
        try:
            messages = _run(agent, state, config, runtime)
        except GraphBubbleUp:  # an interrupt() inside: the run waits for a human
            raise
        except Exception as exc:  # the agent's failure is the task's, as data
            result = TaskResult(status="failed", summary=f"agent unit {unit} failed: {exc}")
            return {"steps": 0} | settled(state, result, runtime.stream_writer)
        replies = [m for m in messages if isinstance(m, AIMessage)]
        usage, known = _usage(replies, cfg)
        usage = usage.for_task(task.id, state.get("member"))
        result = _result(unit, messages)
        update = settled({**state, "usage": usage}, result, runtime.stream_writer)
        if not known:
            update["updates"].append(
                ProgressUpdate(
                    task_id=task.id,
                    status="usage_unknown",
                    message=f"agent unit {unit} reports no usage: its calls and tokens are unknown",
                )
            )
        return update | {"usage": usage, "messages": messages, "steps": len(replies)}

    return run_agent


def _run(
    agent: PregelProtocol, state: ActorState, config: RunnableConfig, runtime: Runtime[Any]
) -> list[BaseMessage]:
    """The agent's messages once it has done the task."""
    if isinstance(agent, RemoteGraph):
        thread_id = remote_thread_id(config, state)
        runtime.stream_writer(
            {"type": "actor", "event": "remote", "task_id": state["task"].id, "thread": thread_id}
        )
        return run_remote(agent, thread_id, task_message(state))
    # The node's config makes the agent a subgraph of the run: it checkpoints with
    # it, and a resumed run continues it rather than starting it again.
    out = agent.invoke({"messages": [task_message(state)]}, config)
    return list((out or {}).get("messages") or [])


def _usage(replies: Sequence[AIMessage], cfg: AimeConfig) -> tuple[Usage, bool]:
    """The replies' usage, and whether any of them reported it."""
    total = Usage()
    known = False
    for reply in replies:
        if reply.usage_metadata:
            known = True
            total += usage_of(reply, "actor", cfg.prices, tool_calls=len(reply.tool_calls))
    return total, known


def _result(unit: str, messages: Sequence[BaseMessage]) -> TaskResult:
    """The agent's last message as the task's result; none is a failure."""
    last = messages[-1] if messages else None
    text = last.text.strip() if last is not None else ""
    if not text:
        return TaskResult(status="failed", summary=f"agent unit {unit} ended without an answer")
    return TaskResult(status="completed", summary=text)
