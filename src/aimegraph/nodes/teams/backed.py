"""Agent units backed by agents of their own (``AgentUnit.agent``).

Such a unit does its task as aimegraph's actor would, with its own agent: any
graph with a ``messages`` channel, such as ``create_agent``'s, a deepagents agent
or a user's graph. It gets the task (goal, description, dependency results, a
team member's brief) as one human message, and its last message is the result.

A local graph runs inside the unit's node on the run's checkpointer (a subgraph):
an ``interrupt()`` in it pauses the run for a human like aimegraph's own, and
``Command(resume=...)`` continues the agent where it stopped. Its usage is what its
replies report (``usage_metadata``): those in its messages and those a callback sees
from every chat model called inside it, so that a sub-agent's calls (a deepagents
``task`` tool's) count too; an agent that reports none is said to. A sub-agent's calls
made before an interrupt are not seen again when the run resumes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph._internal._constants import CONFIG_KEY_RUNTIME
from langgraph.errors import GraphBubbleUp
from langgraph.pregel.protocol import PregelProtocol
from langgraph.pregel.remote import RemoteGraph
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.models.calls import usage_of
from aimegraph.nodes.actor import task_message
from aimegraph.state import (
    ActorState,
    ProgressUpdate,
    TaskResult,
    Usage,
)
from aimegraph.teams.a2a_unit import COMPLETED, INPUT_REQUIRED, A2AState, ask_human, exchange
from aimegraph.teams.remote import attempt_key, run_remote
from aimegraph.tools.progress import settled


class A2AUnitState(ActorState, total=False):
    """An A2A unit's task as it stands (:class:`A2AState` as a dict, which any
    checkpoint serializer takes), and a human's answer still to send."""

    a2a: dict[str, Any]
    answer: str | None


def make_a2a_node(url: str) -> Any:
    def a2a(state: A2AUnitState, config: RunnableConfig) -> dict[str, Any]:
        answer, known = state.get("answer"), state.get("a2a") or {}
        waiting = A2AState(**known) if answer is not None and known.get("task_id") else None
        try:
            found = exchange(
                url, attempt_key(config, state), task_message(state).text, answer, waiting
            )
        except Exception as exc:  # an agent unreachable or refusing: the task fails
            return {"a2a": {"state": "unreachable", "text": str(exc)}, "answer": None}
        return {"a2a": asdict(found), "answer": None}

    return a2a


def after_a2a(state: A2AUnitState) -> str:
    return "ask" if (state.get("a2a") or {}).get("state") == INPUT_REQUIRED else "agent"


def make_ask_node(unit: str) -> Any:
    def ask(state: A2AUnitState) -> dict[str, Any]:
        return {"answer": ask_human(unit, A2AState(**state["a2a"]))}

    return ask


def make_finish_node(unit: str) -> Any:
    def finish(state: A2AUnitState, runtime: Runtime[Any]) -> dict[str, Any]:
        found = state.get("a2a") or {}
        where = {"a2a_task": found["task_id"]} if found.get("task_id") else {}
        if found.get("state") == COMPLETED and found.get("text"):
            result = TaskResult(status="completed", summary=found["text"], artifacts=where)
        else:
            why = f"agent unit {unit} failed: {found.get('state')}: {found.get('text')}"
            result = TaskResult(status="failed", summary=why, artifacts=where)
        return _settle(unit, state, result, Usage(), known=False, runtime=runtime)

    return finish


def make_agent_node(unit: str, agent: PregelProtocol, *, base: AimeConfig) -> Any:
    def run_agent(
        state: ActorState, config: RunnableConfig, runtime: Runtime[Any]
    ) -> dict[str, Any]:
        cfg = base.for_run(runtime)
        task = state["task"]
        # A remote agent's thread, kept with the result: where to look at its work.
        remote = isinstance(agent, RemoteGraph)
        where = {"remote_thread": attempt_key(config, state)} if remote else {}
        runtime.stream_writer(
            {"type": "actor", "event": "started", "task_id": task.id, "unit": unit, "tools": []}
        )
        seen = _RepliesSeen()
        try:
            messages = _run(agent, state, config, runtime, where.get("remote_thread"), seen)
        except GraphBubbleUp:  # an interrupt() inside: the run waits for a human
            raise
        except Exception as exc:  # the agent's failure is the task's, as data
            why = f"agent unit {unit} failed: {exc}"
            result = TaskResult(status="failed", summary=why, artifacts=where)
            return {"steps": 0} | settled(state, result, runtime.stream_writer)
        replies = [m for m in messages if isinstance(m, AIMessage)]
        usage, known = _usage(seen.beside(replies), cfg)
        result = _result(unit, messages, where)
        update = _settle(unit, state, result, usage, known=known, runtime=runtime)
        return update | {"messages": messages, "steps": len(replies)}

    return run_agent


