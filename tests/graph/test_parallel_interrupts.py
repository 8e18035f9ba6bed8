"""Resuming a parallel interrupt runs nothing twice.

Three actors in flight, one paused for a human (tool approval, ``ask_human``) while
its reply's other call and its siblings' calls have side effects: after the resume
every side effect has happened exactly once, under both schedulers, with ``invoke``
and ``ainvoke``, and inside a team (deepagents' most reported bug is the resume
re-running the siblings' tool calls).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.scripted import call, plan, spec, submit

from aimegraph import AgentUnit, AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models import ScriptedChatModel

CONFIG = thread_config("parallel-interrupts")


class SideEffects:
    """Tools whose every run is counted: ``record(tag)`` runs freely, ``publish(text)``
    is the one a human approves."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

        @tool
        def record(tag: str) -> str:
            """Record that something happened."""
            self.runs[tag] += 1
            return f"recorded {tag}"

        @tool
        def publish(text: str) -> str:
            """Publish a text."""
            self.runs[f"publish {text}"] += 1
            return f"published {text}"

        self.tools = [record, publish]


def together(*steps: dict[str, Any]) -> dict[str, Any]:
    """One reply calling several tools at once."""
    return {"calls": [{"tool": s["tool"], "args": s["args"]} for s in steps]}


def record(tag: str) -> dict[str, Any]:
    return call("record", tag=tag)


PAUSING_STEPS = {
    # The reply that pauses also runs a free call beside the paused one.
    "approval": together(record("a beside"), call("publish", text="a")),
    "question": together(record("a beside"), call("ask_human", question="Which one?")),
}
EXPECTED = {"a beside": 1, "b1": 1, "b2": 1, "c1": 1}


def three_actors(pausing: str) -> dict[str, Any]:
    bundles = ["custom", "human"]
    return {
        "planner": [
            plan(
                *(spec(t, tool_bundles=bundles) for t in "abc"),
                spec("d", "a", "b", "c", tool_bundles=bundles),
            )
        ],
        "actors": {
            "a": [PAUSING_STEPS[pausing], submit("a: {last_tool_output}")],
            "b": [record("b1"), record("b2"), submit("b done")],
            "c": [record("c1"), submit("c done")],
            "d": [record("d1"), submit("d done")],
        },
    }


def build(scenario: dict[str, Any], effects: SideEffects, workspace: Path, **config: Any) -> Any:
    return build_aime_graph(
        ScriptedChatModel.from_dict(scenario),
        tools=effects.tools,
        config=AimeConfig(workspace=workspace, approve_tools=("publish",), **config),
        checkpointer=InMemorySaver(serde=make_serializer()),
    )


def run(graph: Any, inputs: Any, use_async: bool) -> Any:
    if use_async:
        return asyncio.run(graph.ainvoke(inputs, CONFIG))
    return graph.invoke(inputs, CONFIG)


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("scheduler", ["eager", "batch"])
@pytest.mark.parametrize("pausing", ["approval", "question"])
def test_resuming_one_paused_actor_reruns_no_sibling_call(
    workspace: Path, scheduler: str, pausing: str, use_async: bool
) -> None:
    effects = SideEffects()
    graph = build(three_actors(pausing), effects, workspace, scheduler=scheduler)

    out = run(graph, {"goal": "three at once"}, use_async)
    (paused,) = out["__interrupt__"]
    assert paused.value["kind"] == ("approve_tool" if pausing == "approval" else "ask_human")
    # Everything but the paused call ran once; d waits for a.
    assert effects.runs == EXPECTED

    answer = {"action": "approve"} if pausing == "approval" else "the second"
    out = run(graph, Command(resume=answer), use_async)
    assert out["status"] == "succeeded"
    assert effects.runs == EXPECTED | {"d1": 1} | (
        {"publish a": 1} if pausing == "approval" else {}
    )
    expected_a = "a: published a" if pausing == "approval" else "a: the second"
    assert out["tasks"]["a"].result.summary == expected_a


def test_siblings_paused_in_turn_each_resume_alone(workspace: Path) -> None:
    # b pauses too, after a free call: answering a first leaves b waiting, and
    # answering b then runs none of the calls made before either pause again.
    effects = SideEffects()
    scenario = three_actors("approval")
    scenario["actors"]["b"] = [together(record("b1"), call("publish", text="b")), submit("b ok")]
    graph = build(scenario, effects, workspace)
    out = graph.invoke({"goal": "g"}, CONFIG)
    ids = {i.value["task_id"]: i.id for i in out["__interrupt__"]}
    assert set(ids) == {"a", "b"}
    out = graph.invoke(Command(resume={ids["a"]: {"action": "approve"}}), CONFIG)
    assert [i.id for i in out["__interrupt__"]] == [ids["b"]]
    out = graph.invoke(Command(resume={ids["b"]: {"action": "approve"}}), CONFIG)
    assert out["status"] == "succeeded"
    assert effects.runs == {
        "a beside": 1,
        "b1": 1,
        "c1": 1,
        "d1": 1,
        "publish a": 1,
        "publish b": 1,
    }


UNITS = [
    AgentUnit(name=name, description=f"Solver {name}.", tool_bundles=("custom",))
    for name in ("x", "y", "z")
]


@pytest.mark.parametrize("scheduler", ["eager", "batch"])
def test_inside_a_team_resuming_one_member_reruns_no_sibling_call(
    workspace: Path, scheduler: str
) -> None:
    effects = SideEffects()
    team = {"mode": "broadcast", "members": ["x", "y", "z"]}
    scenario = {
        "planner": [plan({"id": "t1", "title": "Solve", "team": team})],
        "actors": {
            "t1/x": [together(record("x beside"), call("publish", text="x")), submit("7")],
            "t1/y": [record("y1"), record("y2"), submit("7")],
            "t1/z": [record("z1"), submit("7")],
        },
        "reporter": [{"text": "{all_results}"}],
    }
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(scenario),
        tools=effects.tools,
        agents=UNITS,
        config=AimeConfig(workspace=workspace, approve_tools=("publish",), scheduler=scheduler),
        checkpointer=InMemorySaver(serde=make_serializer()),
    )
    out = graph.invoke({"goal": "solve"}, CONFIG)
    assert len(out["__interrupt__"]) == 1
    before = {"x beside": 1, "y1": 1, "y2": 1, "z1": 1}
    assert effects.runs == before
    out = graph.invoke(Command(resume={"action": "approve"}), CONFIG)
    assert out["status"] == "succeeded"
    assert effects.runs == before | {"publish x": 1}
    assert out["tasks"]["t1"].result.artifacts["agreement"] == "3/3"


@pytest.mark.parametrize("pausing", ["approval", "question"])
def test_actors_checkpointing_only_when_they_pause_rerun_nothing_either(
    workspace: Path, pausing: str
) -> None:
    # actor_durability="exit": an actor saves its steps only when it pauses; the
    # paused step's finished calls are saved with it.
    effects = SideEffects()
    graph = build(three_actors(pausing), effects, workspace, actor_durability="exit")
    graph.invoke({"goal": "three at once"}, CONFIG)
    answer = {"action": "approve"} if pausing == "approval" else "the second"
    assert graph.invoke(Command(resume=answer), CONFIG)["status"] == "succeeded"
    assert effects.runs == EXPECTED | {"d1": 1} | (
        {"publish a": 1} if pausing == "approval" else {}
    )
