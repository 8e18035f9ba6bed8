"""Scheduling and checkpoint layout of the aime graph."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.errors import GraphDrained
from langgraph.graph import START, StateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Command
from tests.conftest import GraphFactory, steps_of
from tests.scripted import call, spec, submit

from aimegraph.checkpoints import make_serializer
from aimegraph.checkpoints.delta import checkpoint_values, with_finished_tasks
from aimegraph.config import AimeConfig
from aimegraph.graphs.aime import build_aime_graph
from aimegraph.models import ScriptedChatModel
from aimegraph.state import AimeState


def independent_plan(n: int) -> dict[str, Any]:
    tasks = [{"id": f"t{i}", "title": f"Task {i}", "dependencies": []} for i in range(n)]
    return {
        "planner": [{"rationale": "scripted", "tasks": tasks, "drop": []}],
        "reporter": [{"text": "done"}],
    }


def test_checkpoints_store_task_changes_not_the_whole_task_map(
    scripted_graph: GraphFactory,
) -> None:
    saver = InMemorySaver()
    graph, _ = scripted_graph(
        independent_plan(12), checkpointer=saver, max_parallel=3, scheduler="batch"
    )
    config = {"configurable": {"thread_id": "lean"}}
    assert graph.invoke({"goal": "twelve items"}, config)["status"] == "succeeded"

    top_level = [c for c in saver.list(config) if c.config["configurable"]["checkpoint_ns"] == ""]
    assert len(top_level) > 10
    # No checkpoint re-serialises the task map or the update log; each stores
    # only the writes of its step (a full snapshot comes every 100 updates).
    for checkpoint in top_level:
        values = checkpoint.checkpoint["channel_values"]
        assert "tasks" not in values and "updates" not in values

    # Every checkpoint still reads back as the full map as of that step.
    completed_per_step = [
        sum(t.status == "completed" for t in snapshot.values.get("tasks", {}).values())
        for snapshot in reversed(list(graph.get_state_history(config)))
    ]
    assert completed_per_step[-1] == 12
    assert completed_per_step == sorted(completed_per_step)
    assert {0, 3, 6, 9, 12} <= set(completed_per_step)


def test_task_map_is_rebuilt_from_a_reopened_sqlite_database(
    scripted_graph: GraphFactory, tmp_path: Path
) -> None:
    db = tmp_path / "checkpoints.db"
    config = {"configurable": {"thread_id": "reopened"}}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph, _ = scripted_graph(independent_plan(5), checkpointer=saver, max_parallel=2)
        out = graph.invoke({"goal": "five items"}, config)
    with SqliteSaver.from_conn_string(str(db)) as reopened:
        graph, _ = scripted_graph(independent_plan(5), checkpointer=reopened)
        state = graph.get_state(config).values
    assert state["tasks"] == out["tasks"]
    assert state["updates"] == out["updates"]
    assert all(t.result is not None and t.status == "completed" for t in state["tasks"].values())


def test_raw_checkpoints_read_back_the_same_task_map_as_get_state(
    scripted_graph: GraphFactory,
) -> None:
    saver = InMemorySaver(serde=make_serializer())  # read directly below
    graph, _ = scripted_graph(
        independent_plan(60),
        checkpointer=saver,
        max_parallel=1,
        max_tasks=60,
        max_steps=1000,
        scheduler="batch",
    )
    config = {"configurable": {"thread_id": "raw"}}
    assert graph.invoke({"goal": "sixty items"}, config)["status"] == "succeeded"

    top_level = [c for c in saver.list(config) if c.config["configurable"]["checkpoint_ns"] == ""]
    # One task per step writes the map more than 100 times: some checkpoints
    # hold a snapshot, the others only deltas.
    assert any("tasks" in c.checkpoint["channel_values"] for c in top_level)
    assert any("tasks" not in c.checkpoint["channel_values"] for c in top_level)
    for item in top_level:
        expected = graph.get_state(item.config).values
        raw = checkpoint_values(saver, item)
        assert raw.get("tasks", {}) == expected.get("tasks", {})
        assert raw.get("updates", []) == expected.get("updates", [])


# --- eager dispatch (AimeConfig.scheduler="eager") ---


def custom(id: str, *deps: str) -> dict[str, Any]:
    """A task whose actor has the test's own tools."""
    return spec(id, *deps, tool_bundles=("custom",))


