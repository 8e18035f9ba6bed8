"""What LangChain middleware costs per model call of an actor, with an instant model.

One actor (``build_actor_graph``) runs a task of ``calls`` model calls on the scripted
model, which answers instantly: ``calls - 1`` calculator calls, then ``submit_result``.
Each stack of :data:`STACKS` runs it against the same actor without middleware; the
rows alternate run by run, so a busy moment on a shared machine hits both, and the
ratio is the median over the rounds. What a stack costs per model call is then what
the engine adds to run its hooks (the model and the tools cost nothing here), in CPU
time of the process, which other work on a shared machine does not inflate.

:data:`STACKS` is the section's one list: a new row is one entry (a name, what it holds,
and a function making its middleware).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    after_model,
    before_model,
    wrap_model_call,
    wrap_tool_call,
)

from aimegraph import Task, build_actor_graph, default_registry
from aimegraph.models.offline.scripted import ScriptedChatModel
from bench.common import Headline, SectionResult, Table, config, fmt_ms, fmt_range, fmt_x
from bench.common import workspace as temporary_workspace


def _tool_step(i: int) -> dict[str, Any]:
    """A calculator call of its own (a third identical call would be refused)."""
    return {"tool": "calculator", "args": {"expression": f"48000 + {i}"}}


def _pass_through() -> list[AgentMiddleware[Any, Any, Any]]:
    """One hook of each kind the actor runs, each doing nothing but pass on."""

    @before_model
    def before(state: AgentState[Any], runtime: Any) -> None:
        return None

    @after_model
    def after(state: AgentState[Any], runtime: Any) -> None:
        return None

    @wrap_model_call
    def around_model(request: Any, handler: Any) -> Any:
        return handler(request)

    @wrap_tool_call
    def around_tool(request: Any, handler: Any) -> Any:
        return handler(request)

    return [before, after, around_model, around_tool]


STACKS: list[tuple[str, str, Callable[[], Sequence[AgentMiddleware[Any, Any, Any]]]]] = [
    ("empty", "middleware=[], no hooks", list),
    (
        "pass-through",
        "one @before_model, @after_model, @wrap_model_call and @wrap_tool_call, each passing on",
        _pass_through,
    ),
]
"""(row name, what the stack holds, its middleware): the rows of the section."""


def _actor_run(
    ws: Path, calls: int, middleware: Sequence[AgentMiddleware[Any, Any, Any]]
) -> Callable[[], Any]:
    """One actor run of ``calls`` model calls in ``ws``, built once, as a function to time."""
    script = [_tool_step(i) for i in range(calls - 1)]
    model = ScriptedChatModel.from_dict({"actors": {"t": script}})
    graph = build_actor_graph(
        model,
        registry=default_registry(ws),
        config=config(ws, verify="off"),
        middleware=list(middleware) or None,
    )
    task = Task(id="t", title="Sum", status="in_progress", attempts=1, tool_bundles=("compute",))
    inputs = {"goal": "Add the figures.", "task": task, "dependency_results": {}}

    def run() -> Any:
        out = graph.invoke(inputs)
        assert out["usage"].llm_calls == calls, out["usage"]
        return out

    return run


def _cpu_seconds(run: Callable[[], Any]) -> float:
    """The process's CPU time (all its threads: the tools run in threads of their own)
    over one call of ``run``: other work on a shared machine does not count in it."""
    start = time.process_time()
    run()
    return time.process_time() - start


def run(quick: bool) -> SectionResult:
    with temporary_workspace() as ws:
        return _measure(ws, quick)


def _measure(ws: Path, quick: bool) -> SectionResult:
    calls, rounds = (3, 3) if quick else (10, 30)
    bare = _actor_run(ws, calls, [])
    table = Table(
        f"Middleware on an actor: {calls} model calls ({calls - 1} calculator calls, then "
        f"submit_result), instant scripted model; {rounds} interleaved rounds",
        [
            "stack",
            "holds",
            "CPU ms per model call, fastest run: none / stack",
            "ratio of the fastest runs",
            "ratio per round: median (range)",
        ],
        notes=[
            "Each round runs the actor without middleware and with the stack, one after "
            "the other (which goes first alternates); the ratio is taken within a round.",
            "CPU ms per model call = the process's CPU time over the actor's run (all "
            "its threads) / its model calls (the tool calls, the steps and the "
            "checkpoint-free graph included): what a call costs the engine, not the "
            "model; other processes on the machine do not count in it. The fastest runs "
            "are the least disturbed; the per-round ratios show the spread.",
        ],
    )
    metrics: dict[str, float] = {}
    headlines = []
    for name, holds, stack in STACKS:
        with_stack = _actor_run(ws, calls, stack())
        bare(), with_stack()  # warm-up: tool schemas bound, first-call imports done
        none_s, stack_s, ratios = [], [], []
        for i in range(rounds):
            if i % 2:  # alternate which goes first
                b, a = _cpu_seconds(with_stack), _cpu_seconds(bare)
            else:
                a, b = _cpu_seconds(bare), _cpu_seconds(with_stack)
            none_s.append(a / calls)
            stack_s.append(b / calls)
            ratios.append(b / a)
        # The fastest runs: what the code costs, least disturbed by a busy machine.
        fastest = min(stack_s) / min(none_s)
        table.add(
            name,
            holds,
            f"{fmt_ms(min(none_s))} / {fmt_ms(min(stack_s))}",
            fmt_x(fastest),
            fmt_range(ratios, fmt_x),
        )
        metrics[f"{name}_fastest_ratio"] = fastest
        metrics[f"{name}_median_ratio"] = statistics.median(ratios)
        metrics[f"{name}_none_ms_per_call"] = min(none_s) * 1e3
        metrics[f"{name}_stack_ms_per_call"] = min(stack_s) * 1e3
        headlines.append(
            Headline(
                f"LangChain middleware per actor model call, {name} stack ({holds}); "
                f"instant scripted model, {calls} calls a run, {rounds} interleaved rounds",
                "the same actor without middleware",
                f"fastest run {fmt_x(fastest)} ({fmt_ms(min(stack_s))} / "
                f"{fmt_ms(min(none_s))} CPU ms per call); median of the rounds' ratios "
                f"{fmt_x(statistics.median(ratios))}",
            )
        )
    return SectionResult("middleware", [table], metrics=metrics, headlines=headlines)
