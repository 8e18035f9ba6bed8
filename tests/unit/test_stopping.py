"""Stopping a run (issue 29 point 1): signals become LangGraph drain requests, and a
node that calls a model several times makes no further call once one is asked."""

from __future__ import annotations

import operator
import os
import signal
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphDrained
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import RunControl

from aimegraph.graphs.compiled import AimeGraph
from aimegraph.models.steps import ModelCall, arun_steps, run_steps
from aimegraph.running.drain import SignalDrain


def test_the_first_signal_drains_and_a_second_interrupts() -> None:
    control = RunControl()
    before = signal.getsignal(signal.SIGINT)
    with SignalDrain(control) as stop:
        assert stop.active
        os.kill(os.getpid(), signal.SIGINT)
        assert control.drain_requested and control.drain_reason == "SIGINT"
        assert stop.received == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_sigterm_and_a_custom_second_signal() -> None:
    control, repeats = RunControl(), []
    with SignalDrain(control, (signal.SIGINT, signal.SIGTERM), on_repeat=repeats.append):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    assert control.drain_reason == "SIGTERM" and repeats == [signal.SIGINT]


def test_a_program_that_handles_sigint_keeps_its_handler() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _: seen.append(signum))
    try:
        control = RunControl()
        with SignalDrain(control, only_unclaimed=True) as stop:
            assert not stop.active
            os.kill(os.getpid(), signal.SIGINT)
        assert seen == [signal.SIGINT] and not control.drain_requested
    finally:
        signal.signal(signal.SIGINT, previous)


def _three_calls(made: list[int]) -> Iterator[ModelCall]:
    for n in range(3):
        reply = yield RunnableLambda(lambda x: x), n
        made.append(reply)


def _steps(made: list[int]) -> Any:
    yield from _three_calls(made)
    return made


def test_a_node_makes_no_further_model_call_once_a_drain_is_asked() -> None:
    control = RunControl()
    made: list[int] = []

    def drain_after_first(x: int) -> int:
        control.request_drain("test")
        return x

    def steps() -> Any:
        reply = yield RunnableLambda(drain_after_first), 0
        made.append(reply)
        reply = yield RunnableLambda(lambda x: x), 1
        made.append(reply)

    with pytest.raises(GraphDrained):
        run_steps(steps(), control=control)
    assert made == [0]  # the call in flight finished; the next never started
    assert run_steps(_steps([]), control=RunControl()) == [0, 1, 2]  # undrained: all calls

    import asyncio

    control, made = RunControl(), []
    with pytest.raises(GraphDrained):
        asyncio.run(arun_steps(steps(), control=control))
    assert made == [0]


def _interrupting_graph(*nodes: str) -> AimeGraph:
    """A chain of ``nodes``; the one named ``ctrl_c`` sends this process SIGINT."""

    class State(TypedDict):
        ran: Annotated[list[str], operator.add]

    def node(name: str) -> Callable[[State], dict[str, list[str]]]:
        def run(state: State) -> dict[str, list[str]]:
            if name == "ctrl_c":
                os.kill(os.getpid(), signal.SIGINT)
            return {"ran": [name]}

        return run

    builder = StateGraph(State)
    for name in nodes:
        builder.add_node(name, node(name))
    for before, after in zip((START, *nodes), (*nodes, END), strict=True):
        builder.add_edge(before, after)
    return AimeGraph.of(builder.compile(checkpointer=InMemorySaver()))


@pytest.mark.parametrize("nodes", [("ctrl_c", "after"), ("before", "ctrl_c")])
def test_ctrl_c_in_a_runs_step_ends_it_in_keyboard_interrupt_even_in_its_last(
    nodes: tuple[str, ...],
) -> None:
    """Issue 47: a Ctrl-C in the last step was lost (no step was left to stop before:
    the run ended as if nothing had happened, and a program looping over runs went on)."""
    graph = _interrupting_graph(*nodes)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"ran": []}, config)
    ran = graph.get_state(config).values["ran"]
    assert ran == list(nodes[: nodes.index("ctrl_c") + 1])  # the step finished and was kept
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
