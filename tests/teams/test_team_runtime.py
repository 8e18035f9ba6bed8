"""A team inside a whole run keeps the single actor's guarantees: ``ask_human`` and
tool approval interrupt inside a member's turn and resume; a crash inside a team
resumes without redoing finished member turns; stream events name the member;
run usage and budgets count every member's calls; ``ainvoke`` works."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from aimegraph import AgentUnit, AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, open_checkpointer, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.waits import NO_DEADLINE
from tests.scripted import submit
from tests.teams.helpers import UNITS

HUMAN_UNITS = [
    AgentUnit(
        name="writer",
        description="Writes the report, asking the user what is unclear.",
        persona="You are a writer.",
        tool_bundles=("human",),
    ),
    AgentUnit(
        name="reviewer",
        description="Reviews the report.",
        persona="You are a reviewer.",
        tool_bundles=("files",),
    ),
]


def team_plan(mode: str, *members: str, **extra: Any) -> dict[str, Any]:
    task = {
        "id": "t1",
        "title": "Write the report",
        "team": {"mode": mode, "members": list(members)},
    }
    return {"rationale": "r", "tasks": [task | extra]}


def graph_for(
    scenario: dict[str, Any],
    workspace: Path,
    *,
    units: list[AgentUnit],
    saver: Any = None,
    **cfg: Any,
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel.from_dict({"reporter": [{"text": "{all_results}"}], **scenario})
    config = AimeConfig(workspace=workspace, **cfg)
    return build_aime_graph(
        model, agents=units, config=config, checkpointer=saver, tools=cfg.pop("tools", None)
    ), model


def member_prompts(model: ScriptedChatModel, member: str) -> list[str]:
    return [p for p in model.prompts("actor") if f'<member name="{member}"' in p]


@pytest.mark.parametrize("tool_calling", ["native", "json"])
def test_ask_human_inside_a_member_turn_pauses_and_resumes(
    workspace: Path, tool_calling: str
) -> None:
    scenario = {
        "planner": [team_plan("sequential", "writer", "reviewer")],
        "actors": {
            "t1/writer": [
                {"tool": "ask_human", "args": {"question": "Which quarter?"}},
                submit("Report for {last_tool_output}."),
            ],
            "t1/reviewer": [submit("Reviewed: fine.")],
        },
    }
    saver = InMemorySaver(serde=make_serializer())
    graph, model = graph_for(
        scenario, workspace, units=HUMAN_UNITS, saver=saver, tool_calling=tool_calling
    )
    config = thread_config("team-ask")
    graph.invoke({"goal": "Write the report"}, config)
    (pending,) = graph.get_state(config).interrupts
    assert pending.value == {"kind": "ask_human", "question": "Which quarter?"} | NO_DEADLINE

    out = graph.invoke(Command(resume="Q3"), config)
    assert out["status"] == "succeeded"
    task = out["tasks"]["t1"]
    assert task.members[0].summary == "Report for Q3."
    assert "Report for Q3." in member_prompts(model, "reviewer")[0]


def test_tool_approval_in_parallel_members_pauses_each_and_resumes(workspace: Path) -> None:
    calls: list[str] = []

    @tool
    def publish(text: str) -> str:
        """Publish a text."""
        calls.append(text)
        return f"published {text}"

    units = [
        AgentUnit(name="a", description="First solver.", tool_bundles=("custom",)),
        AgentUnit(name="b", description="Second solver.", tool_bundles=("custom",)),
    ]
    scenario = {
        "planner": [team_plan("broadcast", "a", "b")],
        "actors": {
            "t1/a": [{"tool": "publish", "args": {"text": "from a"}}, submit("42", answer="42")],
            "t1/b": [{"tool": "publish", "args": {"text": "from b"}}, submit("42", answer="42")],
        },
    }
    saver = InMemorySaver(serde=make_serializer())
    model = ScriptedChatModel.from_dict({"reporter": [{"text": "{all_results}"}], **scenario})
    graph = build_aime_graph(
        model,
        agents=units,
        tools=[publish],
        config=AimeConfig(workspace=workspace, approve_tools=("publish",)),
        checkpointer=saver,
    )
    config = thread_config("team-approve")
    graph.invoke({"goal": "g"}, config)
    pending = graph.get_state(config).interrupts
    assert sorted(p.value["args"]["text"] for p in pending) == ["from a", "from b"]
    assert all(p.value["kind"] == "approve_tool" and p.value["task_id"] == "t1" for p in pending)
    assert calls == []
    # Approve one, deny the other: the denial is the member's observation.
    answers = {
        p.id: "approve"
        if p.value["args"]["text"] == "from a"
        else {"action": "deny", "reason": "no"}
        for p in pending
    }
    out = graph.invoke(Command(resume=answers), config)
    assert out["status"] == "succeeded"
    assert calls == ["from a"]
    result = out["tasks"]["t1"].result
    assert result.artifacts["agreement"] == "2/2"
    denied = [m for m in out["tasks"]["t1"].members if "denied" in m.transcript]
    assert [m.member for m in denied] == ["b"]


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so nothing handles it."""


