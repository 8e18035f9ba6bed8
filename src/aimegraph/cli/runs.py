"""``aimegraph run | demo | resume | note | fork``: start a run, or carry a thread on,
and follow it live until it ends or pauses; send a note to a running one."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, StateSnapshot
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import (
    RunSettings,
    SettingsNotStoredError,
    ThreadNotFoundError,
    latest_settings,
    new_thread_id,
    run_config,
    run_state,
)
from aimegraph.checkpoints.delta import with_finished_tasks
from aimegraph.cli.knowledge import add_knowledge_option
from aimegraph.cli.options import (
    broker_options,
    durability_option,
    rebuild_options,
    run_options,
)
from aimegraph.cli.report import report, show_interrupts
from aimegraph.cli.support import (
    EXIT_CODES,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    AddCommand,
    CliError,
    checked_config,
    config_from_args,
    config_json,
    run_prompts,
    taken_thread,
)
from aimegraph.console import LiveProgress
from aimegraph.graphs.aime import AimeGraph
from aimegraph.nodes.planner import resolve_goal
from aimegraph.state import PlanUpdate, Task
from aimegraph.steering import (
    DEMO_SCENARIO,
    AnswerError,
    NoSuchInterruptError,
    await_overdue,
    overdue_answers,
    prepare_demo,
    resume_command,
    run_graph,
    run_tools,
    send_note,
)

__all__ = ["execute", "register"]

ANSWER_HINTS = {
    "answer": "answer it with --answer TEXT",
    "decision": "--approve or --reject REASON (or --edit-args JSON for a tool call, "
    "--plan-file JSON for a plan)",
    "escalation": "--answer TEXT [--task ID] for the failed task, --plan-file JSON, "
    "--replan [NOTE], or --reject REASON to give up",
}

RESUME_FLAGS = "--model SPEC (and --workspace DIR, --tools MODULE:ATTR, --config JSON as needed)"


def register(command: AddCommand) -> None:
    """Add ``run``, ``demo``, ``resume`` and ``fork``."""
    run = command("run", cmd_run, "Run a goal to completion (or until a human must answer).")
    run_options(run)
    durability_option(run)
    add_knowledge_option(run)

    demo = command("demo", cmd_demo, "Run the bundled offline demo (scripted model, real tools).")
    demo.add_argument("--thread", help="thread id (default: a new one)")
    durability_option(demo)

    resume = command("resume", cmd_resume, "Resume a paused or interrupted thread.")
    resume.add_argument("thread")
    answer = resume.add_mutually_exclusive_group()
    answer.add_argument("--approve", action="store_true", help="approve the plan or tool call")
    answer.add_argument("--reject", metavar="REASON", help="reject the plan / deny the tool call")
    answer.add_argument(
        "--answer",
        metavar="TEXT",
        help="answer an ask_human question, or answer for the task an escalation is about",
    )
    answer.add_argument(
        "--replan",
        metavar="NOTE",
        nargs="?",
        const="",
        help="answer an escalation: let the planner revise the plan once more (with a note)",
    )
    answer.add_argument(
        "--plan-file", metavar="JSON", help="approve an edited plan (PlanUpdate JSON)"
    )
    answer.add_argument(
        "--edit-args",
        metavar="JSON",
        help="run the tool call waiting for approval with these arguments instead (a JSON "
        "object, checked against the tool's schema)",
    )
    resume.add_argument(
        "--interrupt", metavar="ID", help="answer only this interrupt (default: all)"
    )
    resume.add_argument(
        "--task", metavar="ID", help="with --answer: the failed task an escalation's answer is for"
    )
    rebuild_options(resume)
    durability_option(resume)
    broker_options(resume, "of a distributed run")

    note = command(
        "note",
        cmd_note,
        "Send a note to a thread's run: its running actors read it at their next step, "
        "its planner at its next call.",
    )
    note.add_argument("thread")
    note.add_argument("text")

    fork = command("fork", cmd_fork, "Re-run a thread from one of its checkpoints.")
    fork.add_argument("thread")
    fork.add_argument("checkpoint", help="checkpoint id from `aimegraph history`")
    rebuild_options(fork)
    durability_option(fork)


def cmd_run(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    thread_id = args.thread or new_thread_id()
    if (stored := saver.get_tuple(run_config(thread_id))) is not None:
        raise CliError(taken_thread(thread_id, stored), EXIT_USAGE)
    config = config_from_args(args, thread_id)
    # A goal the run would refuse is refused before it is stored in a checkpoint.
    resolve_goal({"goal": args.goal}, max_chars=config.max_goal_chars)
    settings = RunSettings(
        model=args.model,
        config=config,
        tools=tuple(args.tools),
        prompts=run_prompts(args, console, online=config.optimize_online),
        agents=args.agents,
        knowledge=args.knowledge,
    )
    graph = run_graph(settings, saver, args.memory_store())
    return execute(graph, {"goal": args.goal}, thread_id, settings, args, console)


def cmd_demo(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    thread_id = args.thread or new_thread_id("demo-")
    settings, goal = prepare_demo(thread_id)
    workspace = settings.config.workspace
    if not args.json:
        console.print(f"[bold]goal:[/bold] {escape(goal)}")
        console.print(f"workspace: {workspace} (sales.csv copied in)\n", markup=False)
    graph = run_graph(settings, saver, args.memory_store())
    code = execute(graph, {"goal": goal}, thread_id, settings, args, console)
    if not args.json:
        written = workspace / "report.md"
        if written.exists():
            console.print(f"[bold]report:[/bold] {escape(str(written))}")
    return code


def cmd_resume(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    settings = _run_settings(saver, args)
    graph = run_graph(settings, saver, args.memory_store())
    snapshot = graph.get_state(run_config(args.thread))
    if not snapshot.next and not snapshot.interrupts:
        raise CliError(
            f"thread {args.thread!r} has nothing to resume (status: {run_state(snapshot)})",
            EXIT_NOT_FOUND,
        )
    _check_tools(snapshot, settings)
    answer = _answer(args)
    overdue = overdue_answers(snapshot.interrupts)
    if snapshot.interrupts and answer is None and overdue:
        inputs: Any = Command(resume=overdue)  # unanswered in time: their defaults
    elif snapshot.interrupts:
        if answer is None:
            show_interrupts(snapshot.interrupts, console)
            raise CliError("the run waits for a human: pass --approve, --reject or --answer", 5)
        try:
            inputs = resume_command(snapshot.interrupts, answer, args.interrupt)
        except NoSuchInterruptError as exc:
            raise CliError(str(exc), EXIT_NOT_FOUND) from exc
        except AnswerError as exc:
            raise CliError(f"{exc}: {ANSWER_HINTS[exc.needs]}", EXIT_USAGE) from exc
    else:
        inputs = None  # stopped mid-way (crash, kill): carry on from the last checkpoint
    from aimegraph.distributed.records import find_run

    if (record := find_run(args.checkpoints, args.thread)) is not None:  # workers carry on
        from aimegraph.cli.distributed import resume_distributed

        return resume_distributed(args, record, inputs, console)
    return execute(graph, inputs, args.thread, settings, args, console)


def cmd_note(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    if saver.get_tuple(run_config(args.thread)) is None:
        raise CliError(f"no thread {args.thread!r} in this checkpoint store", EXIT_NOT_FOUND)
    note = send_note(args.memory_store(), args.thread, args.text)
    if args.json:
        print(json.dumps({"thread_id": args.thread, "note": note.key, "at": note.at}))
    else:
        console.print(
            f"note sent to {args.thread}: running actors read it at their next step",
            markup=False,
        )
    return 0


def cmd_fork(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    settings = _run_settings(saver, args)
    graph = run_graph(settings, saver, args.memory_store())
    config = run_config(args.thread, checkpoint_id=args.checkpoint)
    if saver.get_tuple(config) is None:
        raise CliError(f"no checkpoint {args.checkpoint!r} in thread {args.thread!r}", 6)
    _check_tools(graph.get_state(config), settings)
    if not args.json:
        console.print(f"forking {args.thread} from checkpoint {args.checkpoint}", markup=False)
    return execute(graph, None, args.thread, settings, args, console, checkpoint_id=args.checkpoint)


def execute(
    graph: AimeGraph,
    inputs: Any,
    thread_id: str,
    settings: RunSettings,
    args: argparse.Namespace,
    console: Console,
    checkpoint_id: str | None = None,
) -> int:
    """Run ``graph`` on the thread, live (or quietly with ``--json``), then print where
    it ended; returns the exit code of its status."""
    config = run_config(thread_id, settings, checkpoint_id)
    if not args.json:
        console.print(f"[bold]thread:[/bold] {escape(thread_id)}")
    _follow(graph, inputs, config, thread_id, args, console)
    # An unattended run: an escalation nobody answers by its deadline takes its default.
    while overdue := await_overdue(lambda: graph.get_state(run_config(thread_id)).interrupts):
        if not args.json:
            console.print("no answer to the escalation in time: taking its default", markup=False)
        _follow(graph, overdue, run_config(thread_id, settings), thread_id, args, console)
    snapshot = graph.get_state(run_config(thread_id))
    if isinstance(graph.checkpointer, BaseCheckpointSaver):  # paused: its step so far
        snapshot = with_finished_tasks(snapshot, graph.checkpointer)
    state = report(snapshot, thread_id, args, console)
    if not args.json:
        console.print(
            f"inspect with: aimegraph show {thread_id}   (history: aimegraph history {thread_id})"
        )
    return EXIT_CODES.get(state, 1)


def _follow(
    graph: AimeGraph,
    inputs: Any,
    config: RunnableConfig,
    thread_id: str,
    args: argparse.Namespace,
    console: Console,
) -> None:
    """Run ``graph`` until it ends or pauses, showing its progress live (unless --json)."""
    chunks: Iterator[Any] = graph.stream(
        inputs,
        config,
        stream_mode=["updates", "custom"],
        subgraphs=True,
        durability=getattr(args, "durability", "async"),
    )
    if args.json:
        for _ in chunks:
            pass
        return
    with LiveProgress(console, title=f"aimegraph {thread_id}") as live:
        live.follow(chunks)


def _answer(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.approve:
        return {"action": "approve"}
    if args.reject is not None:
        return {"action": "reject", "reason": args.reject}
    if args.answer is not None:
        return {"answer": args.answer, **({"task_id": args.task} if args.task else {})}
    if args.replan is not None:
        return {"action": "replan", "note": args.replan}
    if args.plan_file is not None:
        try:
            plan = json.loads(Path(args.plan_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CliError(f"cannot read --plan-file: {exc}", EXIT_USAGE) from exc
        except ValueError as exc:
            raise CliError(f"--plan-file {args.plan_file} is not JSON: {exc}", EXIT_USAGE) from exc
        return {"action": "edit", "plan": plan}
    if args.edit_args is not None:
        try:
            edited = json.loads(args.edit_args)
        except ValueError as exc:
            raise CliError(f"--edit-args is not JSON: {exc}", EXIT_USAGE) from exc
        if not isinstance(edited, dict):
            raise CliError("--edit-args must be a JSON object of arguments", EXIT_USAGE)
        return {"action": "edit", "args": edited}
    return None


def _run_settings(saver: BaseCheckpointSaver[Any], args: argparse.Namespace) -> RunSettings:
    """The settings to carry on a thread with: the stored ones, with the flags given
    on the command line in their place; a thread started from Python stores none, so
    there the flags are required."""
    try:
        stored: RunSettings | None = latest_settings(saver, args.thread)
    except SettingsNotStoredError as exc:
        stored = None
        if args.model is None:
            raise CliError(
                f"{exc}: give the settings it runs with: {RESUME_FLAGS}", EXIT_USAGE
            ) from exc
    except ThreadNotFoundError as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from exc
    fields = stored.config.model_dump() if stored is not None else {}
    fields.update(config_json(args.config))
    if args.workspace:
        fields["workspace"] = args.workspace
    return RunSettings(
        model=args.model or (stored.model if stored else DEMO_SCENARIO),
        config=checked_config(fields),
        tools=tuple(args.tools) if args.tools else (stored.tools if stored else ()),
        prompts=stored.prompts if stored else None,
        agents=stored.agents if stored else None,
        knowledge=stored.knowledge if stored else None,
    )


def _check_tools(snapshot: StateSnapshot, settings: RunSettings) -> None:
    """Refuse to carry on a plan whose unfinished tasks (or a plan waiting for
    approval) use tool bundles the rebuilt registry lacks: their actors would fail on
    every call of those tools."""
    bundles = run_tools(settings).bundles
    missing: dict[str, list[str]] = {}
    for task_id, wanted in _planned_bundles(snapshot):
        for bundle in wanted:
            if bundle not in bundles:
                missing.setdefault(bundle, []).append(task_id)
    if missing:
        named = "; ".join(f"{b!r} (tasks {', '.join(ids)})" for b, ids in missing.items())
        raise CliError(
            f"the plan uses tool bundles this resume does not have: {named}. Give the "
            "application's tools with --tools MODULE:ATTR (available bundles: "
            f"{', '.join(bundles)})",
            EXIT_USAGE,
        )


def _planned_bundles(snapshot: StateSnapshot) -> Iterator[tuple[str, list[str]]]:
    """(task id, bundles) of the unfinished tasks and of a plan awaiting approval."""
    tasks: dict[str, Task] = snapshot.values.get("tasks") or {}
    for task in tasks.values():
        if task.status not in ("completed", "skipped"):
            yield task.id, list(task.tool_bundles)
    for item in snapshot.interrupts:
        draft = item.value.get("plan") if isinstance(item.value, dict) else None
        if draft is None:
            continue
        plan = PlanUpdate.model_validate(draft) if isinstance(draft, dict) else draft
        for spec in plan.tasks:
            yield spec.id, list(spec.tool_bundles)