def _settle(
    unit: str,
    state: ActorState,
    result: TaskResult,
    usage: Usage,
    *,
    known: bool,
    runtime: Runtime[Any],
) -> dict[str, Any]:
    """The task settled with ``result``, with the agent's ``usage`` (said to be
    unknown unless ``known``)."""
    task = state["task"]
    usage = usage.for_task(task.id, state.get("member"), known=known)
    update = settled({**state, "usage": usage}, result, runtime.stream_writer)
    if not known:
        update["updates"].append(
            ProgressUpdate(
                task_id=task.id,
                status="usage_unknown",
                message=f"agent unit {unit} reports no usage: its calls and tokens are unknown",
            )
        )
    return update | {"usage": usage}


def _run(
    agent: PregelProtocol,
    state: ActorState,
    config: RunnableConfig,
    runtime: Runtime[Any],
    thread_id: str | None,
    seen: _RepliesSeen,
) -> list[BaseMessage]:
    """The agent's messages once it has done the task (on the remote ``thread_id``
    for a ``RemoteGraph``); ``seen`` gets every reply of a local agent's models."""
    if isinstance(agent, RemoteGraph) and thread_id is not None:
        runtime.stream_writer(
            {"type": "actor", "event": "remote", "task_id": state["task"].id, "thread": thread_id}
        )
        return run_remote(agent, thread_id, task_message(state))
    # The node's config makes the agent a subgraph of the run: it checkpoints with
    # it, and a resumed run continues it rather than starting it again. Its runtime
    # context is its own, not aimegraph's (a subgraph would inherit the run's
    # AimeConfig, which its tools' ToolRuntime and context_schema do not expect).
    own = runtime.override(context=None)
    config = merge_configs(config, {"callbacks": [seen]})
    config = {**config, "configurable": {**config.get("configurable", {}), CONFIG_KEY_RUNTIME: own}}
    out = agent.invoke({"messages": [task_message(state)]}, config)
    return list((out or {}).get("messages") or [])


class _RepliesSeen(BaseCallbackHandler):
    """Every reply of a chat model called inside an agent, its sub-agents' included
    (a callback, as the replies of a sub-agent inside a tool never reach the agent's
    messages)."""

    def __init__(self) -> None:
        self._replies: list[AIMessage] = []
        self._lock = threading.Lock()  # an agent may call its models from several threads

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        found = [
            g.message
            for generations in response.generations
            for g in generations
            if isinstance(g, ChatGeneration) and isinstance(g.message, AIMessage)
        ]
        with self._lock:
            self._replies += found

    def beside(self, replies: Sequence[AIMessage]) -> list[AIMessage]:
        """``replies`` (the agent's messages: after a resume, its calls before the
        interrupt too) and every other reply seen, each reply once (by its id: a model
        wrapping another may hand on the inner one's reply)."""
        known = {r.id for r in replies if r.id}
        others = []
        with self._lock:
            for reply in self._replies:
                if reply.id in known:
                    continue
                if reply.id:
                    known.add(reply.id)
                others.append(reply)
        return [*replies, *others]


def _usage(replies: Sequence[AIMessage], cfg: AimeConfig) -> tuple[Usage, bool]:
    """The replies' usage, and whether any of them reported it."""
    total = Usage()
    known = False
    for reply in replies:
        if reply.usage_metadata:
            known = True
            total += usage_of(reply, "actor", cfg.prices, tool_calls=len(reply.tool_calls))
    return total, known


def _result(unit: str, messages: Sequence[BaseMessage], where: dict[str, str]) -> TaskResult:
    """The agent's last message as the task's result (``where`` it worked as its
    artifacts); none is a failure."""
    last = messages[-1] if messages else None
    text = last.text.strip() if last is not None else ""
    if not text:
        why = f"agent unit {unit} ended without an answer"
        return TaskResult(status="failed", summary=why, artifacts=where)
    return TaskResult(status="completed", summary=text, artifacts=where)
