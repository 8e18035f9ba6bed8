"""Working memory: facts written with remember, read with recall, shown to later actors
and the planner, checkpointed, and carried across a pause and a process restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.types import Command

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import open_checkpointer
from aimegraph.models import ScriptedChatModel

CONFIG: Any = {"configurable": {"thread_id": "facts"}}

WHITEBOARD: dict[str, Any] = {
    "goal": "Find the delimiter, then parse with it.",
    "any_goal": True,  # a test asks it again as "Do it again."
    "planner": [
        {
            "rationale": "detect, then use",
            "tasks": [
                {"id": "t1", "title": "Detect the delimiter", "tool_bundles": ["memory"]},
                {
                    "id": "t2",
                    "title": "Parse the file",
                    "dependencies": ["t1"],
                    "tool_bundles": ["memory", "compute"],
                },
            ],
        },
        {"rationale": "nothing to change", "tasks": []},
    ],
    "actors": {
        "t1": [
            {"tool": "remember", "args": {"key": "csv_delimiter", "value": "semicolon (;)"}},
            {"tool": "submit_result", "args": {"status": "completed", "summary": "found it"}},
        ],
        "t2": [
            {"tool": "calculator", "args": {"expression": "1+1"}},
            {"tool": "recall", "args": {"key": "csv_delimiter"}},
            {"tool": "recall", "args": {"key": "encoding"}},
            {
                "tool": "submit_result",
                "args": {"status": "completed", "summary": "{last_tool_output}"},
            },
        ],
    },
}


def _graph(model: ScriptedChatModel, workspace: Path, saver: Any, **config: Any) -> Any:
    cfg = AimeConfig(workspace=workspace, replan="every_step", **config)
    return build_aime_graph(model, config=cfg, checkpointer=saver)


def test_facts_reach_later_actors_and_the_planner(workspace: Path) -> None:
    model = ScriptedChatModel.from_dict(WHITEBOARD)
    with open_checkpointer("memory") as saver:
        out = _graph(model, workspace, saver).invoke({"goal": WHITEBOARD["goal"]}, CONFIG)
    assert out["status"] == "succeeded"
    assert out["facts"] == {"csv_delimiter": "semicolon (;)"}
    t2_prompt = next(p for p in model.prompts("actor") if '<task id="t2"' in p)
    assert "- csv_delimiter: semicolon (;)" in t2_prompt  # in the environment
    # The second planner call (after t1's batch) sees the whiteboard.
    assert "csv_delimiter: semicolon (;)" in model.prompts("planner")[1]
    assert "csv_delimiter" not in model.prompts("planner")[0]
    # An unknown key names the known ones; the last observation of t2 is that answer.
    assert "Known keys: csv_delimiter" in out["tasks"]["t2"].result.summary


def test_facts_survive_a_pause_and_a_new_process(workspace: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    with open_checkpointer(url) as saver:
        model = ScriptedChatModel.from_dict(WHITEBOARD)
        graph = _graph(model, workspace, saver, approve_tools=("calculator",))
        graph.invoke({"goal": WHITEBOARD["goal"]}, CONFIG)
        assert graph.get_state(CONFIG).interrupts  # t2 waits for its calculator approval
    with open_checkpointer(url) as reopened:  # as another process would
        model = ScriptedChatModel.from_dict(WHITEBOARD)
        graph = _graph(model, workspace, reopened, approve_tools=("calculator",))
        assert graph.get_state(CONFIG).values["facts"] == {"csv_delimiter": "semicolon (;)"}
        out = graph.invoke(Command(resume={"action": "approve"}), CONFIG)
    assert out["status"] == "succeeded"
    # recall ran after the resume, in the new process, and found the fact.
    assert "Known keys: csv_delimiter" in out["tasks"]["t2"].result.summary


def test_a_new_run_on_the_same_thread_starts_with_a_clean_whiteboard(workspace: Path) -> None:
    from langchain_core.messages import HumanMessage

    model = ScriptedChatModel.from_dict(WHITEBOARD)
    with open_checkpointer("memory") as saver:
        graph = _graph(model, workspace, saver)
        first = graph.invoke({"messages": [HumanMessage(WHITEBOARD["goal"])]}, CONFIG)
        assert first["facts"] == {"csv_delimiter": "semicolon (;)"}
        model.reset()
        second = graph.invoke({"messages": [HumanMessage("Do it again.")]}, CONFIG)
    assert second["status"] == "succeeded"
    # The second run wrote the fact again itself; its first planner call saw no whiteboard
    # (only the first turn's reply, in its view of the conversation).
    prompt = model.prompts("planner")[0]
    assert "Facts recorded on the whiteboard" not in prompt and "semicolon" not in prompt
