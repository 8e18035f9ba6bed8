"""Issue 11 items 1-3: async tools, the event loop under ainvoke, timed-out tools, and
every model call (structured ones included) awaited under ainvoke."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.types import Command
from pydantic import PrivateAttr
from tests.conftest import GraphFactory
from tests.scripted import call, plan, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models.offline.scripted import ScriptedChatModel


@tool
async def fetch_async(key: str) -> str:
    """Looks a key up (an async-only tool)."""
    await asyncio.sleep(0)
    return f"value of {key}"


def one_task(tool_call: dict[str, Any]) -> dict[str, Any]:
    return {
        "planner": [plan({"id": "a", "title": "Look up", "tool_bundles": ["custom"]})],
        "actors": {"a": [tool_call, submit("{last_tool_output}")]},
    }


async def test_async_tool_is_awaited_under_ainvoke(scripted_graph: GraphFactory) -> None:
    graph, _ = scripted_graph(one_task(call("fetch_async", key="k")), tools=[fetch_async])
    out = await graph.ainvoke({"goal": "g"})
    assert out["tasks"]["a"].result.summary == "value of k"


def test_async_only_tools_run_under_invoke_on_one_engine_loop(
    scripted_graph: GraphFactory,
) -> None:
    # Issue 25 point 2: an async-only tool (what MCP adapters return) runs under invoke,
    # on the engine's own loop: not on the caller's thread, the same loop for every
    # call and every run of the process (not one per call).
    seen: list[tuple[int, int]] = []

    @tool
    async def where(key: str) -> str:
        """Says where it ran."""
        seen.append((threading.get_ident(), id(asyncio.get_running_loop())))
        await asyncio.sleep(0)
        return f"ran {key}"

    scenario = one_task(call("where", key="1"))
    scenario["actors"]["a"].insert(1, call("where", key="2"))
    for _ in range(2):
        graph, _ = scripted_graph(scenario, tools=[where])
        assert graph.invoke({"goal": "g"})["tasks"]["a"].result.summary == "ran 2"
    assert len(seen) == 4
    assert len(set(seen)) == 1
    assert seen[0][0] != threading.get_ident()


def _hanging_tool(cancelled: threading.Event | asyncio.Event) -> BaseTool:
    """An async tool that never answers and sets ``cancelled`` when it is cancelled."""

    @tool
    async def hang(who: str) -> str:
        """Never answers."""
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return who

    return hang


def test_timed_out_async_tool_is_cancelled_under_invoke(scripted_graph: GraphFactory) -> None:
    cancelled = threading.Event()
    hang = _hanging_tool(cancelled)
    graph, _ = scripted_graph(one_task(call("hang", who="a")), tools=[hang], tool_timeout_s=0.2)
    out = graph.invoke({"goal": "g"})
    assert "hang did not finish within 0.2 s (cancelled)" in out["tasks"]["a"].result.summary
    assert cancelled.wait(10)


def test_async_tool_in_flight_is_cancelled_when_a_sync_run_is_abandoned(
    scripted_graph: GraphFactory,
) -> None:
    # The consumer of graph.stream stops listening mid-call (a front end closing, an
    # error in its loop): the call is cancelled, not left to run to its timeout.
    cancelled = threading.Event()

    @tool
    async def hang(who: str) -> str:
        """Answers in an hour."""
        get_stream_writer()({"hang": "started"})
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return who

    graph, _ = scripted_graph(one_task(call("hang", who="a")), tools=[hang], tool_timeout_s=600)

    def consume() -> None:
        for _, chunk in graph.stream({"goal": "g"}, stream_mode="custom", subgraphs=True):
            if chunk == {"hang": "started"}:
                break  # closes the stream

    threading.Thread(target=consume, daemon=True).start()
    assert cancelled.wait(10)


def two_tasks_calling(name: str) -> dict[str, Any]:
    return {
        "planner": [
            plan(
                {"id": "a", "title": "First", "tool_bundles": ["custom"]},
                {"id": "b", "title": "Second", "tool_bundles": ["custom"]},
            )
        ],
        "actors": {
            task: [call(name, who=task), submit("{last_tool_output}")] for task in ("a", "b")
        },
    }


async def test_parallel_sync_tools_run_at_once_off_the_event_loop(
    scripted_graph: GraphFactory,
) -> None:
    # Both tools must be inside their bodies at the same time to pass the barrier:
    # serialised calls (the loop blocked by the first) would break it.
    barrier = threading.Barrier(2, timeout=10)
    met = threading.Semaphore(0)
    release = threading.Event()

    @tool
    def meet(who: str) -> str:
        """Waits for the other task's call, then for the test."""
        barrier.wait()
        met.release()
        release.wait(30)
        return f"{who} met"

    graph, _ = scripted_graph(two_tasks_calling("meet"), tools=[meet], tool_timeout_s=60)
    run = asyncio.create_task(graph.ainvoke({"goal": "g"}))
    both_met = await asyncio.to_thread(lambda: met.acquire(timeout=30) and met.acquire(timeout=30))
    # While both sync tools sit in their bodies, the loop must keep serving other tasks:
    # a task started now runs to its end before the tools are released.
    served = asyncio.Event()

    async def other_work() -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        served.set()

    await asyncio.wait_for(asyncio.create_task(other_work()), 30)
    still_in_bodies = not run.done() and not release.is_set()
    release.set()
    out = await asyncio.wait_for(run, 60)
    assert both_met and served.is_set() and still_in_bodies
    assert {t.result.summary for t in out["tasks"].values()} == {"a met", "b met"}


