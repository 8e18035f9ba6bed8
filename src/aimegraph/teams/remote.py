"""Agent units backed by a ``RemoteGraph`` (a graph on a LangGraph Server).

The unit's work is one run on a remote thread whose id is derived from the run's
thread, the task, its attempt and the member's turn: a resumed run (after a crash
or a SIGKILL) finds the same remote thread, joins the run still going there or
reads the one that finished, and never starts the work twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict
from langgraph.pregel.remote import RemoteGraph

from aimegraph.state import ActorState

_UNFINISHED = ("pending", "running")


def attempt_key(run_config: Mapping[str, Any], state: ActorState) -> str:
    """This attempt of the task (this member's turn) as a UUID, to name its remote
    thread or A2A context: the same on every resume of the run; a fresh one without
    a run thread to key it."""
    run_thread = (run_config.get("configurable") or {}).get("thread_id")
    if run_thread is None:
        return str(uuid.uuid4())
    task = state["task"]
    key = f"{run_thread}/{task.id}/{task.attempts}/{state.get('member', '')}/{state.get('turn', 1)}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"aimegraph:remote-unit:{key}"))


def run_remote(graph: RemoteGraph, thread_id: str, message: BaseMessage) -> list[BaseMessage]:
    """The messages of the remote thread once its run has finished: the run started
    with ``message`` when the thread has none yet, else the one it has, joined.

    Raises:
        RuntimeError: the remote run ended without success.
    """
    client = graph._validate_sync_client()
    client.threads.create(thread_id=thread_id, if_exists="do_nothing")
    runs = client.runs.list(thread_id, limit=1)
    if runs:
        run = runs[0]
    else:
        # "reject": should another resume race this one, the thread keeps one run.
        task_input: dict[str, Any] = {"messages": [{"role": "user", "content": message.text}]}
        run = client.runs.create(
            thread_id, graph.assistant_id, input=task_input, multitask_strategy="reject"
        )
    if run["status"] in _UNFINISHED:
        client.runs.join(thread_id, run["run_id"])
        run = client.runs.get(thread_id, run["run_id"])
    if run["status"] != "success":
        raise RuntimeError(f"the remote run {run['run_id']} ended {run['status']}")
    values = client.threads.get_state(thread_id)["values"]
    raw = values.get("messages", []) if isinstance(values, dict) else []
    return messages_from_dict([{"type": m["type"], "data": m} for m in raw])
