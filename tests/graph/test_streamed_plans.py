"""Streamed plans (``AimeConfig.stream_plans``): tasks start while the planner's
reply still streams in; the whole plan is checked when it ends."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import PrivateAttr

from aimegraph.checkpoints import make_serializer
from aimegraph.checkpoints.delta import with_finished_tasks
from aimegraph.config import AimeConfig
from aimegraph.graphs.aime import build_aime_graph
from aimegraph.models import ScriptedChatModel
from aimegraph.models.fallbacks import FallbackChatModel
from aimegraph.models.partial import streams
from aimegraph.nodes.plan_feed import PlanFeed
from aimegraph.state import PlanChecks, Task, ToolCallSpec

MARKS: list[str] = []


@tool
def mark(name: str) -> str:
    """Record that a step ran."""
    MARKS.append(name)
    return f"{name} marked"


def step(task_id: str, name: str | None = None, *deps: str) -> dict[str, Any]:
    """A tool step calling ``mark(name)``."""
    return {
        "id": task_id,
        "title": f"Step {task_id}",
        "dependencies": list(deps),
        "call": {"tool": "mark", "args": {"name": name or task_id}},
    }


class HeldPlanner(ScriptedChatModel):
    """Streams each planner reply, holding its last chunk (the reply's end) until
    ``until(marks, reply number)`` holds or 10 s have passed; records whether it held."""

    until: Callable[[list[str], int], bool] = lambda marks, n: True
    _held: list[bool] = PrivateAttr(default_factory=list)

    def _is_planner(self, messages: list[BaseMessage]) -> bool:
        return bool(messages) and "# Role: planner" in messages[0].text

    def _wait(self, number: int) -> bool:
        deadline = time.monotonic() + 10
        while not self.until(list(MARKS), number):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        chunks = list(super()._stream(messages, stop, run_manager, **kwargs))
        for chunk in chunks:
            if chunk is chunks[-1] and self._is_planner(messages):
                self._held.append(self._wait(len(self._held) + 1))
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        chunks = [c async for c in super()._astream(messages, stop, run_manager, **kwargs)]
        for chunk in chunks:
            if chunk is chunks[-1] and self._is_planner(messages):
                number = len(self._held) + 1
                self._held.append(await asyncio.to_thread(self._wait, number))
            yield chunk


@pytest.fixture(autouse=True)
def _clear_marks() -> None:
    MARKS.clear()


def build(workspace: Path, model: ScriptedChatModel, **config: Any) -> Any:
    cfg = AimeConfig(workspace=workspace, verify="off", **{"stream_plans": True, **config})
    return build_aime_graph(model, tools=[mark], config=cfg)


def run(graph: Any, driver: str, inputs: Any, config: Any = None) -> dict[str, Any]:
    if driver == "invoke":
        return dict(graph.invoke(inputs, config))
    return dict(asyncio.run(graph.ainvoke(inputs, config)))


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
def test_streamed_tasks_start_before_the_reply_ends(workspace: Path, driver: str) -> None:
    # The reply's end waits for t1 to have run: only a task started mid-stream lets it go.
    model = HeldPlanner.from_dict(
        {"planner": [{"rationale": "r", "tasks": [step("t1"), step("t2", None, "t1")]}]}
    )
    model.until = lambda marks, _: "t1" in marks
    out = run(build(workspace, model), driver, {"goal": "g"})
    assert model._held == [True]  # t1 ran while the reply was still streaming
    assert out["status"] == "succeeded"
    assert {t.id: t.status for t in out["tasks"].values()} == {"t1": "completed", "t2": "completed"}
    assert MARKS == ["t1", "t2"]  # each ran once, t2 after t1
    assert out["usage"].by_role["planner"].llm_calls == 1  # no extra model call


def test_with_streaming_off_the_plan_is_not_streamed(workspace: Path) -> None:
    model = HeldPlanner.from_dict({"planner": [{"rationale": "r", "tasks": [step("t1")]}]})
    out = build(workspace, model, stream_plans=False).invoke({"goal": "g"})
    assert out["status"] == "succeeded" and MARKS == ["t1"]
    assert model._held == []  # one whole reply, as before


def _reader(tasks: dict[str, Task] | None = None, tools: tuple[str, ...] = ("mark",)) -> Any:
    feed = PlanFeed()

    def check_call(call: ToolCallSpec) -> str | None:
        return None if call.tool in tools else f"no tool named {call.tool!r}"

    checks = PlanChecks(bundles=[], check_call=check_call)
    return feed, feed.reader(tasks or {}, checks, 10)()


def _feed_text(read: Any, reply: dict[str, Any], *, complete: bool) -> None:
    text = json.dumps(reply)
    for end in range(1, len(text) + 1):
        read(text[:end], False)
    if complete:
        read(text, True)


def test_a_task_is_handed_over_once_the_next_one_begins_and_the_last_with_the_plan() -> None:
    feed, read = _reader()
    text = json.dumps({"rationale": "r", "tasks": [step("a"), step("b", None, "a")]})
    cut = text.index('{"id": "b"')
    read(text[: cut - 2], False)  # a's spec is whole, but nothing follows it yet
    assert feed.new(()) == []
    read(text[: cut + 1], False)  # b has begun: a is complete
    assert [t.id for t in feed.new(())] == ["a"]
    read(text, True)  # the reply has ended: b, the last, starts with the accepted plan
    assert [t.id for t in feed.new(())] == ["a"]
    assert feed.news({"a"}).done() is False and feed.news(()).done()


def test_a_task_depending_on_a_later_one_is_held_back() -> None:
    feed, read = _reader()
    reply = {"tasks": [step("a"), step("b", None, "c"), step("c"), step("d", None, "b")]}
    _feed_text(read, reply, complete=True)
    # b names c before c came; d depends on the held-back b: both wait for the end.
    assert [t.id for t in feed.new(())] == ["a", "c"]


def test_a_duplicate_id_and_an_unknown_tool_are_held_back() -> None:
    feed, read = _reader()
    unknown = {**step("x"), "call": {"tool": "nope", "args": {}}}
    reply = {
        "tasks": [
            step("a"),
            step("a", "again"),
            unknown,
            step("b", None, "x"),
            step("c"),
            step("e"),
        ]
    }
    _feed_text(read, reply, complete=True)
    assert [(t.id, t.call.args["name"] if t.call else "") for t in feed.new(())] == [
        ("a", "a"),
        ("c", "c"),
    ]


def test_a_spec_that_restates_a_completed_task_starts_nothing() -> None:
    done = Task(
        id="a",
        title="Step a",
        status="completed",
        call=ToolCallSpec(tool="mark", args={"name": "a"}),
    )
    feed, read = _reader({"a": done})
    _feed_text(read, {"tasks": [step("a"), step("b", None, "a"), step("c")]}, complete=True)
    assert [t.id for t in feed.new(())] == ["b"]


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
def test_a_plan_invalid_at_its_end_keeps_the_started_tasks_the_repair_keeps(
    workspace: Path, driver: str
) -> None:
    """The first reply streams a and b (both start), then a task naming an unknown
    dependency: invalid at its end, it goes back for repair. The repaired reply keeps
    a as it was and changes b: a's result stands (it is not run again), b's first
    run is discarded and b runs again as repaired."""
    first = {"rationale": "r", "tasks": [step("a"), step("b", "b-first"), step("z", None, "nope")]}
    repaired = {
        "rationale": "r",
        "tasks": [step("a"), step("b", "b-repaired"), step("c", None, "a")],
    }
    model = HeldPlanner.from_dict({"planner": [first, repaired]})
    # The first reply ends once a and b have both run.
    model.until = lambda marks, n: n > 1 or {"a", "b-first"} <= set(marks)
    out = run(build(workspace, model), driver, {"goal": "g"})
    assert model._held[0] is True
    assert out["status"] == "succeeded"
    assert Counter(MARKS) == {"a": 1, "b-first": 1, "b-repaired": 1, "c": 1}
    tasks = out["tasks"]
    assert set(tasks) == {"a", "b", "c"}  # z, never accepted, is in no plan
    assert tasks["a"].result.summary == "a marked" and tasks["a"].attempts == 1
    assert tasks["b"].result.summary == "b-repaired marked" and tasks["b"].attempts == 1
    assert out["usage"].by_role["planner"].llm_calls == 2  # the reply and its repair


@tool
def mark_after_repair(name: str) -> str:
    """Record that a step ran; return only once b's repaired step has run (or 10 s)."""
    MARKS.append(name)
    deadline = time.monotonic() + 10
    while "b-repaired" not in MARKS and time.monotonic() < deadline:
        time.sleep(0.005)
    return f"{name} marked"


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
def test_a_discarded_task_still_running_does_not_take_the_result_of_its_rerun(
    workspace: Path, driver: str
) -> None:
    """b's first run is still at work when the repaired plan changes b: the new b (same
    id) starts beside it and its result is b's; the old one's output is dropped when it
    ends. (Once both ran under one key, the rerun's result was the one dropped.)"""
    first_b = {**step("b"), "call": {"tool": "mark_after_repair", "args": {"name": "b-first"}}}
    first = {"rationale": "r", "tasks": [first_b, step("z", None, "nope")]}
    repaired = {"rationale": "r", "tasks": [step("b", "b-repaired")]}
    model = HeldPlanner.from_dict({"planner": [first, repaired]})
    model.until = lambda marks, n: n > 1 or "b-first" in marks
    cfg = AimeConfig(workspace=workspace, verify="off", stream_plans=True)
    graph = build_aime_graph(model, tools=[mark, mark_after_repair], config=cfg)
    out = run(graph, driver, {"goal": "g"})
    assert out["status"] == "succeeded"
    assert MARKS == ["b-first", "b-repaired"]
    assert out["tasks"]["b"].result.summary == "b-repaired marked"


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
def test_when_the_planner_gives_up_the_streamed_results_are_discarded(
    workspace: Path, driver: str
) -> None:
    bad = {"rationale": "r", "tasks": [step("a"), step("z", None, "nope")]}
    model = HeldPlanner.from_dict({"planner": [bad]})
    model.until = lambda marks, n: n > 1 or "a" in marks
    out = run(build(workspace, model, max_plan_repairs=0), driver, {"goal": "g"})
    assert model._held[0] is True and MARKS == ["a"]  # a ran mid-stream...
    assert out["status"] == "failed" and "no valid plan" in (out["reason"] or "")
    assert not out.get("tasks")  # ...and its result stands in no plan


def test_approve_plan_turns_streaming_off(workspace: Path) -> None:
    model = HeldPlanner.from_dict({"planner": [{"rationale": "r", "tasks": [step("t1")]}]})
    model.until = lambda marks, _: bool(marks)  # would hold 10 s if anything waited on it
    saver = InMemorySaver(serde=make_serializer())
    cfg = AimeConfig(workspace=workspace, verify="off", stream_plans=True)
    graph = build_aime_graph(model, tools=[mark], config=cfg, checkpointer=saver)
    thread = {"configurable": {"thread_id": "approve"}}
    paused = graph.invoke({"goal": "g"}, thread, context={"approve_plan": True})
    assert paused["__interrupt__"] and MARKS == []  # nothing ran before approval
    assert model._held == []  # the planner's reply was not streamed at all
    out = graph.invoke(
        Command(resume={"action": "approve"}), thread, context={"approve_plan": True}
    )
    assert out["status"] == "succeeded" and MARKS == ["t1"]


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so nothing handles it."""


@tool
def work(name: str) -> str:
    """Do a step's work; the step named in CRASH_IN dies the first time."""
    MARKS.append(name)
    if name in CRASH_IN and MARKS.count(name) == 1:
        raise Crash(name)
    return f"{name} done"


CRASH_IN: set[str] = set()


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
@pytest.mark.parametrize("crash_in", ["a", "b", "d"])
def test_a_crash_in_the_planners_step_resumes_without_running_a_finished_task_twice(
    workspace: Path, driver: str, crash_in: str
) -> None:
    """a runs while the reply streams (its end waits for it), b after a, c beside,
    d after b and c, once the reply has ended. The run dies in one of them; resumed,
    every task that had finished returns its saved result and only the one that died
    runs again; the planner's reply is not asked for again."""

    def worker(task_id: str, *deps: str) -> dict[str, Any]:
        return {**step(task_id, None, *deps), "call": {"tool": "work", "args": {"name": task_id}}}

    reply = {
        "rationale": "r",
        "tasks": [worker("a"), worker("b", "a"), worker("c"), worker("d", "b", "c")],
    }
    CRASH_IN.clear()
    CRASH_IN.add(crash_in)
    saver = InMemorySaver(serde=make_serializer())
    thread = {"configurable": {"thread_id": f"crash-{crash_in}-{driver}"}}
    cfg = AimeConfig(workspace=workspace, verify="off", stream_plans=True)

    def graph() -> tuple[Any, HeldPlanner]:
        model = HeldPlanner.from_dict({"planner": [reply]})
        model.until = lambda marks, _: "a" in marks
        return build_aime_graph(model, tools=[work], config=cfg, checkpointer=saver), model

    crashing, model = graph()
    with pytest.raises(Crash):
        if driver == "invoke":
            crashing.invoke({"goal": "g"}, thread, durability="sync")
        else:
            asyncio.run(crashing.ainvoke({"goal": "g"}, thread, durability="sync"))
    assert model._held == [True] and MARKS.count(crash_in) == 1
    ran = set(MARKS) - {crash_in}
    # Stopped inside the planner's step: what finished is saved with the step.
    snapshot = with_finished_tasks(crashing.get_state(thread), saver)
    assert snapshot.next == ("planner",)
    shown = snapshot.values["tasks"]
    assert {i for i, t in shown.items() if t.status == "completed"} == ran

    resumed, model = graph()
    out = run(resumed, driver, None, thread)
    assert out["status"] == "succeeded"
    assert Counter(MARKS) == {t: 2 if t == crash_in else 1 for t in "abcd"}
    assert all(t.status == "completed" and t.attempts == 1 for t in out["tasks"].values())
    assert model.prompts("planner") == []  # the plan came back from the checkpoint


def test_plans_are_not_streamed_from_a_fallback_chain_or_a_cached_model() -> None:
    # A chain's members prepare structured output each their own way and a stream cannot
    # fall through once begun; LangChain replays cached replies to invoke, not to stream.
    model = HeldPlanner.from_dict({})
    assert streams(model)
    assert not streams(FallbackChatModel(models=[model, HeldPlanner.from_dict({})]))
    assert not streams(HeldPlanner.from_dict({}).model_copy(update={"cache": InMemoryCache()}))
