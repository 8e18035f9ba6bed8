"""Runs the dashboard starts, answers, carries on or cancels, each in a worker
thread of its own.

Starting, resuming, answering and cancelling go through :mod:`aimegraph.steering`,
the same code the CLI uses, under the thread's lease: a thread another process
runs is refused here (409), and the other way round, except an answer for a
process that waits on a human holding the thread (a timed wait of ``aimegraph
run``): it is handed to that process, which carries the run on
(:func:`aimegraph.answers.hold_or_hand_over`). Every step lands in the
checkpointer, which the pages read; so a run paused by the CLI can be answered
here and the other way round.
Graphs are built with the dashboard's memory store, as the CLI builds them with
its own: a thread started with memory keeps its memory nodes when resumed here.
A distributed run (one with a row in the queue's runs table) is never run here:
its answer is queued for the workers, as ``aimegraph resume`` does.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Interrupt, StateSnapshot

from aimegraph.answers import HandedOver, NoSuchInterruptError, hold_or_hand_over
from aimegraph.checkpoints import (
    RunSettings,
    ThreadBusyError,
    ThreadLease,
    ThreadNotFoundError,
    ThreadSummary,
    has_ended,
    hold_thread,
    latest_settings,
    live_threads,
    new_thread_id,
    run_config,
)
from aimegraph.config import AimeConfig
from aimegraph.distributed.records import RunRecord, active_runs, find_run
from aimegraph.memory.feedback import Feedback
from aimegraph.notify import announce_waits
from aimegraph.optimizer.store import PromptStore, starting_prompts
from aimegraph.steering import (
    DEMO_SCENARIO,
    WORKSPACES,
    AnswerNeededError,
    NothingToResumeError,
    cancel_run,
    feedback,
    invoke_held,
    prepare_demo,
    reader_graph,
    resume_inputs,
    run_graph,
    send_note,
    settle_pending_cancel,
)
from aimegraph.waits import overdue_answers, wait_deadline

__all__ = [
    "DistributedQueue",
    "NothingToResumeError",
    "QueueUnavailableError",
    "RunConflictError",
    "RunManager",
]


class RunConflictError(RuntimeError):
    """The thread is being run (here or by another process), or has a run that has
    not ended and so cannot take a new goal."""


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

    Each run has a daemon thread holding the thread's lease, so stopping the
    dashboard never waits for a model: a run stops where it is (its lease goes
    with the process), and as every step is checkpointed before the next one
    starts (``durability="sync"``), ``aimegraph resume`` carries it on without
    losing a finished step."""

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
        self._handed: dict[str, frozenset[str]] = {}
        self.errors: dict[str, str] = {}
        self._lock = threading.Lock()

    def start(
        self,
        goal: str,
        model: str | None,
        config: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
        response_format: str | None = None,
    ) -> str:
        """Start a new run (as ``aimegraph run``; ``response_format`` as its
        ``--response-format``); returns its thread id. A thread that stores settings
        keeps them for its next goal, those given here over them (as ``run --thread``):
        its safety settings, its model (unless ``model`` is given; else the demo's)."""
        if not goal.strip():
            raise ValueError("a run needs a goal")
        stored = None
        if thread_id is not None:
            with contextlib.suppress(ThreadNotFoundError):  # a new thread, or no settings
                stored = latest_settings(self.saver, thread_id)
        thread_id = thread_id or new_thread_id()
        settings = (
            self._new_settings(thread_id, model, config or {}, response_format)
            if stored is None
            else stored.carried_on(
                AimeConfig.model_validate({**stored.config.model_dump(), **(config or {})}),
                model=model,
                response_format=response_format,
            )
        )
        Path(settings.config.workspace).mkdir(parents=True, exist_ok=True)
        self._start(thread_id, settings, goal)
        return thread_id

    def _new_settings(
        self,
        thread_id: str,
        model: str | None,
        config: Mapping[str, Any],
        response_format: str | None,
    ) -> RunSettings:
        """A new thread's settings: ``config`` (its workspace by default under
        ``WORKSPACES``), and as ``aimegraph run`` the prompt store's active version."""
        checked = AimeConfig.model_validate({"workspace": str(WORKSPACES / thread_id), **config})
        prompts = (
            starting_prompts(self.prompts.path, online=checked.optimize_online)
            if self.prompts is not None
            else None
        )
        return RunSettings(
            model=model or DEMO_SCENARIO,
            config=checked,
            prompts=prompts,
            response_format=response_format,
        )

    def start_demo(self, *, approve_plan: bool = False, thread_id: str | None = None) -> str:
        """Start the bundled demo (as ``aimegraph demo``), optionally pausing for
        plan approval; returns its thread id."""
        thread_id = thread_id or new_thread_id("demo-")
        settings, goal = prepare_demo(thread_id, approve_plan=approve_plan)
        self._start(thread_id, settings, goal)
        return thread_id

    def resume(
        self, thread_id: str, answer: Mapping[str, Any] | None, interrupt_id: str | None = None
    ) -> bool | HandedOver:
        """Answer the thread's pending interrupts (``answer`` as in
        :func:`aimegraph.answers.answer_for`), or carry on a run that has not ended.
        True when the thread is a distributed run and its resume was queued for the
        workers, False when it carries on here, :class:`HandedOver` when the answer
        went to the process that holds the thread waiting on it."""
        record = self._distributed_record(thread_id)
        settings = record.settings if record is not None else latest_settings(self.saver, thread_id)
        # Workers build a run's graph with their memory store (`aimegraph worker
        # --store`): read it with one too, so its memory nodes are there (a
        # read writes nothing to it).
        store = self.store if self.store is not None or record is None else InMemoryStore()
        graph = run_graph(settings, self.saver, store)
        if record is not None:
            snapshot = graph.get_state(run_config(thread_id))
            inputs = self._inputs(snapshot, thread_id, answer, interrupt_id)
            self._enqueue(thread_id, inputs.resume if inputs is not None else None)
            return True
        try:
            held = hold_or_hand_over(
                self.saver,
                thread_id,
                lambda: graph.get_state(run_config(thread_id)),
                (lambda snapshot: self._inputs(snapshot, thread_id, answer, interrupt_id))
                if answer
                else None,
            )
        except ThreadBusyError as exc:
            raise RunConflictError(str(exc)) from exc
        if isinstance(held, HandedOver):
            self._handed[thread_id] = held.interrupt_ids
            return held
        lease = held
        try:
            if settle_pending_cancel(graph, thread_id):
                raise NothingToResumeError(f"thread {thread_id!r} was cancelled")
            snapshot = graph.get_state(run_config(thread_id))
            inputs = self._inputs(snapshot, thread_id, answer, interrupt_id)
            self._launch(lease, graph, settings, inputs)
        except BaseException:
            lease.release()
            raise
        return False

    def cancel(self, thread_id: str) -> str:
        """End the thread's run as ``cancelled`` (see :func:`aimegraph.steering.cancel_run`):
        ``"cancelled"``, or ``"requested"`` when a live process (or worker) runs it
        and stops it at its next step."""
        record = self._distributed_record(thread_id)
        if record is not None:
            from aimegraph.distributed.runner import cancel_distributed

            assert self.distributed is not None
            try:
                return cancel_distributed(self.distributed.checkpoints, record)
            except LookupError as exc:
                raise NothingToResumeError(str(exc)) from exc
        return cancel_run(reader_graph(self.saver), thread_id)

    def running_elsewhere(self, thread_id: str, pending: Collection[str]) -> bool:
        """Whether another process runs the thread now: it holds the thread, and does
        not wait on a human (none of the waits ``pending``, or only those answered
        from here, the answer handed to it: its step has not written a checkpoint
        yet, so they still read as pending)."""
        if pending and not set(pending) <= self._handed.get(thread_id, frozenset()):
            return False
        return thread_id in live_threads(self.saver, [thread_id])

    def _inputs(
        self,
        snapshot: StateSnapshot,
        thread_id: str,
        answer: Mapping[str, Any] | None,
        interrupt_id: str | None,
    ) -> Any:
        try:
            return resume_inputs(snapshot, dict(answer) if answer else None, interrupt_id)
        except AnswerNeededError as exc:
            raise ValueError("the run waits for a human: send an answer") from exc
        except NothingToResumeError as exc:
            raise NothingToResumeError(f"thread {thread_id!r}: {exc}") from exc

    def note(self, thread_id: str, text: str) -> str:
        """Send a note to the thread's run (see :func:`aimegraph.steering.send_note`);
        returns the thread id."""
        self._known(thread_id)
        send_note(self.store, thread_id, text)
        return thread_id

    def feedback(self, thread_id: str, rating: int, note: str) -> Feedback:
        """Store a user's verdict on the thread's latest run in the dashboard's memory
        store (see :func:`aimegraph.steering.feedback`)."""
        self._known(thread_id)
        if self.store is None:
            raise ValueError("feedback is kept in the memory store: serve with one (--store)")
        return feedback(self.saver, self.store, thread_id, rating, note)

    def _known(self, thread_id: str) -> None:
        """ThreadNotFoundError when the store has no checkpoint of the thread."""
        if self.saver.get_tuple(run_config(thread_id)) is None:
            raise ThreadNotFoundError(f"no thread {thread_id!r} in this checkpoint store")

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

    def _hold(self, thread_id: str) -> ThreadLease:
        """The thread's lease; RunConflictError when someone runs it."""
        try:
            return hold_thread(self.saver, thread_id)
        except ThreadBusyError as exc:
            raise RunConflictError(str(exc)) from exc

    def _start(self, thread_id: str, settings: RunSettings, goal: str) -> None:
        """A new goal on the thread: a new thread, or one whose run has ended."""
        graph = run_graph(settings, self.saver, self.store)
        lease = self._hold(thread_id)
        try:
            settle_pending_cancel(graph, thread_id)
            snapshot = graph.get_state(run_config(thread_id))
            if snapshot.created_at and not has_ended(snapshot):
                raise RunConflictError(
                    f"thread {thread_id!r} has a run that has not ended: resume or cancel it"
                )
            self._launch(lease, graph, settings, {"goal": goal})
        except BaseException:
            lease.release()
            raise

    def _launch(self, lease: ThreadLease, graph: Any, settings: RunSettings, inputs: Any) -> None:
        thread_id = lease.thread_id
        with self._lock:
            running = {t for t, run in self._active.items() if run.is_alive()}
            if len(running) >= self.max_runs:
                raise RunConflictError(f"{len(running)} runs are in flight here; wait for one")
            self.errors.pop(thread_id, None)
            run = threading.Thread(
                target=self._run,
                args=(graph, inputs, lease, settings),
                name=f"aimegraph-run-{thread_id}",
                daemon=True,
            )
            self._active[thread_id] = run
            run.start()

    def _run(self, graph: Any, inputs: Any, lease: ThreadLease, settings: RunSettings) -> None:
        thread_id = lease.thread_id
        try:
            known = {i.id for i in graph.get_state(run_config(thread_id)).interrupts}
            invoke_held(graph, inputs, run_config(thread_id, settings), lease, durability="sync")
            waiting = graph.get_state(run_config(thread_id)).interrupts
            announce_waits(settings.config, thread_id, waiting, known)
            self._default_when_overdue(thread_id, waiting)
        except Exception as exc:  # noqa: BLE001 - shown on the run page, never lost
            self.errors[thread_id] = f"{type(exc).__name__}: {exc}"
        finally:
            lease.release()

    def _default_when_overdue(self, thread_id: str, interrupts: Sequence[Interrupt]) -> None:
        """For each human wait with a deadline (``approval_timeout_s``,
        ``ask_human_timeout_s``, ``escalation_timeout_s``), a timer that answers it with
        its default then, unless a human has answered it by then."""
        for item in interrupts:
            if (deadline := wait_deadline(item)) is None:
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
