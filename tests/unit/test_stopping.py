"""Stopping a run (issue 29 point 1): signals become LangGraph drain requests, and a
node that calls a model several times makes no further call once one is asked."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

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
