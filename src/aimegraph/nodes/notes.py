"""Human notes to a run while it runs, through the LangGraph store.

A run's state cannot change under its running actors, and ``update_state`` between
steps would replace their pending work; so a note goes to the thread's inbox in the
run's store (namespace ``("aimegraph", "notes", <thread_id>)``), which every process
running or watching the thread shares (the CLI and the dashboard open the same
store beside the checkpoints). Each actor reads the inbox before each model call and
gets the notes it has not seen as a message in its loop; the planner reads them at
its next call. Only notes sent since the current run started count.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.config import get_config
from langgraph.store.base import BaseStore

from aimegraph.prompts import actor as prompts

NOTE_ID_PREFIX = "note:"
"""The id of the message that brought a note into an actor's loop: ``note:<key>``."""


@dataclass(frozen=True)
class Note:
    key: str
    text: str
    at: float


def inbox(thread_id: str) -> tuple[str, ...]:
    """The store namespace of a thread's notes."""
    return ("aimegraph", "notes", thread_id)


def post_note(store: BaseStore, thread_id: str, text: str) -> Note:
    """Send ``text`` to the thread's running actors (and its planner).

    Raises:
        ValueError: an empty note.
    """
    if not text.strip():
        raise ValueError("a note needs some text")
    # Keys sort by time, so that notes are read in the order they were sent.
    note = Note(
        key=f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}", text=text.strip(), at=time.time()
    )
    store.put(inbox(thread_id), note.key, {"text": note.text, "at": note.at}, index=False)
    return note


def notes_since(store: BaseStore, thread_id: str, since: float | None) -> list[Note]:
    """The thread's notes sent at or after ``since`` (all without it), oldest first."""
    items = store.search(inbox(thread_id), limit=1000)
    notes = [
        Note(key=item.key, text=str(item.value.get("text", "")), at=float(item.value.get("at", 0)))
        for item in items
    ]
    return sorted((n for n in notes if since is None or n.at >= since), key=lambda n: n.key)


def unseen_notes(state: Mapping[str, Any], store: BaseStore) -> list[HumanMessage]:
    """The current run's notes an actor has not had yet, as messages for its loop
    (none outside a thread). Called from a node (reads the run's config)."""
    thread_id = get_config().get("configurable", {}).get("thread_id")
    if thread_id is None:
        return []
    seen = {m.id for m in state.get("messages") or () if isinstance(m, HumanMessage)}
    return [
        HumanMessage(prompts.HUMAN_NOTE.format(note=n.text), id=f"{NOTE_ID_PREFIX}{n.key}")
        for n in notes_since(store, str(thread_id), state.get("run_started_at"))
        if f"{NOTE_ID_PREFIX}{n.key}" not in seen
    ]


def run_notes(state: Mapping[str, Any], store: BaseStore) -> list[str]:
    """The notes for the planner: the state's ``notes`` and the current run's notes
    from the inbox, each once. Called from a node (reads the run's config)."""
    given = list(state.get("notes") or [])
    thread_id = get_config().get("configurable", {}).get("thread_id")
    if thread_id is None:
        return given
    sent = [n.text for n in notes_since(store, str(thread_id), state.get("run_started_at"))]
    return given + [text for text in sent if text not in given]
