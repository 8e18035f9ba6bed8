"""Table 1b of the overhead section: where a task's time goes.

Micro-benchmarks of the pieces of the engine a task passes through (a model call,
tool binding, the actor factory, a thread pool round trip, a subgraph invocation,
a LangGraph ``@task`` call, a thread's lease), each timed alone.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.messages import HumanMessage
from langgraph.func import task
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from aimegraph import DefaultActorFactory, Task, default_registry
from aimegraph.checkpoints import hold_thread
from bench.chat_models import BenchChatModel
from bench.common import Table, fmt_ms, median_time, memory_saver, thread_config


class _Empty(TypedDict, total=False):
    x: int


def _noop(state: _Empty) -> _Empty:
    return {"x": state.get("x", 0) + 1}


_TASK_CALLS = 20


@task
def _echo(x: int) -> int:
    return x


def _call_tasks(state: _Empty) -> _Empty:
    for i in range(_TASK_CALLS):
        _echo(i).result()
    return {"x": 1}


def _invoke_fresh(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
    graph.invoke({"x": 0}, thread_config())


def task_call_cost(repeat: int) -> float:
    """What one LangGraph ``@task`` call costs (seconds): a node making 20 trivial calls
    against a node making none, with an InMemorySaver (the eager runner starts each
    actor as a ``@task`` only where the run saves checkpoints)."""
    times = []
    for node in (_call_tasks, _noop):
        one = StateGraph(_Empty)
        one.add_node("n", node)
        one.add_edge(START, "n")
        graph = one.compile(checkpointer=memory_saver())
        times.append(median_time(partial(_invoke_fresh, graph), repeat=repeat))
    return (times[0] - times[1]) / _TASK_CALLS


def component_costs(ws: Path, model: BenchChatModel, repeat: int) -> dict[str, float]:
    """Micro-benchmarks of the pieces a task goes through, in seconds per call."""
    registry = default_registry(ws)
    tools = list(registry.tools.values())
    factory = DefaultActorFactory(registry, workspace=ws)
    sample = Task(id="t1", title="Work item t1", description="Produce the partial result t1.")
    chain = StateGraph(_Empty)
    for i in range(4):
        chain.add_node(f"n{i}", _noop)
        chain.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    subgraph = chain.compile()

    def pool_round_trip() -> None:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(int).result()

    prompt = [HumanMessage("x" * 2000)]
    pieces: dict[str, Callable[[], object]] = {
        "scripted_call": lambda: model.invoke(prompt),
        "bind_tools": lambda: model.bind_tools(tools),
        "factory_build": lambda: factory.build(sample, "Assemble the report.", {}),
        "thread_pool": pool_round_trip,
        "subgraph_4_nodes": lambda: subgraph.invoke({"x": 0}),
        "lease": lambda: hold_thread(f"sqlite:///{ws / 'lease.db'}", "t").release(),
    }
    costs = {name: median_time(fn, repeat=repeat, warmup=3) for name, fn in pieces.items()}
    # A difference of two timings: on a busy machine it may come out below zero.
    return costs | {"task_call_delta": task_call_cost(max(5, repeat // 10))}


def component_table(parts: dict[str, float]) -> Table:
    table = Table(
        "1b. Where a task's time goes: pieces of the engine timed alone (no checkpointer)",
        ["piece", "per", "ms"],
    )
    rows = {
        "scripted_call": ("one call of the instant scripted model (2,000-char prompt)", "LLM call"),
        "bind_tools": (
            "`bind_tools` over the default registry's tools (schema conversion)",
            "actor LLM call",
        ),
        "factory_build": (
            "`DefaultActorFactory.build` (persona, tool bundles by embedding search, environment)",
            "task",
        ),
        "thread_pool": (
            "create a 1-thread pool, run one call, join it",
            "ToolNode call (not the actor's reports: they run in its react step) and timeout guard",
        ),
        "subgraph_4_nodes": ("invoke a compiled 4-node no-op StateGraph", "subgraph invocation"),
        "task_call_delta": (
            "one LangGraph `@task` call of a trivial function, with an InMemorySaver (a node "
            "making 20 against one making none)",
            "actor under the eager scheduler, where the run saves checkpoints",
        ),
        "lease": (
            "take and release a thread's lease on an SQLite file (flock, cancel watcher "
            "thread started and joined)",
            "run",
        ),
    }
    for key, (label, per) in rows.items():
        table.add(label, per, fmt_ms(parts[key], 3))
    table.notes.append(
        "An executor runs as a subgraph for every task: react steps (the factory's assembly "
        "opens the first; a reply that only reports, update_progress or submit_result, is run "
        "in its react step) and a tools step for any other tool; a task that submits at once "
        "is one super-step (the plain graph's ReAct subgraph: two). The planner and verifier "
        "are subgraphs too."
    )
    return table