@pytest.mark.parametrize("mode", ["sequential", "hierarchical", "broadcast"])
def test_crash_inside_a_team_resumes_without_redoing_finished_turns(
    tmp_path: Path, mode: str
) -> None:
    calls: list[str] = []
    crashed = threading.Event()

    @tool
    def side_effect(who: str) -> str:
        """Record that a member did its work."""
        if who == "reviewer":
            time.sleep(0.5)  # parallel members finish first
        calls.append(who)
        if who == "reviewer" and not crashed.is_set():
            crashed.set()
            raise Crash(who)
        return f"{who} recorded"

    units = [u.model_copy(update={"tool_bundles": ("custom",)}) for u in UNITS]

    def work(who: str) -> list[dict[str, Any]]:
        return [{"tool": "side_effect", "args": {"who": who}}, submit(f"{who} done")]

    scenario = {
        "planner": [team_plan(mode, "writer", "analyst", "reviewer")],
        "actors": {f"t1/{who}": work(who) for who in ("writer", "analyst", "reviewer")},
        "team_leads": {
            "t1": [
                {
                    "parts": [
                        {"member": "analyst", "instruction": "Sum it."},
                        {"member": "reviewer", "instruction": "Check it."},
                    ]
                }
            ]
        },
        "reporter": [{"text": "{all_results}"}],
    }
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    config = thread_config("team-crash")

    def graph(saver: Any) -> Any:
        model = ScriptedChatModel.from_dict(scenario)
        cfg = AimeConfig(workspace=tmp_path)
        return build_aime_graph(
            model, agents=units, tools=[side_effect], config=cfg, checkpointer=saver
        )

    with open_checkpointer(url) as saver, pytest.raises(Crash):
        graph(saver).invoke({"goal": "g"}, config, durability="sync")
    with open_checkpointer(url) as saver:  # as a new process would
        out = graph(saver).invoke(None, config)
    assert out["status"] == "succeeded"
    # Every member did its work once, except the one in flight, which was redone.
    assert Counter(calls) == {"writer": 1, "analyst": 1, "reviewer": 2}
    members = [m.member for m in out["tasks"]["t1"].members]
    assert sorted(members) == ["analyst", "reviewer", "writer"]


def test_stream_events_name_the_member_and_run_usage_counts_every_call(workspace: Path) -> None:
    scenario = {
        "planner": [team_plan("sequential", "writer", "reviewer")],
        "actors": {
            "t1/writer": [{"tool": "list_dir", "args": {}}, submit("draft")],
            "t1/reviewer": [submit("ok")],
        },
    }
    graph, _ = graph_for(scenario, workspace, units=HUMAN_UNITS)
    events = [
        (namespace, event)
        for namespace, event in graph.stream({"goal": "g"}, stream_mode="custom", subgraphs=True)
    ]
    actor = [e for _, e in events if e.get("type") == "actor" and "member" in e]
    assert [(e["event"], e["member"], e["turn"]) for e in actor] == [
        ("started", "writer", 1),
        ("completed", "writer", 1),
        ("started", "reviewer", 1),
        ("completed", "reviewer", 1),
    ]
    # Each member's events come from its own subgraph namespace inside the team's.
    spaces = {ns for ns, e in events if e.get("member") == "writer"}
    assert len(spaces) == 1
    # (the eager runner, the executor's or the streaming planner's, puts its "actor"
    # task between its node and the team)
    kinds = [part.split(":")[0] for part in next(iter(spaces))]
    assert kinds[0] in ("executor", "planner") and kinds[-2:] == ["sequential", "member"]
    (team,) = [e for _, e in events if e.get("type") == "team"]
    assert team["turns"] == [("writer", "completed"), ("reviewer", "completed")]

    state = graph.invoke({"goal": "g"})
    # planner + 3 member calls + reporter + verifier
    assert state["usage"].llm_calls == 6
    assert state["usage"].by_role["actor"].llm_calls == 3


