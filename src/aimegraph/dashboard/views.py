"""What the pages show, read from the checkpoints alone (so a run started by any
process shows the same), as JSON-ready dicts.

Nothing here renders HTML: the browser puts every string in the page as text.
Run settings are shown as the model spec and the ``AimeConfig`` fields, which
hold no secrets; the process environment and connection URLs are never read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Generator, Iterable, Mapping, Sequence
from contextlib import closing
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.types import Interrupt

from aimegraph.checkpoints import (
    RunSettings,
    ThreadSummary,
    interrupt_fields,
    live_threads,
    thread_config,
)
from aimegraph.checkpoints.delta import checkpoint_values
from aimegraph.checkpoints.runs import phase
from aimegraph.dashboard.feed import CheckpointFeed, Head
from aimegraph.models.response_format import answer_as_json
from aimegraph.state import (
    ProgressUpdate,
    Task,
    Usage,
    Verdict,
    render_checklist,
    run_timeline,
)

INTERRUPT_CHANNEL = "__interrupt__"
CALL_KINDS = {"update_progress": "progress", "submit_result": "result"}
"""Transcript entry kinds of the tool calls that report, rather than act."""


def _root(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    extra = {"checkpoint_id": checkpoint_id} if checkpoint_id else {}
    return thread_config(thread_id, checkpoint_ns="", **extra)


def pending_interrupts(item: CheckpointTuple) -> list[Interrupt]:
    """The interrupts a checkpoint waits on (saved as its pending writes), each
    once: an interrupt raised in a graph that a node calls is written by that
    node's task too."""
    found: dict[str, Interrupt] = {}
    for _task, channel, value in item.pending_writes or []:
        if channel == INTERRUPT_CHANNEL:
            for interrupt in value if isinstance(value, Sequence) else [value]:
                found.setdefault(interrupt.id, interrupt)
    return list(found.values())


def usage_dict(usage: Usage | None) -> dict[str, Any]:
    return (usage or Usage()).model_dump(mode="json")


