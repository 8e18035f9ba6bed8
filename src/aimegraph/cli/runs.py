"""``aimegraph run | demo``: start a run on a new thread (or on one whose run has
ended, with the settings it stores), following it live until it ends, pauses or is
stopped. Carrying a thread on, ending it or sending it a note: :mod:`aimegraph.cli.resume`.

Every command that runs a thread holds the thread's lease
(:mod:`aimegraph.checkpoints.lease`) from before it reads the state until the run
stops: a second runner is refused (exit 9) or waits (``--wait``). SIGINT or SIGTERM
stops the run at the next step boundary (exit 130 / 143, resumable); a second
signal abandons the calls in flight at once.
"""

from __future__ import annotations

import argparse
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import (
    RunSettings,
    ThreadNotFoundError,
    has_ended,
    latest_settings,
    new_thread_id,
    run_config,
)
from aimegraph.cli.knowledge import add_knowledge_option
from aimegraph.cli.live import execute, hold
from aimegraph.cli.options import (
    DEFAULT_MODEL,
    durability_option,
    plan_option,
    run_options,
    stream_option,
    wait_option,
)

# Beside carried_settings, the names that moved to aimegraph.cli.resume stay
# importable from here for a release.
from aimegraph.cli.resume import (  # noqa: F401
    ANSWER_HINTS,
    RESUME_FLAGS,
    carried_settings,
    cmd_cancel,
    cmd_fork,
    cmd_note,
    cmd_resume,
)
from aimegraph.cli.support import (
    EXIT_USAGE,
    AddCommand,
    CliError,
    config_flags,
    config_from_args,
    run_prompts,
    unfinished_run,
)
from aimegraph.graphs.aime import AimeGraph
from aimegraph.models.resolve import check_goal
from aimegraph.nodes.planner import resolve_goal
from aimegraph.sandbox import SandboxUnavailable, open_sandbox
from aimegraph.state import PlanError
from aimegraph.steering import (
    prepare_demo,
    run_graph,
    settle_pending_cancel,
)

__all__ = ["execute", "register"]


def register(command: AddCommand) -> None:
    """Add ``run`` and ``demo``."""
    run = command("run", cmd_run)
    run_options(run)
    plan_option(run)
    durability_option(run)
    add_knowledge_option(run)
    stream_option(run)
    wait_option(run)

    demo = command("demo", cmd_demo)
    demo.add_argument("--thread", help="thread id (default: a new one)")
    demo.add_argument(
        "--sandbox",
        choices=["auto", "bubblewrap", "none"],
        default="auto",
        help="where the demo's python code runs (default auto: bubblewrap; none: unconfined)",
    )
    durability_option(demo)
    stream_option(demo)
    wait_option(demo)


def cmd_run(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    thread_id = args.thread or new_thread_id()
    settings = _new_run_settings(args, saver, thread_id, console)
    # A goal the run would refuse is refused before it is stored in a checkpoint.
    resolve_goal({"goal": args.goal}, max_chars=settings.config.max_goal_chars)
    try:
        graph = run_graph(settings, saver, args.memory_store(), plan=args.plan)
    except PlanError as exc:
        raise CliError(f"--plan: {exc}", EXIT_USAGE) from exc
    with hold(saver, thread_id, args) as lease:
        earlier = _check_new_run(graph, thread_id)
        # A scripted scenario's refusal of the goal, as one line (ValueError: exit 2).
        check_goal(settings.model, args.goal, earlier)
        return execute(graph, {"goal": args.goal}, lease, settings, args, console)


def _new_run_settings(
    args: argparse.Namespace, saver: BaseCheckpointSaver[Any], thread_id: str, console: Console
) -> RunSettings:
    """A new thread's settings come from the flags. A thread that stores settings (the
    demo's, say, with its sandbox and workspace) keeps them for its next goal, as
    ``resume`` does, the flags given overriding them."""
    try:
        stored = latest_settings(saver, thread_id) if args.thread else None
    except ThreadNotFoundError:  # a new thread, or one started without stored settings
        stored = None
    if stored is not None:
        return carried_settings(
            thread_id,
            stored,
            model=args.model,
            config=config_flags(args),
            tools=args.tools,
            mcp=args.mcp,
            prompts=run_prompts(args, console) if args.prompts else None,
            agents=args.agents,
            knowledge=args.knowledge,
            response_format=args.response_format,
        )
    config = config_from_args(args, thread_id)
    return RunSettings(
        model=args.model or DEFAULT_MODEL,
        config=config,
        tools=tuple(args.tools),
        prompts=run_prompts(args, console, online=config.optimize_online),
        agents=args.agents,
        knowledge=args.knowledge,
        response_format=args.response_format,
        mcp=args.mcp,
    )


def cmd_demo(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    thread_id = args.thread or new_thread_id("demo-")
    settings, goal = prepare_demo(thread_id, sandbox=args.sandbox)
    workspace = settings.config.workspace
    try:
        # The demo's python calls need the sandbox: say so now, not as five failed calls.
        sandbox = open_sandbox(settings.config.sandbox).check()
    except SandboxUnavailable as exc:
        raise CliError(f"{exc} (here: aimegraph demo --sandbox none)", EXIT_USAGE) from exc
    graph = run_graph(settings, saver, args.memory_store())
    with hold(saver, thread_id, args) as lease:
        _check_new_run(graph, thread_id)
        if not args.json:
            console.print(f"[bold]goal:[/bold] {escape(goal)}")
            console.print(f"workspace: {workspace} (sales.csv copied in)", markup=False)
            console.print(f"sandbox: {sandbox}\n", markup=False)
        code = execute(graph, {"goal": goal}, lease, settings, args, console)
    if not args.json:
        written = workspace / "report.md"
        if written.exists():
            console.print(f"[bold]report:[/bold] {escape(str(written))}")
    return code


def _check_new_run(graph: AimeGraph, thread_id: str) -> list[str]:
    """A new goal goes to a new thread, or to one whose run has ended (it starts a
    new run there); a run that has not ended is carried on or cancelled first.
    Returns the thread's earlier requests."""
    settle_pending_cancel(graph, thread_id)
    snapshot = graph.get_state(run_config(thread_id))
    if snapshot.created_at and not has_ended(snapshot):
        raise CliError(unfinished_run(thread_id, snapshot), EXIT_USAGE)
    messages = snapshot.values.get("messages") or []
    return [m.text for m in messages if isinstance(m, HumanMessage)]
