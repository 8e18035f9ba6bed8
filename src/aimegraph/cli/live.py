"""Running a leased thread live: the lease, the signals, the live view, the waits on a
human (said, with the commands that answer them; answered by the answers handed to
this process, or by their defaults at the deadline), the exit code."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphDrained
from langgraph.types import Command, Interrupt, StreamMode
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import (
    RunSettings,
    ThreadBusyError,
    ThreadLease,
    has_ended,
    hold_thread,
    run_config,
)
from aimegraph.checkpoints.delta import with_finished_tasks
from aimegraph.cli.report import Shown, report
from aimegraph.cli.support import (
    EXIT_BUSY,
    EXIT_CODES,
    EXIT_SIGNALLED,
    CliError,
)
from aimegraph.cli.waiting import wait_lines
from aimegraph.console import LiveProgress
from aimegraph.graphs.aime import AimeGraph
from aimegraph.notify import announce_waits
from aimegraph.running.drain import SignalDrain
from aimegraph.steering import end_cancelled, stream_held
from aimegraph.waits import await_overdue, wait_deadlines

__all__ = ["execute", "hold"]

WAIT_POLL_S = 0.25
"""How often a run waiting on a human looks for an answer handed to it."""


def execute(
    graph: AimeGraph,
    inputs: Any,
    lease: ThreadLease,
    settings: RunSettings,
    args: argparse.Namespace,
    console: Console,
    checkpoint_id: str | None = None,
) -> int:
    """Run ``graph`` on the leased thread, live (or quietly with ``--json``), then
    print where it ended; returns the exit code of its status. SIGINT / SIGTERM
    drain the run: it stops at the next step boundary with one line (exit 130 /
    143); a second signal abandons the calls in flight."""
    thread_id = lease.thread_id
    config = run_config(thread_id, settings, checkpoint_id)
    modes: list[StreamMode] = ["updates", "custom"]
    if getattr(args, "stream", False) and not args.json:
        modes.append("messages")  # the answer as it is written
    stops = SignalDrain(
        lease.control,
        (signal.SIGINT, signal.SIGTERM),
        on_first=_say_stopping,
        on_repeat=partial(_abandon, thread_id),
    )

    def waiting() -> Sequence[Interrupt]:
        """The thread's interrupts, while nothing asks the run to stop."""
        if lease.control.drain_requested:
            raise GraphDrained(lease.control.drain_reason or "shutdown")
        return graph.get_state(run_config(thread_id)).interrupts

    def follow(inputs: Any, config: RunnableConfig) -> Shown:
        """One stretch of the run; the human waits it ends on that are new are announced
        (``notify_webhook``)."""
        known = {i.id for i in graph.get_state(run_config(thread_id)).interrupts}
        shown = _follow(graph, inputs, config, lease, modes, args, console)
        announce_waits(settings.config, thread_id, waiting(), known)
        return shown

    streamed = Shown()
    with stops:
        try:
            if not args.json:
                console.print(f"[bold]thread:[/bold] {escape(thread_id)}")
            streamed = follow(inputs, config)
            while command := _await_human(lease, waiting, partial(_say, console, args)):
                streamed = follow(command, run_config(thread_id, settings))
        except GraphDrained as exc:
            if not lease.cancelled:
                if stops.received is None:  # the lease's Postgres session ended
                    raise CliError(
                        f"stopped: {exc.reason} (the database connection holding the "
                        f"thread's lease ended); carry on with: aimegraph resume {thread_id}"
                    ) from exc
                print(_carry_on(thread_id), file=sys.stderr)
                return EXIT_SIGNALLED + stops.received
            # Cancelled: a stretch of the run ends it so itself; a wait on a human is
            # ended here, at once (reported below).
            if not has_ended(graph.get_state(run_config(thread_id))):
                end_cancelled(graph, thread_id)
    snapshot = graph.get_state(run_config(thread_id))
    if isinstance(graph.checkpointer, BaseCheckpointSaver):  # paused: its step so far
        snapshot = with_finished_tasks(snapshot, graph.checkpointer)
    state = report(snapshot, thread_id, args, console, streamed=streamed)
    if not args.json:
        console.print(
            f"inspect with: aimegraph show {thread_id}   (history: aimegraph history {thread_id})"
        )
    return EXIT_CODES.get(state, 1)


