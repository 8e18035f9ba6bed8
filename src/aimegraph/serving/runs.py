"""The runs the A2A and MCP servers start, follow, answer and cancel.

Both servers steer runs through the dashboard's :class:`RunManager`, so through
:mod:`aimegraph.steering` under each thread's lease, as every other entry point
does: a run started over A2A can be answered from the CLI or the dashboard, and
one thread is never run twice at once. This module adds what a remote caller
needs on top: a run's state as plain data (:class:`RunView`) and an async
follower that reports the progress list as it changes and returns once the run
pauses for a human or ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from pydantic_core import to_jsonable_python

from aimegraph.answers import AnswerError, NoSuchInterruptError
from aimegraph.checkpoints import ThreadNotFoundError, has_ended, interrupt_fields, run_config
from aimegraph.config import AimeConfig, unknown_setting
from aimegraph.dashboard.runs import NothingToResumeError, RunConflictError, RunManager
from aimegraph.state import Task
from aimegraph.state.progress import render_checklist
from aimegraph.steering import DEMO_SCENARIO, AimeGraph, prepare_demo, reader_graph

__all__ = ["CALLER_ERRORS", "PAUSED", "Progress", "RunView", "ServedRuns"]

CALLER_ERRORS = (
    AnswerError,
    NoSuchInterruptError,
    NothingToResumeError,
    RunConflictError,
    ThreadNotFoundError,
    ValueError,
)
"""What a caller's request can run into (an unknown thread, an answer that does not
fit, a run already going): each server reports it to the caller, never raises it."""

PAUSED = "paused"
"""A run waiting for a human (plan or tool approval, ``ask_human``, an escalation)."""
STOPPED = "stopped"
"""A run that has not ended but that nobody runs (its process died): resumable."""
ERROR = "error"
"""A run whose runner raised (a model that could not be built, a bad scenario)."""
POLL_SECONDS = 0.2
CALLER_FIELDS = frozenset(
    {
        *("max_parallel", "max_tasks", "max_plan_repairs", "max_replans", "task_retries"),
        *("max_actor_steps", "max_steps", "max_llm_calls", "max_tokens", "max_cost_usd"),
        *("max_wall_s", "replan", "verify", "approve_plan", "escalate"),
        *("escalation_timeout_s", "escalation_default"),
    }
)
"""The ``AimeConfig`` fields a remote caller may set for its run: budgets, replanning,
verification and asking a human. Never the host's (workspace, sandbox, tools, MCP
servers, files, memory scope), nor any field the server's own config sets."""


@dataclass(frozen=True)
class RunView:
    """A thread's run as a remote caller sees it. ``status`` is the run's own
    (``running``, ``succeeded``, ``failed``, ``budget_exhausted``, ``rejected``,
    ``cancelled``) or ``paused`` (``interrupts`` wait for an answer), ``stopped``
    or ``error`` (``reason`` says what went wrong)."""

    thread_id: str
    status: str
    checklist: str = ""
    done: int = 0
    total: int = 0
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    final_answer: str | None = None
    reason: str | None = None

    @property
    def settled(self) -> bool:
        """Paused for a human or ended: nothing happens until someone acts."""
        return self.status not in ("running",)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Progress = Callable[[RunView], Awaitable[None]]
"""Told each new state of a followed run's progress list."""


