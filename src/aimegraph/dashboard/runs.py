"""Runs the dashboard starts or answers, each in a worker thread of its own.

Starting, resuming and answering go through :mod:`aimegraph.steering`, the same
code the CLI uses, and every step lands in the checkpointer, which the pages
read; so a run paused by the CLI can be answered here and the other way round.
Graphs are built with the dashboard's memory store, as the CLI builds them with
its own: a thread started with memory keeps its memory nodes when resumed here.
A distributed run (one with a row in the queue's runs table) is never run here:
its answer is queued for the workers, as ``aimegraph resume`` does.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Interrupt

from aimegraph.checkpoints import (
    RunSettings,
    ThreadNotFoundError,
    ThreadSummary,
    latest_settings,
    new_thread_id,
    run_config,
)
from aimegraph.config import AimeConfig
from aimegraph.distributed.records import RunRecord, active_runs, find_run
from aimegraph.optimizer.store import PromptStore, starting_prompts
from aimegraph.steering import (
    WORKSPACES,
    NoSuchInterruptError,
    escalation_deadline,
    overdue_answers,
    prepare_demo,
    resume_command,
    run_graph,
    send_note,
)


class RunConflictError(RuntimeError):
    """The thread is already being run by this dashboard, or already exists."""


class NothingToResumeError(LookupError):
    """The thread has no pending interrupt and no unfinished step."""


class QueueUnavailableError(RuntimeError):
    """A distributed run's resume could not be queued (no broker, no extra)."""


@dataclass(frozen=True)
class DistributedQueue:
    """Where distributed runs live: the Postgres checkpoints holding their runs table
    (the URL the dashboard's checkpointer was opened with) and the workers' queue."""

    checkpoints: str
    broker: str
    queue: str = "aimegraph"