class ThreadReader:
    """Thread rows and run views, recomputed only when the feed says they changed."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self.feed = CheckpointFeed(saver)
        self._rows: dict[str, tuple[Head, dict[str, Any]]] = {}
        self._histories: dict[str, _History] = {}
        self._lock = threading.Lock()

    # -- threads page

    def threads(
        self, status: str | None = None, active: Sequence[ThreadSummary] = ()
    ) -> list[dict[str, Any]]:
        """One row per thread, newest first; ``status`` filters. ``active`` are the
        runs a queue holds (distributed runs queued or on a worker): their queue
        state replaces the checkpointed status, and those with no checkpoint yet
        get a row of their own (as ``aimegraph threads`` lists them)."""
        heads = self.feed.heads()
        rows = [row for thread_id, head in heads.items() if (row := self.row(thread_id, head))]
        holders = self.holders([row["thread_id"] for row in rows if row["status"] == "running"])
        rows = [_shown(row, row["thread_id"] in holders) for row in rows]
        if active:
            rows = _with_queue_states(rows, active)
        rows = [row for row in rows if status in (None, "", row["status"])]
        rows.sort(key=lambda r: r["updated"], reverse=True)
        return rows

    def row(self, thread_id: str, head: Head) -> dict[str, Any] | None:
        """The thread's row as of its checkpoint ``head`` (read once per head), with
        its status as checkpointed (``running`` whether or not a process holds it);
        None when that checkpoint is gone."""
        with self._lock:
            cached = self._rows.get(thread_id)
        if cached is not None and cached[0] == head:
            return cached[1]
        row = self._row(thread_id, head)
        if row is not None:
            with self._lock:
                self._rows[thread_id] = (head, row)
        return row

    def _row(self, thread_id: str, head: Head) -> dict[str, Any] | None:
        item = self.saver.get_tuple(_root(thread_id, head.checkpoint_id))
        if item is None:
            return None
        values = item.checkpoint.get("channel_values", {})
        settings = _settings(item)
        return {
            "thread_id": thread_id,
            "status": "paused" if pending_interrupts(item) else values.get("status", "running"),
            "goal": str(values.get("goal", "")),
            "updated": str(item.checkpoint["ts"]),
            "model": settings.model if settings else None,
            "usage": usage_dict(values.get("usage")),
        }

    def holders(self, thread_ids: list[str]) -> dict[str, str]:
        """Who runs each of these threads now, for those a live process runs."""
        return live_threads(self.saver, thread_ids)

    # -- run page

    def version(self, thread_id: str) -> str | None:
        return self.feed.version(thread_id)

    def run(self, thread_id: str, version: str | None = None) -> dict[str, Any] | None:
        """Everything the run page shows, or None for an unknown thread."""
        version = version or self.version(thread_id)
        if version is None:
            return None
        with self._lock:
            history = self._histories.setdefault(thread_id, _History())
        with history.lock:  # two pages on one thread: one reads, the other reuses
            if history.view is not None and history.view["version"] == version:
                return history.view
            view = self._run(thread_id, version, history)
            history.view = view
            return view

    def _run(self, thread_id: str, version: str, history: _History) -> dict[str, Any] | None:
        newest = self.feed.namespaces(thread_id)
        head = self.saver.get_tuple(_root(thread_id, newest.get("")))
        if head is None:
            return None
        self._read_new_checkpoints(thread_id, history)
        for ns, checkpoint_id in newest.items():
            if _is_actor(ns) and history.actors.get(ns, ("",))[0] != checkpoint_id:
                item = self.saver.get_tuple(thread_config(thread_id, checkpoint_ns=ns))
                if item is not None:  # None: a namespace with no actor (read once)
                    history.actors[ns] = (_cid(item), _actor(item))
        values: Mapping[str, Any] = checkpoint_values(self.saver, head)
        tasks: dict[str, Task] = values.get("tasks") or {}
        verdict: Verdict | None = values.get("verdict")
        interrupts = pending_interrupts(head)
        actors = _by_task((cid, a) for cid, a in history.actors.values() if a is not None)
        settings = history.settings
        return {
            "thread_id": thread_id,
            "version": version,
            "status": "paused" if interrupts else values.get("status", "running"),
            "reason": values.get("reason"),
            "goal": str(values.get("goal", "")),
            "updated": str(head.checkpoint["ts"]),
            "final_answer": values.get("final_answer"),
            "structured_response": _jsonable(answer_as_json(values.get("structured_response"))),
            "facts": dict(values.get("facts") or {}),
            "prompt_version": values.get("prompt_version"),
            "checklist": render_checklist(tasks, cancelled=values.get("status") == "cancelled"),
            "tasks": [_task(t) for t in tasks.values()],
            "actors": actors,
            "updates": [_update(u) for u in values.get("updates") or []],
            "plans": list(history.plans),
            "verdict": verdict.model_dump(mode="json") if verdict is not None else None,
            "usage": usage_dict(values.get("usage")),
            "timeline": run_timeline(values).as_dict(),
            "interrupts": [
                {"id": i.id, **_jsonable(interrupt_fields(i.value))} for i in interrupts
            ],
            "settings": (
                {
                    "model": settings.model,
                    "config": settings.config.model_dump(mode="json"),
                    "response_format": settings.response_format,
                }
                if settings
                else None
            ),
        }

    def _read_new_checkpoints(self, thread_id: str, history: _History) -> None:
        """Fold the run's top-level checkpoints not seen yet into its plan history
        (listed newest first; the listing stops at the last one already folded)."""
        fresh: list[CheckpointTuple] = []
        newest_first = cast(Generator[CheckpointTuple], self.saver.list(_root(thread_id)))
        with closing(newest_first) as listing:  # closing lets go of the saver's lock
            for item in listing:
                if history.last is not None and _cid(item) <= history.last:
                    break
                fresh.append(item)
        for item in reversed(fresh):
            history.fold(item)

    def tasks(self, thread_id: str) -> dict[str, Task] | None:
        item = self.saver.get_tuple(_root(thread_id))
        if item is None:
            return None
        tasks: dict[str, Task] = checkpoint_values(self.saver, item).get("tasks") or {}
        return tasks


def _shown(row: dict[str, Any], live: bool) -> dict[str, Any]:
    """A row whose run has not ended, as ``running`` (a live process holds it) or
    ``stopped`` (resumable)."""
    if row["status"] != "running":
        return row
    return {**row, "status": phase(row["status"], live=live)}


def _with_queue_states(
    rows: list[dict[str, Any]], active: Sequence[ThreadSummary]
) -> list[dict[str, Any]]:
    by_id = {row["thread_id"]: row for row in rows}
    for run in active:
        row = by_id.get(run.thread_id)
        by_id[run.thread_id] = (
            {**row, "status": run.status}
            if row is not None
            else {
                "thread_id": run.thread_id,
                "status": run.status,
                "goal": run.goal,
                "updated": run.updated,
                "model": None,
                "usage": usage_dict(None),
            }
        )
    return list(by_id.values())


class _History:
    """What one thread's page has read so far: the plans (first, then each replan
    with the reason it was asked for), the run settings, each actor's newest
    state, and the last view."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: str | None = None
        self.plans: list[dict[str, Any]] = []
        self.settings: RunSettings | None = None
        self.actors: dict[str, tuple[str, dict[str, Any] | None]] = {}
        self.view: dict[str, Any] | None = None
        self._asked: str | None = None
        self._rationale: str | None = None

    def fold(self, item: CheckpointTuple) -> None:
        """Take in the next top-level checkpoint, oldest first. ``replan_reason`` is
        set before the planner runs again and cleared when it commits a plan."""
        self.last = _cid(item)
        self.settings = _settings(item) or self.settings
        values = item.checkpoint.get("channel_values", {})
        if reason := values.get("replan_reason"):
            self._asked = reason
        rationale = values.get("plan_rationale")
        committed = self._asked is not None and not reason
        if rationale is not None and (rationale != self._rationale or committed):
            self.plans.append(
                {
                    "number": len(self.plans) + 1,
                    "reason": self._asked if self.plans else None,
                    "rationale": rationale,
                    "at": str(item.checkpoint["ts"]),
                }
            )
            self._rationale, self._asked = rationale, None


