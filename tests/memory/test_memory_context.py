"""The context budget: a long tool output is folded into a summary that keeps its
figures, a later step still uses one, and the full output stays in the state."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import open_checkpointer, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.nodes.context import fit_context

FILLER = "Row of the quarterly ledger with nothing notable in it.\n" * 90
REPORT = f"{FILLER}q3_total=48213 EUR, source data/q3_ledger.csv\n{FILLER}"


@tool
def ledger() -> str:
    """Dump the quarterly ledger."""
    return REPORT


@tool
def note(text: str) -> str:
    """Make a note."""
    return f"noted: {text}"


class FigureReader(ScriptedChatModel):
    """A scripted actor whose final step reports the q3 total it can still see."""

    def _next_step(self, messages: list[BaseMessage]) -> dict[str, Any]:
        step = super()._next_step(messages)
        if step.get("args", {}).get("summary") == "REPORT_THE_TOTAL":
            seen = re.search(r"q3_total=(\d+)", "\n".join(m.text for m in messages))
            summary = f"q3 total is {seen.group(1)}" if seen else "the total is lost"
            return {"tool": "submit_result", "args": {"status": "completed", "summary": summary}}
        return step


SCENARIO: dict[str, Any] = {
    "planner": [
        {
            "rationale": "r",
            "tasks": [{"id": "t1", "title": "Total the ledger", "tool_bundles": ["custom"]}],
        }
    ],
    "actors": {
        "t1": [
            {"tool": "ledger", "args": {}},
            {"tool": "note", "args": {"text": "ledger read"}},
            {"tool": "note", "args": {"text": "checking"}},
            {
                "tool": "submit_result",
                "args": {"status": "completed", "summary": "REPORT_THE_TOTAL"},
            },
        ]
    },
    "reporter": [{"text": "{all_results}"}],
}


def _run(tmp_path: Path, **config: Any) -> tuple[dict[str, Any], FigureReader, Any]:
    model = FigureReader.from_dict(SCENARIO)
    cfg = AimeConfig(workspace=tmp_path, max_observation_chars=20_000, **config)
    with open_checkpointer("memory") as saver:
        graph = build_aime_graph(model, tools=[ledger, note], config=cfg, checkpointer=saver)
        out = graph.invoke({"goal": "Total the ledger."}, thread_config("ctx"))
        history = list(graph.get_state_history(thread_config("ctx"), filter=None))
    return out, model, history


def test_a_summarised_observation_still_gives_its_figure(tmp_path: Path) -> None:
    out, model, _ = _run(tmp_path, max_context_tokens=1_000)
    assert out["tasks"]["t1"].result.summary == "q3 total is 48213"
    summaries = model.prompts("summary")
    assert len(summaries) == 1 and "q3_total=48213" in summaries[0]
    last_actor_prompt = model.prompts("actor")[-1]
    assert FILLER not in last_actor_prompt  # the long output itself was not sent again
    assert "Summary of your first 1 steps" in last_actor_prompt
    assert "data/q3_ledger.csv" in last_actor_prompt  # names and paths kept
    assert out["usage"].by_role["memory"].llm_calls == 1


def test_without_a_budget_nothing_is_summarised(tmp_path: Path) -> None:
    out, model, _ = _run(tmp_path)
    assert out["tasks"]["t1"].result.summary == "q3 total is 48213"
    assert not model.prompts("summary")
    assert FILLER in model.prompts("actor")[-1]


def test_fit_context_keeps_every_message_in_the_state() -> None:
    """The view is cut, the conversation is not: the checkpoint keeps the full output."""
    model = FigureReader.from_dict(SCENARIO)
    conversation = [
        SystemMessage("# Role: actor\nYou work."),
        HumanMessage('<task id="t1" attempt="1">\nTitle: Total\n</task>'),
        *_turn("ledger", REPORT, "c1"),
        *_turn("note", "noted: ok", "c2"),
    ]
    steps = fit_context(model, conversation, max_tokens=600)
    call = next(steps)
    try:
        steps.send(model.invoke(call[1]))
    except StopIteration as done:
        view = done.value
    assert view.update["summarised"] == 2  # the ledger call and its output
    assert all(REPORT not in m.text for m in view.messages)
    assert "q3_total=48213" in view.messages[2].text
    assert conversation[3].text == REPORT  # untouched


def _turn(name: str, output: str, call_id: str) -> list[BaseMessage]:
    from langchain_core.messages import AIMessage

    return [
        AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id, "type": "tool_call"}]),
        ToolMessage(output, tool_call_id=call_id, name=name),
    ]