class RunManager:
    """Starts and resumes runs in the background; remembers which are in flight
    here and how any of them failed (as a message for the page).

    Each run has a daemon thread, so stopping the dashboard never waits for a
    model: a run stops where it is, and as every step is checkpointed before the
    next one starts (``durability="sync"``), ``aimegraph resume`` carries it on
    without losing a finished step."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        *,
        store: BaseStore | None = None,
        prompts: PromptStore | None = None,
        distributed: DistributedQueue | None = None,
        max_runs: int = 16,
    ) -> None:
        self.saver = saver
        self.store = store
        self.prompts = prompts
        self.distributed = distributed
        self.max_runs = max_runs
        self._active: dict[str, threading.Thread] = {}
        self.errors: dict[str, str] = {}
        self._lock = threading.Lock()

    def start(
        self,
        goal: str,
        model: str,
        config: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
    ) -> str:
        """Start a new run (as ``aimegraph run``); returns its thread id."""
        if not goal.strip():
            raise ValueError("a run needs a goal")
        thread_id = thread_id or new_thread_id()
        fields = dict(config or {})
        fields.setdefault("workspace", str(WORKSPACES / thread_id))
        checked = AimeConfig.model_validate(fields)
        # As `aimegraph run`: the prompt store's active version, if it has one.
        prompts = (
            starting_prompts(self.prompts.path, online=checked.optimize_online)
            if self.prompts is not None
            else None
        )
        settings = RunSettings(model=model, config=checked, prompts=prompts)
        Path(settings.config.workspace).mkdir(parents=True, exist_ok=True)
        self._launch(thread_id, settings, {"goal": goal}, new=True)
        return thread_id

    def start_demo(self, *, approve_plan: bool = False, thread_id: str | None = None) -> str:
        """Start the bundled demo (as ``aimegraph demo``), optionally pausing for
        plan approval; returns its thread id."""
        thread_id = thread_id or new_thread_id("demo-")
        settings, goal = prepare_demo(thread_id, approve_plan=approve_plan)
        self._launch(thread_id, settings, {"goal": goal}, new=True)
        return thread_id

    def resume(
        self, thread_id: str, answer: Mapping[str, Any] | None, interrupt_id: str | None = None
    ) -> bool:
        """Answer the thread's pending interrupts (``answer`` as in
        :func:`aimegraph.steering.answer_for`), or carry on a run stopped mid-way.
        True when the thread is a distributed run and its resume was queued for the
        workers, False when it carries on here."""
        record = self._distributed_record(thread_id)
        settings = record.settings if record is not None else latest_settings(self.saver, thread_id)
        # Workers build a run's graph with their memory store (`aimegraph worker
        # --store`): read it with one too, so its memory nodes are there (a
        # read writes nothing to it).
        store = self.store if self.store is not None or record is None else InMemoryStore()
        snapshot = run_graph(settings, self.saver, store).get_state(run_config(thread_id))
        if snapshot.interrupts:
            if answer is None:
                raise ValueError("the run waits for a human: send an answer")
            inputs: Any = resume_command(snapshot.interrupts, dict(answer), interrupt_id)
        elif snapshot.next:
            inputs = None
        else:
            raise NothingToResumeError(f"thread {thread_id!r} has nothing to resume")
        if record is not None:
            self._enqueue(thread_id, inputs.resume if inputs is not None else None)
            return True
        self._launch(thread_id, settings, inputs, new=False)
        return False

    def note(self, thread_id: str, text: str) -> str:
        """Send a note to the thread's run (see :func:`aimegraph.steering.send_note`);
        returns the thread id."""
        if self.saver.get_tuple(run_config(thread_id)) is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r}")
        send_note(self.store, thread_id, text)
        return thread_id

    def _distributed_record(self, thread_id: str) -> RunRecord | None:
        """The thread's row in the distributed runs table (read with psycopg alone),
        or None: no queue configured, no runs table, or a thread run in one process."""
        if self.distributed is None:
            return None
        return find_run(self.distributed.checkpoints, thread_id)

    def queued(self) -> list[ThreadSummary]:
        """The distributed runs queued or on a worker (none without a queue)."""
        if self.distributed is None:
            return []
        return active_runs(self.distributed.checkpoints)

    def _enqueue(self, thread_id: str, answers: dict[str, Any] | None) -> None:
        assert self.distributed is not None
        try:
            from aimegraph.distributed.app import BrokerConnectionError
            from aimegraph.distributed.submit import RunNotResumableError, enqueue_resume
        except ImportError as exc:
            raise QueueUnavailableError(
                f"{thread_id!r} is a distributed run; resuming it needs "
                f"pip install 'aimegraph[distributed]' ({exc})"
            ) from exc
        try:
            enqueue_resume(
                thread_id,
                answers,
                broker=self.distributed.broker,
                checkpoints=self.distributed.checkpoints,
                queue=self.distributed.queue,
            )
        except RunNotResumableError as exc:
            raise RunConflictError(str(exc)) from exc
        except BrokerConnectionError as exc:
            raise QueueUnavailableError(str(exc)) from exc

    def active(self) -> set[str]:
        with self._lock:
            return {t for t, run in self._active.items() if run.is_alive()}

    def wait(self, thread_id: str, timeout: float | None = None) -> None:
        """Block until this dashboard's run of the thread ends or pauses (for tests
        and scripts)."""
        with self._lock:
            run = self._active.get(thread_id)
        if run is not None:
            run.join(timeout)

    def _launch(self, thread_id: str, settings: RunSettings, inputs: Any, *, new: bool) -> None:
        with self._lock:
            running = {t for t, run in self._active.items() if run.is_alive()}
            if thread_id in running:
                raise RunConflictError(f"thread {thread_id!r} is already running here")
            if len(running) >= self.max_runs:
                raise RunConflictError(f"{len(running)} runs are in flight here; wait for one")
            if new and self.saver.get_tuple(run_config(thread_id)) is not None:
                raise RunConflictError(f"thread {thread_id!r} exists; pick a new id")
            graph = run_graph(settings, self.saver, self.store)
            self.errors.pop(thread_id, None)
            run = threading.Thread(
                target=self._run,
                args=(graph, inputs, thread_id, settings),
                name=f"aimegraph-run-{thread_id}",
                daemon=True,
            )
            self._active[thread_id] = run
            run.start()

    def _run(self, graph: Any, inputs: Any, thread_id: str, settings: RunSettings) -> None:
        try:
            graph.invoke(inputs, run_config(thread_id, settings), durability="sync")
            self._default_when_overdue(thread_id, graph.get_state(run_config(thread_id)).interrupts)
        except Exception as exc:  # noqa: BLE001 - shown on the run page, never lost
            self.errors[thread_id] = f"{type(exc).__name__}: {exc}"

    def _default_when_overdue(self, thread_id: str, interrupts: Sequence[Interrupt]) -> None:
        """For each escalation with a deadline (``escalation_timeout_s``), a timer that
        answers it with its default then, unless a human has answered it by then."""
        for item in interrupts:
            if (deadline := escalation_deadline(item)) is None:
                continue
            default = overdue_answers([item], now=deadline)[item.id]
            timer = threading.Timer(
                max(0.0, deadline - time.time()),
                self._take_default,
                (thread_id, item.id, default),
            )
            timer.daemon = True
            timer.start()

    def _take_default(self, thread_id: str, interrupt_id: str, default: dict[str, Any]) -> None:
        # Answered, or being run, in the meantime: nothing to do.
        with contextlib.suppress(NoSuchInterruptError, RunConflictError, NothingToResumeError):
            self.resume(thread_id, default, interrupt_id)