def test_run_budget_counts_team_calls(workspace: Path) -> None:
    scenario = {
        "planner": [team_plan("sequential", "writer", "reviewer", "writer")],
        "actors": {"t1/writer": [submit("a")], "t1/reviewer": [submit("b")]},
    }
    graph, _ = graph_for(scenario, workspace, units=HUMAN_UNITS, max_llm_calls=3, verify="off")
    out = graph.invoke({"goal": "g"})
    # The planner's call leaves 2 for the task: two member turns, then the team stops.
    assert [m.member for m in out["tasks"]["t1"].members] == ["writer", "reviewer"]
    assert out["status"] == "budget_exhausted"


async def test_a_team_run_under_ainvoke(workspace: Path) -> None:
    scenario = {
        "planner": [team_plan("hierarchical", "writer", "analyst")],
        "team_leads": {"t1": [{"parts": [{"member": "analyst", "instruction": "Sum."}]}]},
        "actors": {"t1/analyst": [submit("48213")], "t1/writer": [submit("Total 48213.")]},
    }
    graph, _ = graph_for(scenario, workspace, units=UNITS)
    out = await graph.ainvoke({"goal": "g"})
    assert out["status"] == "succeeded"
    assert out["tasks"]["t1"].result.summary == "Total 48213."


def test_a_team_task_is_recorded_in_long_term_memory(workspace: Path) -> None:
    from langgraph.store.memory import InMemoryStore

    from aimegraph.memory import namespace

    store = InMemoryStore()
    scenario = {
        "planner": [team_plan("sequential", "writer", "reviewer")],
        "actors": {"t1/writer": [submit("draft")], "t1/reviewer": [submit("Q3 total 48213")]},
        "reporter": [{"text": "{all_results}"}],
    }
    model = ScriptedChatModel.from_dict(scenario)
    graph = build_aime_graph(
        model, agents=HUMAN_UNITS, store=store, config=AimeConfig(workspace=workspace)
    )
    assert graph.invoke({"goal": "g"}, thread_config("team-memory"))["status"] == "succeeded"
    episodes = {
        item.value["task_id"]: item.value for item in store.search(namespace("default", "episodes"))
    }
    assert (
        episodes["t1"]["summary"] == "Q3 total 48213" and episodes["t1"]["outcome"] == "completed"
    )


def test_a_human_edit_of_the_plan_may_assign_a_team_but_not_an_unknown_unit(
    workspace: Path,
) -> None:
    scenario = {
        "planner": [{"rationale": "r", "tasks": [{"id": "t1", "title": "Write the report"}]}],
        "actors": {"t1/writer": [submit("draft")], "t1/reviewer": [submit("checked")]},
    }
    saver = InMemorySaver(serde=make_serializer())
    graph, _ = graph_for(scenario, workspace, units=HUMAN_UNITS, saver=saver, approve_plan=True)
    config = thread_config("team-edit")
    graph.invoke({"goal": "g"}, config)

    def edit(*members: str) -> dict[str, Any]:
        team = {"mode": "sequential", "members": list(members)}
        return {"action": "edit", "plan": team_plan("sequential", *members) | {"tasks": [
            {"id": "t1", "title": "Write the report", "team": team}]}}  # fmt: skip

    graph.invoke(Command(resume=edit("writer", "editor")), config)
    (pending,) = graph.get_state(config).interrupts
    assert "unknown agent units ['editor']" in pending.value["error"]
    out = graph.invoke(Command(resume=edit("writer", "reviewer")), config)
    assert out["status"] == "succeeded"
    assert [m.member for m in out["tasks"]["t1"].members] == ["writer", "reviewer"]