async def test_two_runs_on_one_event_loop_overlap(scripted_graph: GraphFactory) -> None:
    # Two ainvoke runs gathered (as a server runs two requests): each one's tool
    # waits for the other's, so they pass only if neither run holds the loop.
    barrier = threading.Barrier(2, timeout=10)

    @tool
    def meet(who: str) -> str:
        """Waits for the other run's call."""
        barrier.wait()
        return f"{who} met"

    graph, _ = scripted_graph(one_task(call("meet", who="a")), tools=[meet], tool_timeout_s=30)
    first, second = await asyncio.wait_for(
        asyncio.gather(
            graph.ainvoke({"goal": "g"}, {"configurable": {"thread_id": "1"}}),
            graph.ainvoke({"goal": "g"}, {"configurable": {"thread_id": "2"}}),
        ),
        60,
    )
    assert first["tasks"]["a"].result.summary == second["tasks"]["a"].result.summary == "a met"


async def test_timed_out_async_tool_is_cancelled(scripted_graph: GraphFactory) -> None:
    cancelled = asyncio.Event()
    hang = _hanging_tool(cancelled)
    graph, model = scripted_graph(one_task(call("hang", who="a")), tools=[hang], tool_timeout_s=0.2)
    out = await graph.ainvoke({"goal": "g"})
    assert cancelled.is_set()
    assert "hang did not finish within 0.2 s (cancelled)" in out["tasks"]["a"].result.summary


HUNG_TOOL_RUN = """
import asyncio, sys, time
from langchain_core.tools import tool
from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models.offline.scripted import ScriptedChatModel

@tool
def hang(seconds: float) -> str:
    \"\"\"Sleeps for an hour.\"\"\"
    time.sleep(seconds)
    return "woke"

model = ScriptedChatModel.from_dict({
    "planner": [{"rationale": "s", "tasks": [
        {"id": "a", "title": "Wait", "tool_bundles": ["custom"]}]}],
    "actors": {"a": [{"tool": "hang", "args": {"seconds": 3600}},
                     {"tool": "submit_result",
                      "args": {"status": "completed", "summary": "{last_tool_output}"}}]},
})
graph = build_aime_graph(
    model, tools=[hang], config=AimeConfig(workspace=sys.argv[2], tool_timeout_s=0.5)
)
if sys.argv[1] == "async":
    out = asyncio.run(graph.ainvoke({"goal": "g"}))
else:
    out = graph.invoke({"goal": "g"})
print(out["tasks"]["a"].result.summary)
"""


