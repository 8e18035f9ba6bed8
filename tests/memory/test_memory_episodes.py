"""Episodes and lessons in the store: written when tasks settle and runs end, recalled
by the planner and the actor factory, scoped per user, idempotent under a crash."""

from __future__ import annotations

import copy
import threading
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import open_checkpointer, thread_config
from aimegraph.memory import EPISODES, LESSONS, Episode, aopen_store, namespace, open_store
from aimegraph.models import ScriptedChatModel

GOAL = "Load the March invoices export and total the amounts."
# Attempt 1 fails (wrong delimiter); the retry succeeds: a lesson is due.
RECOVERY: dict[str, Any] = {
    "planner": [
        {
            "rationale": "one task",
            "tasks": [
                {
                    "id": "load",
                    "title": "Load the invoices export",
                    "description": "Parse the CSV export of invoices and total the amounts.",
                    "tool_bundles": ["compute"],
                }
            ],
        }
    ],
    "actors": {
        "load": {
            "attempts": [
                [
                    {
                        "tool": "submit_result",
                        "args": {"status": "failed", "summary": "comma delimiter gave 1 column"},
                    }
                ],
                [
                    {"tool": "calculator", "args": {"expression": "120+80"}},
                    {
                        "tool": "submit_result",
                        "args": {"status": "completed", "summary": "total {last_tool_output}"},
                    },
                ],
            ]
        }
    },
    "reporter": [{"text": "{all_results}"}],
}


def _run(
    store: Any,
    tmp_path: Path,
    thread: str,
    *,
    scenario: dict[str, Any] = RECOVERY,
    user: str | None = None,
    context: dict[str, Any] | None = None,
    saver: Any = None,
    goal: str = GOAL,
) -> tuple[dict[str, Any], ScriptedChatModel, list[Any]]:
    model = ScriptedChatModel.from_dict(copy.deepcopy(scenario))
    graph = build_aime_graph(
        model,
        config=AimeConfig(workspace=tmp_path),
        store=store,
        checkpointer=saver,
    )
    config = thread_config(thread, **({"user_id": user} if user else {}))
    events = []
    out: dict[str, Any] = {}
    for namespace_, mode, payload in graph.stream(
        {"goal": goal}, config, context=context, stream_mode=["custom", "values"], subgraphs=True
    ):
        if mode == "custom":
            events.append(payload)
        elif not namespace_:
            out = payload
    return out, model, events


def _items(store: Any, kind: str, scope: str = "default") -> dict[str, dict[str, Any]]:
    return {i.key: i.value for i in store.search(namespace(scope, kind), limit=100)}


def test_settled_tasks_and_the_run_are_recorded_with_a_lesson(tmp_path: Path) -> None:
    with open_store("memory") as store:
        out, model, _ = _run(store, tmp_path, "first")
        assert out["status"] == "succeeded"
        episodes = _items(store, EPISODES)
        # The failed first attempt had a retry left: only the settled attempt is recorded.
        assert set(episodes) == {"first:load:2", f"first:run:{_digest(GOAL)}"}
        task = Episode.model_validate(
            {k: v for k, v in episodes["first:load:2"].items() if k != "text"}
        )
        assert task.outcome == "completed" and task.tools_used == {"calculator": 1}
        assert task.summary == "total 200" and task.thread_id == "first"
        assert "comma delimiter gave 1 column" in task.lesson  # what went wrong
        assert "calculator" in task.lesson  # what worked
        run = episodes[f"first:run:{_digest(GOAL)}"]
        assert run["plan"] == ["Load the invoices export [completed]"]
        assert run["lesson"]  # a retry then success: the run has its lesson too
        assert set(_items(store, LESSONS)) == {"first:load:2", f"first:run:{_digest(GOAL)}"}
        # Two lesson calls, counted in the run's usage.
        assert len(model.prompts("lesson")) == 2
        assert out["usage"].by_role["memory"].llm_calls == 2