def in_flight(events: list[dict[str, Any]]) -> list[int]:
    """Actors running after each actor event of a stream, in order."""
    running, counts = 0, []
    for event in events:
        running += {"started": 1, "completed": -1, "failed": -1}[event["event"]]
        counts.append(running)
    return counts


def actor_events(graph: Any, inputs: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return [
        event
        for _, event in graph.stream(inputs, stream_mode="custom", subgraphs=True, **kwargs)
        if event.get("type") == "actor"
    ]


@pytest.mark.parametrize(("scheduler", "saw"), [("eager", "c2 started"), ("batch", "timed out")])
def test_a_ready_task_starts_while_an_unrelated_slower_one_runs(
    scripted_graph: GraphFactory, scheduler: str, saw: str
) -> None:
    c2_started = threading.Event()

    @tool
    def rendezvous(role: str) -> str:
        """Wait for c2 to start (role 'wait'), or say it started (role 'signal')."""
        if role == "signal":
            c2_started.set()
            return "signalled"
        # Under the batch scheduler c2 cannot start before this task ends: a timeout.
        return "c2 started" if c2_started.wait(10 if scheduler == "eager" else 0.5) else "timed out"

    graph, _ = scripted_graph(
        {
            "planner": [
                {"rationale": "r", "tasks": [custom("slow"), custom("c1"), custom("c2", "c1")]}
            ],
            "actors": {
                "slow": [
                    {"tool": "rendezvous", "args": {"role": "wait"}},
                    submit("{last_tool_output}"),
                ],
                "c2": [{"tool": "rendezvous", "args": {"role": "signal"}}, submit("c2 done")],
            },
        },
        tools=[rendezvous],
        scheduler=scheduler,
    )
    out = graph.invoke({"goal": "g"})
    assert out["status"] == "succeeded"
    assert out["tasks"]["slow"].result.summary == saw


def test_eager_runs_the_diamond_in_one_executor_visit_and_c_sees_both(
    scripted_graph: GraphFactory,
) -> None:
    scenario = {
        "planner": [{"rationale": "r", "tasks": [spec("a"), spec("b"), spec("c", "a", "b")]}],
        "actors": {
            "a": [submit("a ok")],
            "b": [submit("b ok")],
            "c": [submit("c combined [{dep:a}] and [{dep:b}]")],
        },
    }
    # The plan's reply is not streamed: the executor node runs them all.
    graph, model = scripted_graph(scenario, scheduler="eager", stream_plans=False)
    assert [name for _, name in steps_of(graph, {"goal": "g"})].count("executor") == 1
    model.reset()
    events = actor_events(graph, {"goal": "g"})
    order = [(e["event"], e["task_id"]) for e in events]
    assert order.index(("started", "c")) > max(
        order.index(("completed", "a")), order.index(("completed", "b"))
    )
    model.reset()
    out = graph.invoke({"goal": "g"})
    assert out["tasks"]["c"].result.summary == "c combined [a ok] and [b ok]"
    assert all(t.status == "completed" and t.attempts == 1 for t in out["tasks"].values())


@pytest.mark.parametrize(("max_parallel", "context"), [(2, None), (4, {"max_parallel": 1})])
def test_eager_keeps_at_most_max_parallel_actors_in_flight(
    scripted_graph: GraphFactory, max_parallel: int, context: dict[str, Any] | None
) -> None:
    limit = context["max_parallel"] if context else max_parallel
    # Actors meet in groups of `limit`: a group only passes when that many run at once.
    group = threading.Barrier(limit, timeout=10)

    @tool
    def meet() -> str:
        """Wait for the other actors of this group."""
        try:
            group.wait()
        except threading.BrokenBarrierError:
            return "alone"
        return "met"

    graph, _ = scripted_graph(
        {
            "planner": [{"rationale": "r", "tasks": [custom(f"t{i}") for i in range(6)]}],
            "actors": {f"t{i}": [call("meet"), submit("{last_tool_output}")] for i in range(6)},
        },
        tools=[meet],
        max_parallel=max_parallel,
        scheduler="eager",
    )
    events = actor_events(graph, {"goal": "six"}, context=context)
    assert len(events) == 12 and max(in_flight(events)) == limit
    assert [e["summary"] for e in events if e["event"] == "completed"] == ["met"] * 6


def test_eager_with_every_step_still_consults_the_planner_after_each_batch(
    scripted_graph: GraphFactory,
) -> None:
    chain = [spec("a"), spec("b", "a"), spec("c", "b")]
    scenario = {"planner": [{"rationale": "r", "tasks": chain}, {"rationale": "r", "tasks": []}]}
    graph, model = scripted_graph(scenario, replan="every_step", scheduler="eager")
    # The runner's own @tasks (one per actor, one per round) are left out.
    nodes = [n for _, n in steps_of(graph, {"goal": "chain"}) if n not in ("actor", "round")]
    assert nodes == [
        "intake", "planner", "orchestrator", "executor",
        "orchestrator", "planner", "orchestrator", "executor",
        "orchestrator", "planner", "orchestrator", "executor",
        "orchestrator", "reporter", "verifier",
    ]  # fmt: skip
    assert len(model.prompts("planner")) == 3


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so nothing handles it."""


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_eager_replay_hands_each_saved_result_to_its_own_task(
    scripted_graph: GraphFactory, run: str
) -> None:
    """Tasks finish in another order than they started (y, z, then x) and the run
    crashes in w. On resume every finished task returns its saved result to the
    right task and runs no more; only w, in flight at the crash, runs again.
    (Replayed without the recorded rounds, x and y would both be found finished
    at once; w, first in plan order, would be handed z's saved result and z's call
    would run on in w's actor.)"""
    calls: list[str] = []
    z_done = threading.Event()

    @tool
    def work(task: str) -> str:
        """Do the task's work."""
        calls.append(task)
        if task == "z":
            z_done.set()
        if task == "x":
            z_done.wait(10)  # x finishes after y and z, though it started first
        if task == "w" and calls.count("w") == 1:
            raise Crash("w")
        return f"{task} done"

    def step(task: str) -> list[dict[str, Any]]:
        return [{"tool": "work", "args": {"task": task}}, submit("{last_tool_output}")]

    scenario = {
        "planner": [
            {
                "rationale": "r",
                "tasks": [custom("x"), custom("y"), custom("w", "x"), custom("z", "y")],
            }
        ],
        "actors": {t: step(t) for t in "xyzw"},
    }
    saver = InMemorySaver(serde=make_serializer())
    config = {"configurable": {"thread_id": "replay"}}
    graph, _ = scripted_graph(scenario, checkpointer=saver, tools=[work], scheduler="eager")
    with pytest.raises(Crash):
        if run == "invoke":
            graph.invoke({"goal": "g"}, config, durability="sync")
        else:
            asyncio.run(graph.ainvoke({"goal": "g"}, config, durability="sync"))
    assert calls[-1] == "w" and sorted(calls) == ["w", "x", "y", "z"]

    graph, _ = scripted_graph(scenario, checkpointer=saver, tools=[work], scheduler="eager")
    modes = ["tasks", "custom", "values"]
    if run == "invoke":
        chunks = list(graph.stream(None, config, stream_mode=modes, subgraphs=True))
    else:

        async def collect() -> list[Any]:
            return [c async for c in graph.astream(None, config, stream_mode=modes, subgraphs=True)]

        chunks = asyncio.run(collect())
    call_input: dict[str, str] = {}  # an actor @task's id -> the task it was called for
    actor_events: list[tuple[str, str]] = []  # (the @task it ran in, the task it reports)
    for ns, mode, data in chunks:
        if mode == "tasks" and data["name"] == "actor" and "input" in data:
            ((inp,), _) = data["input"]
            call_input[data["id"]] = inp["task"].id
        elif mode == "custom" and data.get("type") == "actor":
            actor_events.append((ns[1].split(":")[1], data["task_id"]))
        elif mode == "values" and not ns:
            out = data
    # Only w, in flight at the crash, ran on, inside the call made for w itself.
    assert [task for _, task in actor_events] == ["w"]  # its "completed" event
    assert all(call_input[call] == task for call, task in actor_events)
    assert out["status"] == "succeeded"
    assert Counter(calls) == {"x": 1, "y": 1, "z": 1, "w": 2}
    assert {t.id: t.result.summary for t in out["tasks"].values()} == {
        t: f"{t} done" for t in "xyzw"
    }
    assert all(t.attempts == 1 for t in out["tasks"].values())


@pytest.mark.parametrize("app", ["checkpointed", "unsaved"])
def test_eager_saves_finished_actors_only_where_the_run_checkpoints(
    scripted_graph: GraphFactory, app: str
) -> None:
    """Built without a checkpointer and embedded in an app compiled with one, the
    graph still saves each finished actor (a crash in w loses neither x nor y);
    in a run that saves nothing, the actors are called without LangGraph ``@task``s
    (nothing to replay: no ``actor`` task in the stream)."""
    calls: list[str] = []

    @tool
    def work(task: str) -> str:
        """Do the task's work."""
        calls.append(task)
        if task == "w" and calls.count("w") == 1:
            raise Crash("w")
        return f"{task} done"

    scenario = {
        "planner": [{"rationale": "r", "tasks": [custom("x"), custom("y"), custom("w", "x")]}],
        "actors": {
            t: [{"tool": "work", "args": {"task": t}}, submit("{last_tool_output}")] for t in "xyw"
        },
    }
    aime, _ = scripted_graph(scenario, tools=[work], scheduler="eager", stream_plans=False)
    saver = InMemorySaver(serde=make_serializer()) if app == "checkpointed" else None
    builder: StateGraph[Any] = StateGraph(AimeState)
    builder.add_node("aime", aime)
    builder.add_edge(START, "aime")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "embedded"}}
    with pytest.raises(Crash):
        graph.invoke({"goal": "g"}, config, **({"durability": "sync"} if saver else {}))
    assert sorted(calls) == ["w", "x", "y"]

    chunks = list(
        graph.stream(
            None if saver else {"goal": "g"},
            config,
            stream_mode=["tasks", "values"],
            subgraphs=True,
        )
    )
    actor_calls = [d for _, mode, d in chunks if mode == "tasks" and d["name"] == "actor"]
    out = next(d for ns, mode, d in reversed(chunks) if mode == "values" and not ns)
    assert out["status"] == "succeeded"
    if saver:  # only w, in flight at the crash, ran again
        assert Counter(calls) == {"x": 1, "y": 1, "w": 2} and actor_calls
    else:  # nothing was saved: the run starts over
        assert Counter(calls) == {"x": 2, "y": 2, "w": 2} and not actor_calls