def test_process_exits_after_a_run_whose_sync_tool_hangs(tmp_path: Path) -> None:
    # The run ends at the timeout; the abandoned tool thread must not keep the
    # process alive. The generous subprocess timeout is the failure signal.
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(HUNG_TOOL_RUN))
    for mode in ("sync", "async"):
        done = subprocess.run(
            [sys.executable, str(script), mode, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "hang did not finish within 0.5 s" in done.stdout
        assert "still running in the background" in done.stdout


class AwaitedModel(ScriptedChatModel):
    """A scripted model with an async API of its own: the first call of each
    actor waits until ``meet`` actors are inside ``_agenerate`` together, and the
    first ``fail_first`` actor calls raise a transient error."""

    meet: int = 1
    fail_first: int = 0
    _waiting: int = PrivateAttr(default=0)
    _met: asyncio.Event | None = PrivateAttr(default=None)
    _actor_calls: int = PrivateAttr(default=0)
    _awaited_roles: list[str] = PrivateAttr(default_factory=list)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if any('<task id="' in m.text for m in messages):
            self._actor_calls += 1
            if self._actor_calls <= self.fail_first:
                raise ConnectionError("connection reset")
            if self._met is None:
                self._met = asyncio.Event()
            if not self._met.is_set():
                self._waiting += 1
                if self._waiting == self.meet:
                    self._met.set()
                await asyncio.wait_for(self._met.wait(), 20)
        result = self._generate(messages, stop, **kwargs)
        self._awaited_roles.append(self.calls_by_role()[-1])
        return result

    def calls_by_role(self) -> list[str]:
        return [role for role, _ in self._calls]

    @property
    def awaited_roles(self) -> list[str]:
        return list(self._awaited_roles)

    @property
    def actor_calls(self) -> int:
        return self._actor_calls


def scripted(model: ScriptedChatModel, workspace: Path, **config: Any) -> Any:
    return build_aime_graph(model, tools=[], config=AimeConfig(workspace=workspace, **config))


async def test_parallel_actors_await_their_model_calls_together(workspace: Path) -> None:
    scenario = two_tasks_calling("calculator")
    for spec in scenario["planner"][0]["tasks"]:
        spec["tool_bundles"] = ["compute"]
    for steps in scenario["actors"].values():
        steps[0] = call("calculator", expression="1+1")
    model = AwaitedModel.from_dict(scenario)
    model.meet = 2
    out = await scripted(model, workspace).ainvoke({"goal": "g"})
    # Each actor's first call waited inside the model's async API for the other's.
    assert {t.result.summary for t in out["tasks"].values()} == {"2"}
    assert model.actor_calls == 4
    # Every other call went through the async API too.
    assert model.awaited_roles == model.calls_by_role()
    assert {"planner", "reporter", "verifier"} <= set(model.awaited_roles)


async def test_a_transient_model_error_is_retried_under_ainvoke(workspace: Path) -> None:
    scenario = one_task(call("calculator", expression="2*3"))
    scenario["planner"][0]["tasks"][0]["tool_bundles"] = ["compute"]
    model = AwaitedModel.from_dict(scenario)
    model.fail_first = 1
    out = await scripted(model, workspace).ainvoke({"goal": "g"})
    assert out["tasks"]["a"].result.summary == "6"
    assert model.actor_calls == 3  # the failed call, then the retried node's two steps


async def test_interrupts_from_tools_work_under_ainvoke(scripted_graph: GraphFactory) -> None:
    # ask_human (a sync tool, so in a daemon thread) and tool approval both pause
    # the run with interrupt() and resume with Command(resume=...).
    scenario = {
        "planner": [plan({"id": "a", "title": "Ask", "tool_bundles": ["human", "compute"]})],
        "actors": {
            "a": [
                call("ask_human", question="Which number?"),
                call("calculator", expression="{last_tool_output}*2"),
                submit("{last_tool_output}"),
            ]
        },
    }
    graph, _ = scripted_graph(scenario, checkpointer=InMemorySaver(), approve_tools=["calculator"])
    thread = {"configurable": {"thread_id": "t"}}
    out = await graph.ainvoke({"goal": "g"}, thread)
    assert out["__interrupt__"][0].value["kind"] == "ask_human"
    out = await graph.ainvoke(Command(resume="21"), thread)
    assert out["__interrupt__"][0].value["tool"] == "calculator"
    out = await graph.ainvoke(Command(resume=True), thread)
    assert out["tasks"]["a"].result.summary == "42"


class Ticker:
    """An asyncio task counting its turns on the loop."""

    def __init__(self) -> None:
        self.count = 0

    async def run(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0.001)


class AsyncOnlyModel(ScriptedChatModel):
    """A model with an async API only (its sync one raises, as a client built on an
    async transport would). Each call lasts until the ticker has turned twice, so
    a call made while the loop is blocked never ends; the calls record their roles."""

    _ticker: Ticker = PrivateAttr(default_factory=Ticker)
    _awaited: list[str] = PrivateAttr(default_factory=list)

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("this model has an async API only")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        start = self._ticker.count
        while self._ticker.count < start + 2:
            await asyncio.sleep(0.001)
        result = ScriptedChatModel._generate(self, messages, stop, **kwargs)
        self._awaited.append(self._calls[-1][0])
        return result


@pytest.mark.parametrize("mode", ["native", "json"])
async def test_an_async_only_model_runs_the_whole_graph_under_ainvoke(
    workspace: Path, mode: str
) -> None:
    scenario = one_task(call("calculator", expression="6*7"))
    scenario["planner"][0]["tasks"][0]["tool_bundles"] = ["compute"]
    model = AsyncOnlyModel.from_dict(scenario)
    ticking = asyncio.create_task(model._ticker.run())
    try:
        graph = scripted(model, workspace, verify="both", tool_calling=mode)
        out = await asyncio.wait_for(graph.ainvoke({"goal": "g"}), 60)
    finally:
        ticking.cancel()
    assert out["status"] == "succeeded", out.get("reason")
    assert out["tasks"]["a"].result.summary == "42"
    # Every model call was awaited, the structured ones (plan, task check, verdict)
    # included, and the loop kept turning during each of them.
    assert model._awaited == ["planner", "actor", "actor", "verifier", "reporter", "verifier"]
    assert out["usage"].llm_calls == 6


def test_an_async_only_model_under_invoke_fails_the_run_clearly(workspace: Path) -> None:
    model = AsyncOnlyModel.from_dict(one_task(submit("done")))
    out = scripted(model, workspace).invoke({"goal": "g"})
    assert out["status"] == "failed"
    assert (
        "model call failed: NotImplementedError: this model has an async API only"
        in (out["reason"])
    )