def _await_human(
    lease: ThreadLease, waiting: Callable[[], Sequence[Interrupt]], say: Callable[[str], None]
) -> Command[Any] | None:
    """While the run waits on a human with a deadline: say what it waits for and how to
    answer, then the command carrying it on: an answer handed to this process
    (``aimegraph resume``, the dashboard, A2A, MCP), or the default at the deadline.
    None when nothing waits with a deadline, or someone not holding the thread
    answered."""
    interrupts = waiting()
    if not wait_deadlines(interrupts):
        return None
    for line in wait_lines(lease.thread_id, interrupts, time.time()):
        say(line)
    senders: list[str] = []

    def handed(pending: Collection[str]) -> Mapping[str, Any] | None:
        taken = lease.take_answer(pending)
        if taken is None:
            return None
        senders.extend(taken.senders)
        return taken.answers

    command = await_overdue(waiting, posted=handed, poll_s=WAIT_POLL_S)
    if command is not None:
        say(
            f"answered by {', '.join(senders)}: carrying on"
            if senders
            else "no answer in time: taking the default"
        )
    return command


def _say(console: Console, args: argparse.Namespace, line: str) -> None:
    """A plain line of what the run is doing: on stderr with --json (stdout is the
    JSON), flushed as it is said (through a pipe too)."""
    if args.json:
        print(line, file=sys.stderr, flush=True)
    else:
        console.print(line, markup=False, highlight=False)


def _carry_on(thread_id: str) -> str:
    return f"interrupted; carry on with: aimegraph resume {thread_id}"


def _say_stopping(signum: int) -> None:
    """On a terminal, say what the first Ctrl-C does (the run may take a while)."""
    if sys.stderr.isatty():
        os.write(2, b"\nstopping after the calls in flight (again to abandon them)\n")


def _abandon(thread_id: str, signum: int) -> None:
    """A second signal: exit now, leaving the calls in flight; they are redone on
    resume. Written straight to the descriptor: this runs in a signal handler."""
    cursor = "\x1b[?25h" if sys.stderr.isatty() else ""  # the live view hid it
    os.write(2, f"{cursor}\n{_carry_on(thread_id)}\n".encode())
    os._exit(EXIT_SIGNALLED + signum)


def hold(saver: BaseCheckpointSaver[Any], thread_id: str, args: argparse.Namespace) -> ThreadLease:
    """The thread's lease: exit 9 naming the process that holds it, or with
    ``--wait`` a line saying whom it waits for, then the lease once it is free."""
    try:
        return hold_thread(saver, thread_id)
    except ThreadBusyError as exc:
        if not getattr(args, "wait", False):
            raise CliError(
                f"{exc}; wait for it with --wait, or stop it with: aimegraph cancel {thread_id}",
                EXIT_BUSY,
            ) from exc
        print(f"waiting: {exc}", file=sys.stderr, flush=True)
    return hold_thread(saver, thread_id, wait=True)


def _follow(
    graph: AimeGraph,
    inputs: Any,
    config: RunnableConfig,
    lease: ThreadLease,
    modes: list[StreamMode],
    args: argparse.Namespace,
    console: Console,
) -> Shown:
    """Run ``graph`` under ``lease`` until it ends or pauses, showing its progress
    live (unless --json); returns what the live view left on the screen."""
    chunks: Iterator[Any] = stream_held(
        graph,
        inputs,
        config,
        lease,
        stream_mode=modes,
        subgraphs=True,
        durability=getattr(args, "durability", "async"),
    )
    if args.json:
        for _ in chunks:
            pass
        return Shown()
    with LiveProgress(console, title=f"aimegraph {lease.thread_id}") as live:
        live.follow(chunks)
    return Shown(live.answer, live.checklist)
