"""Scheduling and checkpoint layout of the aime graph (DESIGN.md section 10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from tests.conftest import GraphFactory

from aimegraph.checkpoints.delta import checkpoint_values


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
    graph, _ = scripted_graph(independent_plan(12), checkpointer=saver, max_parallel=3)
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
    saver = InMemorySaver()
    graph, _ = scripted_graph(
        independent_plan(60), checkpointer=saver, max_parallel=1, max_tasks=60, max_steps=1000
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
