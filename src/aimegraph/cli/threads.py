"""``aimegraph threads | show | history | wait | draw``: read stored threads, never run
them. ``show`` and ``draw`` import the graph, reports and drawing when they run, so
``threads`` lists a store without loading the engine."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aimegraph.checkpoints import list_threads, live_threads, run_config
from aimegraph.cli.support import EXIT_CODES, EXIT_NOT_FOUND, EXIT_USAGE, AddCommand, CliError

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from rich.console import Console

    from aimegraph.graphs.aime import AimeGraph

__all__ = ["register"]


def register(command: AddCommand) -> None:
    """Add ``threads``, ``show``, ``history``, ``wait`` and ``draw``."""
    command("threads", cmd_threads)
    show = command("show", cmd_show)
    show.add_argument("thread")
    show.add_argument(
        "--timeline",
        action="store_true",
        help="also draw when each task, planner, reporter and verifier call ran",
    )
    history = command("history", cmd_history)
    history.add_argument("thread")
    wait = command("wait", cmd_wait)
    wait.add_argument("thread")
    wait.add_argument("--timeout", type=float, help="give up after this many seconds (exit 7)")
    draw = command("draw", cmd_draw)
    draw.add_argument("--plan", metavar="THREAD", help="draw this thread's task DAG")
    draw.add_argument("--model", help=argparse.SUPPRESS)  # default: the demo's scenario
    draw.add_argument("--xray", action="store_true", help="expand the subgraphs")
    draw.add_argument(
        "--format",
        choices=["svg", "png", "pdf", "mermaid"],
        default=None,
        help="default: from the suffix of -o (.svg .png .pdf .mmd), else svg",
    )
    draw.add_argument("-o", "--output", help="file to write (default: stdout)")


def cmd_threads(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    from aimegraph.distributed.records import active_runs

    threads = [t.as_dict() for t in list_threads(saver, active=active_runs(args.checkpoints))]
    if args.json:
        print(json.dumps(threads, indent=2))
        return 0
    if not threads:
        console.print("no threads yet")
    for t in threads:
        console.print(
            f"{t['thread_id']:<24} {t['status']:<17} {t['updated'][:19]}  {t['goal'][:60]}",
            markup=False,
        )
    return 0


def cmd_show(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    from aimegraph.distributed.records import ACTIVE_STATES, find_run

    record = find_run(args.checkpoints, args.thread)
    if record is not None and (
        record.state in ACTIVE_STATES or saver.get_tuple(run_config(args.thread)) is None
    ):  # queued, on a worker, or ended before its first checkpoint
        from aimegraph.cli.distributed import show_record

        return show_record(record, args, console)
    from aimegraph.checkpoints.delta import with_finished_tasks
    from aimegraph.cli.report import report

    snapshot = _reader(saver, args.thread).get_state(run_config(args.thread))
    holder = live_threads(saver, [args.thread]).get(args.thread)
    # A run stopped mid-step shows the tasks that step had already finished.
    shown = with_finished_tasks(snapshot, saver)
    report(shown, args.thread, args, console, holder=holder, heading=True)
    return 0


def cmd_wait(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    from aimegraph.cli.distributed import wait_record

    record = wait_record(args)
    cmd_show(args, saver, console)
    return EXIT_CODES.get(record.outcome, 1)


def cmd_history(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    rows = []
    for snap in _reader(saver, args.thread).get_state_history(run_config(args.thread)):
        tasks = snap.values.get("tasks") or {}
        done = sum(t.status == "completed" for t in tasks.values())
        rows.append(
            {
                "checkpoint_id": snap.config["configurable"]["checkpoint_id"],
                "step": snap.metadata.get("step") if snap.metadata else None,
                "next": list(snap.next),
                "status": "paused" if snap.interrupts else snap.values.get("status", "running"),
                "tasks_done": f"{done}/{len(tasks)}",
                "created_at": snap.created_at,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    for row in rows:
        console.print(
            f"{row['checkpoint_id']}  step {row['step']!s:>3}  {row['tasks_done']:>6} done  "
            f"{row['status']:<16} next: {', '.join(row['next']) or '-'}",
            markup=False,
            soft_wrap=True,
        )
    return 0


def cmd_draw(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    from aimegraph.config import AimeConfig
    from aimegraph.drawing import GraphvizNotFoundError, draw, draw_plan
    from aimegraph.graphs.aime import build_aime_graph
    from aimegraph.steering import DEMO_SCENARIO

    try:
        if args.plan:
            snapshot = _reader(saver, args.plan).get_state(run_config(args.plan))
            drawing = draw_plan(snapshot.values, args.output, format=args.format)
        else:
            graph = build_aime_graph(
                args.model or DEMO_SCENARIO,
                config=AimeConfig(workspace=Path(tempfile.gettempdir())),
            )
            drawing = draw(graph, args.output, format=args.format, xray=args.xray)
    except GraphvizNotFoundError as exc:
        raise CliError(f"{exc} (or pass --format mermaid)", EXIT_USAGE) from exc
    if args.output:
        console.print(f"wrote {args.output}", markup=False)
    else:
        data = drawing.data
        sys.stdout.write(data if isinstance(data, str) else data.decode("latin-1"))
    return 0


def _reader(saver: BaseCheckpointSaver[Any], thread_id: str) -> AimeGraph:
    """A graph to read an existing thread's state with (see ``reader_graph``)."""
    from aimegraph.steering import reader_graph

    if saver.get_tuple(run_config(thread_id)) is None:
        raise CliError(f"no thread {thread_id!r} in this checkpoint store", EXIT_NOT_FOUND)
    return reader_graph(saver, thread_id)