@pytest.mark.parametrize("actor_durability", ["inherit", "exit"])
def test_actor_durability_exit_leaves_no_actor_checkpoints_and_still_resumes_questions(
    scripted_graph: GraphFactory, actor_durability: str
) -> None:
    ask = {"tool": "ask_human", "args": {"question": "Which region?"}}
    scenario = {
        "planner": [
            {
                "rationale": "r",
                "tasks": [spec("a", tool_bundles=("human",)), spec("b"), spec("c", "a", "b")],
            }
        ],
        "actors": {
            "a": [ask, submit("a: {last_tool_output}")],
            "b": [submit("b ok")],
            "c": [submit("c after [{dep:a}] [{dep:b}]")],
        },
    }
    saver = InMemorySaver(serde=make_serializer())
    config = {"configurable": {"thread_id": f"durability-{actor_durability}"}}
    graph, _ = scripted_graph(scenario, checkpointer=saver, actor_durability=actor_durability)
    (question,) = graph.invoke({"goal": "g"}, config)["__interrupt__"]
    out = graph.invoke(Command(resume={question.id: "North"}), config)
    assert out["status"] == "succeeded"
    assert out["tasks"]["c"].result.summary == "c after [a: North] [b ok]"
    actor_checkpoints = Counter(
        c.config["configurable"]["checkpoint_ns"].split("|")[-1].split(":")[0]
        for c in saver.list(config)
        if "|actor:" in c.config["configurable"]["checkpoint_ns"]
    )
    if actor_durability == "exit":
        # Only a's actor, saved when it paused on the question (once per namespace).
        assert sum(actor_checkpoints.values()) == 1
    else:
        # Every step of every actor: its input and start, then a's react (the question),
        # tools (answered) and react (its result); b's and c's one react each.
        assert sum(actor_checkpoints.values()) == (2 + 3) + (2 + 1) * 2