def test_a_second_run_sees_the_first_runs_experience(tmp_path: Path) -> None:
    with open_store("memory") as store:
        _run(store, tmp_path, "first")
        _, model, events = _run(store, tmp_path, "second")
    planner_prompt = model.prompts("planner")[0]
    assert "From memory, past runs on similar goals" in planner_prompt
    assert "Load the invoices export [completed]" in planner_prompt
    assert "comma delimiter gave 1 column" in planner_prompt  # the lesson
    actor_prompt = model.prompts("actor")[0]
    knowledge = actor_prompt.split("## Knowledge", 1)[1].split("## Environment", 1)[0]
    assert "[memory: past task 'Load the invoices export', completed" in knowledge
    assert "comma delimiter gave 1 column" in knowledge
    started = next(e for e in events if e.get("type") == "actor" and e["event"] == "started")
    assert any("Load the invoices export" in x for x in started["experience"])  # on the spec
    recalled = [e for e in events if e.get("type") == "memory" and e["event"] == "recalled"]
    assert recalled and recalled[0]["for"] == "planner"


def test_memory_is_bounded_in_count_and_characters(tmp_path: Path) -> None:
    with open_store("memory") as store:
        for n in range(4):
            _run(store, tmp_path, f"run{n}")
        model = ScriptedChatModel.from_dict(copy.deepcopy(RECOVERY))
        cfg = AimeConfig(workspace=tmp_path, memory_k=1, memory_chars=300)
        graph = build_aime_graph(model, config=cfg, store=store)
        graph.invoke({"goal": GOAL}, thread_config("bounded"))
    section = model.prompts("planner")[0].split("From memory", 1)[1].split("Write the plan", 1)[0]
    assert section.count("\n- ") == 1 and len(section) < 400


def test_users_never_see_each_others_memories(tmp_path: Path) -> None:
    with open_store("memory") as store:
        _run(store, tmp_path, "alice-1", user="alice")
        _, bob, _ = _run(store, tmp_path, "bob-1", context={"user_id": "bob"})
        _, alice, _ = _run(store, tmp_path, "alice-2", user="alice")
        assert set(_items(store, EPISODES, "bob")) == {"bob-1:load:2", f"bob-1:run:{_digest(GOAL)}"}
        assert not _items(store, EPISODES)  # nothing under "default"
    assert "From memory" not in bob.prompts("planner")[0]
    assert "[memory:" not in bob.prompts("actor")[0]
    alice_planner = alice.prompts("planner")[0]
    assert "From memory" in alice_planner and "bob" not in alice_planner


def test_memory_off_writes_and_reads_nothing(tmp_path: Path) -> None:
    with open_store("memory") as store:
        _run(store, tmp_path, "first")
        before = _items(store, EPISODES)
        _, model, _ = _run(store, tmp_path, "off", context={"memory": "off"})
        assert _items(store, EPISODES) == before
    assert "From memory" not in model.prompts("planner")[0]
    assert "[memory:" not in model.prompts("actor")[0]
    assert not model.prompts("lesson")


class Crash(BaseException):
    """Stands in for the process dying right after the store write."""


class CrashingStore(InMemoryStore):
    """Dies once, after writing the episode of the task named ``crash_on``."""

    def __init__(self, crash_on: str) -> None:
        super().__init__()
        self.crash_on, self.crashed = crash_on, threading.Event()

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        results = super().batch(ops)
        if not self.crashed.is_set() and any(
            f":{self.crash_on}:" in getattr(o, "key", "") for o in ops
        ):
            self.crashed.set()
            raise Crash(self.crash_on)
        return results


