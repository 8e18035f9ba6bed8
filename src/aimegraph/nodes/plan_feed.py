"""Tasks of a plan taken while the planner's reply still streams in
(``AimeConfig.stream_plans``; architecture: A run, step by step).

The streaming planner node (:mod:`aimegraph.nodes.streamed_plan`) puts a
:class:`PlanFeed` in :data:`PLAN_FEED` before it calls the planner subgraph; the
planner's draft node then streams its model call, and after each chunk a reader
parses the reply so far with LangChain's ``parse_partial_json``. A task is handed to
the feed once its spec is complete (the next task has begun) and the plan up to it
passes the planner's own checks (:func:`aimegraph.state.apply_plan`): its id is
new, each dependency names a task that came before it in this reply (or an earlier
plan's), and a tool step's tool exists and takes its arguments. A task that fails
them is held back: the whole reply's checks decide about it when the reply ends, as
without streaming. The last task of a reply starts with the accepted plan.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
from collections.abc import Callable, Container, Mapping
from contextvars import ContextVar
from typing import Any

from langchain_core.utils.json import parse_partial_json
from pydantic import ValidationError

from aimegraph.models.partial import PartialReader
from aimegraph.state import PlanChecks, PlanError, PlanUpdate, Task, TaskSpec

PLAN_FEED: ContextVar[PlanFeed | None] = ContextVar("aimegraph_plan_feed", default=None)
"""The feed of the streaming planner node running this planner, if any. A context
variable because the planner subgraph runs as a call inside that node: LangGraph
runs each node and ``@task`` in a copy of its caller's context."""


class PlanFeed:
    """The tasks accepted from the planner's streamed replies, in the order they came
    (every reply of the node's run: re-asks and repairs stream too). Thread-safe: the
    planner writes from its node's thread, the runner reads from its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: list[Task] = []
        self._news: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.calls = 0
        """The planner's streamed model calls so far (each reads through a reader)."""

    def put(self, task: Task) -> None:
        with self._lock:
            self._tasks.append(task)
            if not self._news.done():
                self._news.set_result(None)

    def new(self, known: Container[str]) -> list[Task]:
        """The accepted tasks whose ids are not ``known``, the first of each id."""
        with self._lock:
            tasks = list(self._tasks)
        fresh: dict[str, Task] = {}
        for task in tasks:
            if task.id not in known:
                fresh.setdefault(task.id, task)
        return list(fresh.values())

    def news(self, known: Container[str]) -> concurrent.futures.Future[None]:
        """A future done once there are tasks not ``known`` (at once if there are)."""
        with self._lock:
            if any(t.id not in known for t in self._tasks):
                if not self._news.done():
                    self._news.set_result(None)
            elif self._news.done():
                self._news = concurrent.futures.Future()
            return self._news

    def reader(
        self, tasks: Mapping[str, Task], checks: PlanChecks, max_tasks: int
    ) -> Callable[[], PartialReader]:
        """A new reader for each streamed reply: it puts the tasks of the reply that
        pass ``checks`` against the progress list ``tasks`` here, as they complete."""

        def start() -> PartialReader:
            with self._lock:
                self.calls += 1
            return _ReplyReader(self, tasks, checks, max_tasks)

        return start


class _ReplyReader:
    """Reads one streamed reply: see the module docstring."""

    def __init__(
        self, feed: PlanFeed, tasks: Mapping[str, Task], checks: PlanChecks, max_tasks: int
    ) -> None:
        self.feed, self.tasks, self.checks, self.max_tasks = feed, tasks, checks, max_tasks
        self.accepted: list[TaskSpec] = []
        self.offered = 0  # the specs of the reply read so far, accepted or not
        self.length = 0

    def __call__(self, text: str, complete: bool) -> None:
        # A spec is complete once the next one opens: no need to parse before a brace.
        # The last spec starts with the accepted plan, a moment after the reply ends (so
        # a one-task plan runs as without streaming, its budget share that of the plan).
        opened = "{" in text[self.length :]
        self.length = len(text)
        if not opened:
            return
        specs = _tasks_in(text)
        for raw in specs[:-1][self.offered :]:
            self.offered += 1
            self._offer(raw)

    def _offer(self, raw: Any) -> None:
        try:
            spec = TaskSpec.model_validate(raw)
            plan = PlanUpdate(tasks=[*self.accepted, spec])
            changed = self.checks.apply(self.tasks, plan, max_tasks=self.max_tasks)
        except (ValidationError, PlanError):
            return  # held back: the whole reply's checks say what is wrong with it
        self.accepted.append(spec)
        if (task := changed.get(spec.id.strip())) is not None:  # None: restates a done task
            self.feed.put(task)


def _tasks_in(text: str) -> list[Any]:
    """The task specs of a plan's JSON so far, the last one possibly cut short."""
    try:
        parsed = parse_partial_json(text) if text else None
    except json.JSONDecodeError:
        return []
    specs = parsed.get("tasks") if isinstance(parsed, dict) else None
    return specs if isinstance(specs, list) else []
