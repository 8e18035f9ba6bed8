"""Notes to running actors (issue 27 point 4): a human's note sent while actors run
reaches each of them at its next step, as a message in its loop, and the planner at
its next call; notes of an earlier run on the thread do not."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from tests.graph.test_human_actors import REJECTED_ONCE
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import make_serializer, thread_config
from aimegraph.models import ScriptedChatModel
from aimegraph.steering import send_note

THREAD = "notes"
CONFIG = thread_config(THREAD)
NOTE = "Use the EU mirror, not the US one."
HEARD = f"A note from the human, sent while you work (follow it where it applies):\n{NOTE}"


def build(
    scenario: dict[str, Any],
    workspace: Path,
    store: InMemoryStore,
    tools: list[Any] | None = None,
    **config: Any,
) -> tuple[Any, ScriptedChatModel]:
    """The aime graph over ``scenario`` with ``store`` (memory off: only notes use it)."""
    model = ScriptedChatModel.from_dict(scenario)
    graph = build_aime_graph(
        model,
        tools=tools,
        config=AimeConfig(workspace=workspace, memory="off", **config),
        checkpointer=InMemorySaver(serde=make_serializer()),
        store=store,
    )
    return graph, model


@pytest.mark.parametrize("scheduler", ["eager", "batch"])
def test_a_note_sent_while_actors_run_reaches_each_at_its_next_step(
    workspace: Path, scheduler: str
) -> None:
    store = InMemoryStore()
    # Both actors are in their tools step (each made its first model call) when the
    # human sends the note; then both go on.
    working, sent = threading.Event(), threading.Event()

    @tool
    def fetch(source: str) -> str:
        """Fetch a source. (The human sends a note while this runs.)"""
        assert working.wait(10)
        send_note(store, THREAD, NOTE)
        sent.set()
        return f"fetched {source}"

    @tool
    def crunch(data: str) -> str:
        """Crunch data. (Returns once the human's note is sent.)"""
        working.set()
        assert sent.wait(10)
        return f"crunched {data}"

    scenario = {
        "planner": [plan(spec("a", tool_bundles=["custom"]), spec("b", tool_bundles=["custom"]))],
        "actors": {
            "a": [call("fetch", source="us"), submit("a done")],
            "b": [call("crunch", data="x"), submit("b done")],
        },
    }
    graph, model = build(scenario, workspace, store, tools=[fetch, crunch], scheduler=scheduler)
    out = graph.invoke({"goal": "g"}, CONFIG)
    assert out["status"] == "succeeded"
    for task in ("a", "b"):
        first, second = [p for p in model.prompts("actor") if f'<task id="{task}"' in p]
        assert NOTE not in first  # sent after the actor's first step
        # Its next step has it once, as a message after the tool's observation.
        assert second.count(HEARD) == 1
        assert second.index(f"{'fetched us' if task == 'a' else 'crunched x'}") < second.index(
            HEARD
        )


def test_the_planner_reads_the_notes_at_its_next_call(workspace: Path) -> None:
    store = InMemoryStore()
    graph, model = build(REJECTED_ONCE, workspace, store)
    graph.invoke({"goal": "g"}, CONFIG, interrupt_before=["orchestrator"])
    send_note(store, THREAD, NOTE)
    assert graph.invoke(None, CONFIG)["status"] == "succeeded"
    first, second = model.prompts("planner")
    assert NOTE not in first and NOTE in second


def test_notes_of_an_earlier_run_stay_with_it(workspace: Path) -> None:
    store = InMemoryStore()
    scenario = {"planner": [plan(spec("a"))], "actors": {"a": [call("list_dir"), submit("ok")]}}
    graph, model = build(scenario, workspace, store)
    send_note(store, THREAD, "an old note")
    graph.invoke({"goal": "first"}, CONFIG)
    model.reset()
    graph.invoke({"goal": "second"}, CONFIG)
    assert not any("an old note" in p for p in model.prompts())


def test_a_note_needs_a_store_and_some_text() -> None:
    with pytest.raises(ValueError, match="store="):
        send_note(None, THREAD, NOTE)
    with pytest.raises(ValueError, match="needs some text"):
        send_note(InMemoryStore(), THREAD, "  ")


def test_a_note_sent_while_an_actor_waits_for_a_human_reaches_it_on_resume(
    workspace: Path,
) -> None:
    # Sent to the inbox, a note never needs update_state, which would drop the waiting
    # actor (see test_human_actors.py): the actor resumes and reads it at its next step.
    store = InMemoryStore()
    scenario = {
        "planner": [plan(spec("a", tool_bundles=["human"]))],
        "actors": {"a": [call("ask_human", question="Which mirror?"), submit("a ok")]},
    }
    graph, model = build(scenario, workspace, store)
    graph.invoke({"goal": "g"}, CONFIG)
    send_note(store, THREAD, NOTE)
    assert graph.get_state(CONFIG).interrupts  # still waiting
    out = graph.invoke(Command(resume="EU"), CONFIG)
    assert out["status"] == "succeeded"
    assert HEARD in model.prompts("actor")[-1]