def test_a_crash_after_the_write_and_a_resume_leave_no_duplicate(tmp_path: Path) -> None:
    @tool
    def side_effect(task: str) -> str:
        """Record that a task did its work."""
        return f"{task} recorded"

    spec = [{"id": t, "title": f"Task {t}", "dependencies": d, "tool_bundles": ["custom"]}
            for t, d in (("t0", []), ("a", ["t0"]), ("b", ["t0"]))]  # fmt: skip
    scenario = {
        "planner": [{"rationale": "r", "tasks": spec}],
        "actors": {
            t: [
                {"tool": "side_effect", "args": {"task": t}},
                {"tool": "submit_result", "args": {"status": "completed", "summary": f"{t} ok"}},
            ]
            for t in ("t0", "a", "b")
        },
        "reporter": [{"text": "{all_results}"}],
    }
    store = CrashingStore(crash_on="a")
    url = f"sqlite:///{tmp_path / 'cp.db'}"

    def graph(saver: Any) -> Any:
        model = ScriptedChatModel.from_dict(copy.deepcopy(scenario))
        cfg = AimeConfig(workspace=tmp_path)
        return build_aime_graph(
            model, tools=[side_effect], config=cfg, checkpointer=saver, store=store
        )

    config = thread_config("crash")
    with open_checkpointer(url) as saver, pytest.raises(Crash):
        graph(saver).invoke({"goal": "three steps"}, config, durability="sync")
    assert "crash:a:1" in _items(store, EPISODES)  # written before the crash
    with open_checkpointer(url) as saver:  # as a new process would
        assert graph(saver).invoke(None, config)["status"] == "succeeded"
    keys = [i.key for i in store.search(namespace("default", EPISODES), limit=100)]
    assert sorted(keys) == sorted(
        ["crash:t0:1", "crash:a:1", "crash:b:1", f"crash:run:{_digest('three steps')}"]
    )


def _digest(goal: str) -> str:
    from aimegraph.memory.episodes import run_attempt

    return run_attempt(goal)


@pytest.mark.parametrize("opener", ["sync", "async"])
async def test_memory_under_ainvoke(tmp_path: Path, opener: str) -> None:
    """An async store is awaited; a sync one (SqliteStore) runs in a worker thread."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    async with AsyncExitStack() as stack:
        if opener == "async":
            store = await stack.enter_async_context(aopen_store(url))
        else:
            store = stack.enter_context(open_store(url))
        prompts = []
        for thread in ("a1", "a2"):
            model = ScriptedChatModel.from_dict(copy.deepcopy(RECOVERY))
            graph = build_aime_graph(model, config=AimeConfig(workspace=tmp_path), store=store)
            out = await graph.ainvoke({"goal": GOAL}, thread_config(thread))
            assert out["status"] == "succeeded"
            prompts.append(model.prompts("planner")[0])
        ns = namespace("default", EPISODES)
        found = await store.asearch(ns) if opener == "async" else store.search(ns)
        keys = {i.key for i in found}
    assert "From memory" not in prompts[0] and "From memory" in prompts[1]
    assert {"a1:load:2", "a2:load:2"} <= keys


def test_a_rejection_then_a_pass_leaves_a_run_lesson(tmp_path: Path) -> None:
    scenario = {
        "planner": [
            {"rationale": "draft", "tasks": [{"id": "t1", "title": "Draft the answer"}]},
            {"rationale": "fix", "tasks": [{"id": "t2", "title": "Add the missing total"}]},
        ],
        "verifier": [
            {"passed": False, "reasoning": "no total", "issues": ["the total is missing"]},
            {"passed": True, "reasoning": "complete", "issues": []},
        ],
        "reporter": [{"text": "{all_results}"}],
    }
    with open_store("memory") as store:
        out, model, _ = _run(store, tmp_path, "review", scenario=scenario)
        assert out["status"] == "succeeded" and out["replans"] == 1
        lessons = _items(store, LESSONS)
    assert list(lessons) == [f"review:run:{_digest(GOAL)}"]
    assert "revised 1 time" in model.prompts("lesson")[0]
    assert "Add the missing total [completed]" in model.prompts("lesson")[0]