class ServedRuns:
    """Runs started with one model and config (``aimegraph a2a|mcp serve``'s
    ``--model`` and ``--config``), over one checkpointer."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        *,
        model: str = DEMO_SCENARIO,
        config: Mapping[str, Any] | None = None,
        store: BaseStore | None = None,
    ) -> None:
        self.model = model
        self.config = dict(config or {})
        self.manager = RunManager(saver, store=store)

    @cached_property
    def _reader(self) -> AimeGraph:
        return reader_graph(self.manager.saver)

    def start(self, goal: str, thread_id: str, config: Mapping[str, Any] | None = None) -> str:
        """Start ``goal`` on ``thread_id`` (a new thread, or one whose run has ended)
        with the served model and config, ``config`` over it."""
        given = dict(config or {})
        if unknown := [name for name in given if name not in AimeConfig.model_fields]:
            raise ValueError(
                "; ".join(unknown_setting(name, AimeConfig.model_fields) for name in unknown)
            )
        if refused := sorted(set(given) - CALLER_FIELDS | set(given) & set(self.config)):
            raise ValueError(
                f"a caller may not set {', '.join(refused)}: the server sets it, or it is "
                f"the host's to choose (callers may set {', '.join(sorted(CALLER_FIELDS))})"
            )
        if self.model == DEMO_SCENARIO:
            prepare_demo(thread_id)  # the demo's files, in the workspace the run gets
        return self.manager.start(goal, self.model, {**self.config, **given}, thread_id)

    def answer(
        self, thread_id: str, answer: Mapping[str, Any], interrupt_id: str | None = None
    ) -> None:
        """Answer the thread's pending interrupts (``answer`` as
        :func:`aimegraph.answers.answer_for` takes it); the run carries on, here or in
        the process that holds the thread waiting on the answer."""
        self.manager.resume(thread_id, answer, interrupt_id)

    def cancel(self, thread_id: str, timeout: float = 30.0) -> RunView:
        """Cancel the thread's run (:func:`aimegraph.steering.cancel_run`); a live one
        stops at its next step, which this waits for (up to ``timeout`` seconds)."""
        self.manager.cancel(thread_id)
        self.manager.wait(thread_id, timeout)
        return self.view(thread_id)

    def view(self, thread_id: str) -> RunView:
        """The thread's run now.

        Raises:
            ThreadNotFoundError: no such thread, and no run of it starting here.
        """
        live = thread_id in self.manager.active()
        snapshot = self._reader.get_state(run_config(thread_id))
        if not live and not has_ended(snapshot):  # run by another process (the CLI)?
            live = self.manager.running_elsewhere(thread_id, [i.id for i in snapshot.interrupts])
        if not snapshot.created_at:
            if live:
                return RunView(thread_id, "running")
            if error := self.manager.errors.get(thread_id):
                return RunView(thread_id, ERROR, reason=error)
            raise ThreadNotFoundError(f"no thread {thread_id!r}")
        values = snapshot.values
        progress = _progress(thread_id, values.get("tasks") or {})
        interrupts = [
            {"id": i.id, **to_jsonable_python(interrupt_fields(i.value))}
            for i in snapshot.interrupts
        ]
        status = str(values.get("status") or "running")
        if interrupts and not live:
            status = PAUSED
        elif status == "running" and not live:
            error = self.manager.errors.get(thread_id)
            status = ERROR if error else STOPPED
        return RunView(
            thread_id,
            status,
            checklist=progress.checklist,
            done=progress.done,
            total=progress.total,
            interrupts=[] if live else interrupts,
            final_answer=values.get("final_answer"),
            reason=self.manager.errors.get(thread_id) if status == ERROR else values.get("reason"),
        )

    def head(self, thread_id: str) -> str | None:
        """The id of the thread's latest checkpoint (None for a new thread): what
        :meth:`follow` reports progress after."""
        config = self._reader.get_state(run_config(thread_id)).config
        return config["configurable"].get("checkpoint_id") if config else None

    def progress_since(
        self, thread_id: str, checkpoint_id: str | None
    ) -> tuple[list[RunView], str | None]:
        """The progress list at each checkpoint of the thread after ``checkpoint_id``
        (all when None), oldest first, each once; and the latest checkpoint's id."""
        found: list[RunView] = []
        latest = checkpoint_id
        history = self._reader.get_state_history(run_config(thread_id))
        for index, snapshot in enumerate(history):
            seen = snapshot.config["configurable"].get("checkpoint_id")
            if seen == checkpoint_id:
                break
            if index == 0:
                latest = seen
            if tasks := snapshot.values.get("tasks"):
                found.append(_progress(thread_id, tasks))
        found.reverse()
        steps = [v for i, v in enumerate(found) if not i or v.checklist != found[i - 1].checklist]
        return steps, latest

    async def follow(
        self,
        thread_id: str,
        on_progress: Progress | None = None,
        *,
        since: str | None = None,
        timeout: float | None = None,
        shown: str | None = None,
    ) -> RunView:
        """Wait until the thread's run pauses for a human or ends (or ``timeout``
        seconds pass: then its state as it is), telling ``on_progress`` each new
        state of its progress list after checkpoint ``since`` meanwhile (each
        checkpointed step's, as the run writes them; not the ``shown`` one again)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            view = await asyncio.to_thread(self.view, thread_id)
            if on_progress is not None:
                steps, since = await asyncio.to_thread(self.progress_since, thread_id, since)
                for step in steps:
                    if step.checklist != shown:
                        shown = step.checklist
                        await on_progress(step)
            if view.settled or (deadline is not None and time.monotonic() >= deadline):
                return view
            await asyncio.sleep(POLL_SECONDS)


def _progress(thread_id: str, tasks: Mapping[str, Task]) -> RunView:
    return RunView(
        thread_id,
        "running",
        checklist=render_checklist(dict(tasks)) if tasks else "",
        done=sum(t.status == "completed" for t in tasks.values()),
        total=len(tasks),
    )