def _settings(item: CheckpointTuple) -> RunSettings | None:
    """The checkpoint's run settings; None when it has none, or none this version
    reads (a field it does not know): the pages show the run all the same."""
    try:
        return RunSettings.from_metadata(item.metadata)
    except ValueError:
        return None


def _task(task: Task) -> dict[str, Any]:
    return task.model_dump(mode="json")


def _update(update: ProgressUpdate) -> dict[str, Any]:
    return update.model_dump(mode="json")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _is_actor(namespace: str) -> bool:
    """A namespace under the executor: the actor subgraph itself, or one nested in
    it (the actor graph called by the eager scheduler's executor node, a team's
    member turns); or an actor the streaming planner node started (``planner:<id>|
    actor:<id>``). Which of them hold an actor is told by their state."""
    return namespace.startswith("executor:") or (
        namespace.startswith("planner:") and "|actor:" in namespace
    )


def _by_task(found: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Each task's actors, oldest first. A task attempt seen at two depths (an
    executor graph and the actor graph inside it) is shown once, from the state
    with the longest transcript; members of a team (other prompts) each once."""
    best: dict[tuple[str, int, str], tuple[str, dict[str, Any]]] = {}
    for cid, actor in found:
        key = (actor["task_id"], actor["attempt"], actor["system_prompt"])
        if key not in best or len(actor["transcript"]) > len(best[key][1]["transcript"]):
            best[key] = (cid, actor)
    spoken = {(t, a) for (t, a, prompt) in best if prompt}
    actors: dict[str, list[dict[str, Any]]] = {}
    for (task_id, attempt, prompt), (_, actor) in sorted(best.items(), key=lambda kv: kv[1][0]):
        if not prompt and not actor["transcript"] and (task_id, attempt) in spoken:
            continue  # an outer graph's state that only carries the task
        actors.setdefault(task_id, []).append(actor)
    return actors


def _actor(item: CheckpointTuple) -> dict[str, Any] | None:
    """One actor (a task attempt) from its newest checkpoint: the spec it was given
    and its transcript so far."""
    values = item.checkpoint.get("channel_values", {})
    task: Task | None = values.get("task")
    if task is None:
        return None
    messages: list[AnyMessage] = values.get("messages") or []
    return {
        "task_id": task.id,
        "attempt": max(task.attempts, 1),
        "persona": task.persona,
        "bundles": list(task.tool_bundles),
        "tools": list(values.get("tool_names") or []),
        "system_prompt": next((m.text for m in messages if isinstance(m, SystemMessage)), ""),
        "transcript": transcript(messages),
        "steps": values.get("steps", 0),
        "error": values.get("error"),
    }


def _cid(item: CheckpointTuple) -> str:
    return str(item.config["configurable"]["checkpoint_id"])


def transcript(messages: Sequence[AnyMessage]) -> list[dict[str, Any]]:
    """An actor's conversation as entries: the task handed over, each tool call
    (progress updates and the submitted result marked as such), each observation,
    and plain replies."""
    entries: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, HumanMessage):
            entries.append({"kind": "prompt", "text": message.text})
        elif isinstance(message, AIMessage):
            if message.text.strip():
                entries.append({"kind": "reply", "text": message.text})
            for call in message.tool_calls:
                kind = CALL_KINDS.get(call["name"], "call")
                entries.append({"kind": kind, "tool": call["name"], "args": call["args"]})
        elif isinstance(message, ToolMessage):
            entries.append(
                {
                    "kind": "observation",
                    "tool": message.name,
                    "status": message.status,
                    "text": message.text,
                }
            )
    return _jsonable(entries)  # type: ignore[no-any-return]