DRAIN_ASKED = threading.Event()
B_IN_FLIGHT = threading.Event()


class _BWaitsForTheDrain(ScriptedChatModel):
    """Task b's model call returns only once the drain has been asked: b then
    finishes in the step the drain came in, and its dependant becomes ready."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        if any('<task id="b"' in str(m.content) for m in messages):
            B_IN_FLIGHT.set()
            assert DRAIN_ASKED.wait(10)
        return super()._generate(messages, stop, run_manager, **kw)


@pytest.mark.parametrize("driver", ["invoke", "ainvoke"])
def test_eager_starts_nothing_once_a_drain_is_asked_and_hands_back_what_finished(
    workspace: Path, driver: str
) -> None:
    # a's tool asks for the drain (as Ctrl-C would) while b's last step (its model
    # call, then submit_result in the same step) is in flight: b finishes, which
    # makes d ready; d must not start. a stops after its tool step.
    DRAIN_ASKED.clear()
    B_IN_FLIGHT.clear()
    started: list[str] = []

    @tool
    def stop_here(task: str) -> str:
        """Ask the run to stop (as Ctrl-C would), then finish."""
        started.append(task)
        if task == "a":
            # Under load b's actor may not have reached its model call yet: the drain
            # is asked while that call is in flight, not before it starts.
            assert B_IN_FLIGHT.wait(10)
            control = get_runtime().control
            assert control is not None
            control.request_drain("test")
            DRAIN_ASKED.set()
        return f"{task} done"

    model = _BWaitsForTheDrain.from_dict(
        {
            "planner": [{"rationale": "r", "tasks": [custom("a"), custom("b"), custom("d", "b")]}],
            "actors": {
                "a": [call("stop_here", task="a"), submit("a ok")],
                "b": [submit("b ok")],
                "d": [{"calls": [call("stop_here", task="d"), submit("d ok")]}],
            },
        }
    )
    saver = InMemorySaver(serde=make_serializer())
    graph = build_aime_graph(
        model,
        tools=[stop_here],
        # The executor's drain (the streaming planner's runner drains the same way).
        config=AimeConfig(workspace=workspace, verify="off", stream_plans=False),
        checkpointer=saver,
    )
    config = {"configurable": {"thread_id": "drained"}}
    with pytest.raises(GraphDrained):
        if driver == "invoke":
            graph.invoke({"goal": "g"}, config)
        else:
            asyncio.run(graph.ainvoke({"goal": "g"}, config))
    assert started == ["a"]  # d, ready once b finished, never started
    # The run stops in the executor's step, b's result kept (handed back), a stopped
    # after its tool step, d still to start.
    state = with_finished_tasks(graph.get_state(config), saver)
    assert state.next == ("executor",)
    tasks = state.values["tasks"]
    assert tasks["b"].status == "completed" and tasks["d"].status == "pending"
    assert tasks["a"].status != "completed"
    # Carrying on finishes a from where it stopped (its tool is not run again), then d.
    assert graph.invoke(None, config)["status"] == "succeeded"
    assert started == ["a", "d"]
