"""``aimegraph resume | note | fork | cancel``: carry a thread on (live, under its
lease, see :mod:`aimegraph.cli.live`; or, when another process runs it and waits on a
human, hand that process the answer), re-run it from a checkpoint, end it, or send a
note to its running actors."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, StateSnapshot
from rich.console import Console
from typing_extensions import Unpack

from aimegraph.answers import AnswerError, HandedOver, NoSuchInterruptError, hold_or_hand_over
from aimegraph.checkpoints import (
    RunSettings,
    SettingsNotStoredError,
    ThreadBusyError,
    ThreadLease,
    ThreadNotFoundError,
    latest_settings,
    run_config,
    run_state,
)
from aimegraph.checkpoints.lease import AnswerNotTakenError
from aimegraph.checkpoints.runs import GivenSettings
from aimegraph.cli.live import execute, hold
from aimegraph.cli.options import (
    broker_options,
    durability_option,
    rebuild_options,
    wait_option,
)
from aimegraph.cli.report import report_cancel, show_interrupts
from aimegraph.cli.support import (
    EXIT_BUSY,
    EXIT_CODES,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    AddCommand,
    CliError,
    checked_config,
    config_json,
    skill_folders,
)
from aimegraph.state import PlanUpdate, Task
from aimegraph.steering import (
    AnswerNeededError,
    NothingToResumeError,
    cancel_run,
    reader_graph,
    resume_inputs,
    run_graph,
    run_servers,
    run_tools,
    send_note,
    settle_pending_cancel,
)
from aimegraph.waits import overdue_answers

__all__ = ["carried_settings", "register"]

ANSWER_HINTS = {
    "answer": "answer it with --answer TEXT",
    "decision": "--approve or --reject REASON (or --edit-args JSON for a tool call, "
    "--plan-file JSON for a plan)",
    "escalation": "--answer TEXT [--task ID] for the failed task, --plan-file JSON, "
    "--replan [NOTE], or --reject REASON to give up",
}

RESUME_FLAGS = (
    "--model SPEC (and --workspace DIR, --tools MODULE:ATTR, --mcp FILE, --config JSON as needed)"
)


def register(command: AddCommand) -> None:
    """Add ``resume``, ``note``, ``fork`` and ``cancel``."""
    resume = command("resume", cmd_resume)
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
    wait_option(resume)
    broker_options(resume, "of a distributed run")

    note = command("note", cmd_note)
    note.add_argument("thread")
    note.add_argument("text")

    fork = command("fork", cmd_fork)
    fork.add_argument("thread")
    fork.add_argument("checkpoint", help="checkpoint id from `aimegraph history`")
    rebuild_options(fork)
    durability_option(fork)
    wait_option(fork)

    cancel = command("cancel", cmd_cancel)
    cancel.add_argument("thread")
    cancel.add_argument(
        "--wait", action="store_true", help="wait until the live process running it has stopped"
    )
    cancel.add_argument("--reason", help="why (shown as the run's reason)")
    broker_options(cancel, "of a distributed run")


def cmd_resume(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    settings = _run_settings(saver, args, console)
    from aimegraph.distributed.records import find_run

    if (record := find_run(args.checkpoints, args.thread)) is not None:  # workers carry on
        from aimegraph.cli.distributed import resume_distributed

        # Read here only: the workers carry the run on with their own graph builder,
        # which may be what added the middleware and guardrails.
        reader = run_graph(replace(settings, unstored=()), saver, args.memory_store())
        snapshot = reader.get_state(run_config(args.thread))
        return resume_distributed(args, record, _inputs(snapshot, args, console), console)
    graph = run_graph(settings, saver, args.memory_store())
    held = _hold_or_hand_over(graph, saver, args, console)
    if isinstance(held, HandedOver):
        if args.json:
            print(json.dumps({"thread_id": args.thread, "handed_to": held.holder}))
        else:
            console.print(f"{held}: it carries the run on", markup=False)
            console.print(f"follow it with: aimegraph show {args.thread}", markup=False)
        return 0
    with held as lease:
        if settle_pending_cancel(graph, args.thread):
            raise CliError(f"thread {args.thread!r} was cancelled: nothing to resume", 6)
        snapshot = graph.get_state(run_config(args.thread))
        inputs = _inputs(snapshot, args, console)
        _check_tools(snapshot, settings)
        return execute(graph, inputs, lease, settings, args, console)


def _hold_or_hand_over(
    graph: Any, saver: BaseCheckpointSaver[Any], args: argparse.Namespace, console: Console
) -> ThreadLease | HandedOver:
    """The thread's lease; or, when another process runs it and waits on a human,
    the answer given handed to it (checked as a resume here checks it)."""
    answering = _answer(args) is not None
    try:
        return hold_or_hand_over(
            saver,
            args.thread,
            lambda: graph.get_state(run_config(args.thread)),
            (lambda snapshot: _inputs(snapshot, args, console)) if answering else None,
        )
    except AnswerNotTakenError as exc:
        raise CliError(str(exc), EXIT_BUSY) from exc
    except NoSuchInterruptError as exc:  # the wait ended before the answer came
        raise CliError(str(exc), EXIT_NOT_FOUND) from exc
    except ThreadBusyError:
        return hold(saver, args.thread, args)  # exit 9 naming the holder, or --wait


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
    settings = _run_settings(saver, args, console)
    graph = run_graph(settings, saver, args.memory_store())
    config = run_config(args.thread, checkpoint_id=args.checkpoint)
    if saver.get_tuple(config) is None:
        raise CliError(f"no checkpoint {args.checkpoint!r} in thread {args.thread!r}", 6)
    with hold(saver, args.thread, args) as lease:
        _check_tools(graph.get_state(config), settings)
        if not args.json:
            console.print(f"forking {args.thread} from checkpoint {args.checkpoint}", markup=False)
        return execute(graph, None, lease, settings, args, console, checkpoint_id=args.checkpoint)


def cmd_cancel(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    from aimegraph.distributed.records import find_run

    if (record := find_run(args.checkpoints, args.thread)) is not None:
        from aimegraph.cli.distributed import cancel_distributed

        return cancel_distributed(args, record, saver, console)
    try:
        outcome = cancel_run(reader_graph(saver), args.thread, wait=args.wait, reason=args.reason)
    except ThreadNotFoundError as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from exc
    except NothingToResumeError as exc:
        raise CliError(f"thread {args.thread!r}: {exc}", EXIT_NOT_FOUND) from exc
    report_cancel(args, args.thread, outcome, console, follow=f"aimegraph show {args.thread}")
    return 0


def _inputs(snapshot: StateSnapshot, args: argparse.Namespace, console: Console) -> Any:
    """What carries the thread on (see :func:`aimegraph.steering.resume_inputs`), or
    the CLI's exit: 6 when the run has ended, 5 (interrupts shown) when it waits for
    an answer that was not given."""
    answer = _answer(args)
    if snapshot.interrupts and answer is None and (overdue := overdue_answers(snapshot.interrupts)):
        return Command(resume=overdue)  # unanswered in time: their defaults
    try:
        return resume_inputs(snapshot, answer, args.interrupt)
    except NothingToResumeError as exc:
        raise CliError(
            f"thread {args.thread!r} has nothing to resume (status: {run_state(snapshot)})",
            EXIT_NOT_FOUND,
        ) from exc
    except AnswerNeededError as exc:
        show_interrupts(snapshot.interrupts, console)
        raise CliError(
            "the run waits for a human: pass --approve, --reject or --answer", EXIT_CODES["paused"]
        ) from exc
    except NoSuchInterruptError as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from exc
    except AnswerError as exc:
        raise CliError(f"{exc}: {ANSWER_HINTS[exc.needs]}", EXIT_USAGE) from exc


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


def _run_settings(
    saver: BaseCheckpointSaver[Any], args: argparse.Namespace, console: Console
) -> RunSettings:
    """The settings to carry on a thread with: the stored ones (whichever entry point
    started it, Python included), with the flags given on the command line as
    explicit overrides (:func:`carried_settings`)."""
    try:
        stored: RunSettings | None = latest_settings(saver, args.thread)
    except SettingsNotStoredError:
        stored = None
    except ThreadNotFoundError as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from exc
    fields = config_json(args.config)
    if args.workspace:
        fields["workspace"] = args.workspace
    if args.skills:
        fields["skills"] = skill_folders(args.skills)
    return carried_settings(
        args.thread,
        stored,
        model=args.model,
        config=fields,
        tools=args.tools,
        mcp=args.mcp,
        prompts=args.prompts,
        agents=args.agents,
        knowledge=args.knowledge,
        response_format=args.response_format,
    )


def carried_settings(
    thread_id: str,
    stored: RunSettings | None,
    *,
    config: dict[str, Any],
    **given: Unpack[GivenSettings],
) -> RunSettings:
    """The settings a thread goes on with (``resume``, ``fork``, and ``run`` of a new
    goal on it): the ``stored`` ones (None: the thread stores none) with each one given
    over them (None or empty: the stored one kept) and ``config`` over the stored
    config field by field; the changes are printed as one ``overrides:`` line. A model
    spec is required only where none was stored. What the thread was built with as
    objects (``RunSettings.unstored``) stays unstored, and refused by
    :func:`aimegraph.steering.run_graph`, unless a flag gives it again
    (:meth:`RunSettings.carried_on`)."""
    if given.get("model") is None and (stored is None or stored.model is None):
        why = (
            "stores no model spec (started from Python with a chat model object)"
            if stored is not None
            else "stores no run settings (started by an older version, or by a graph "
            "aimegraph did not build)"
        )
        raise CliError(
            f"thread {thread_id!r} {why}: give the settings it runs with: {RESUME_FLAGS}",
            EXIT_USAGE,
        )
    fields = stored.config.model_dump() if stored is not None else {}
    checked = checked_config({**fields, **config})
    settings = (stored or RunSettings(model=None, config=checked)).carried_on(checked, **given)
    if stored is None:
        return settings
    if changes := stored.changes_to(settings):
        Console(stderr=True, highlight=False).print(
            f"overrides: {'; '.join(changes)}", markup=False, soft_wrap=True
        )
    return settings


def _check_tools(snapshot: StateSnapshot, settings: RunSettings) -> None:
    """Refuse to carry on a plan whose unfinished tasks (or a plan waiting for
    approval) use tool bundles the rebuilt registry lacks: their actors would fail on
    every call of those tools."""
    bundles = [*run_tools(settings).bundles, *run_servers(settings)]
    missing: dict[str, list[str]] = {}
    for task_id, wanted in _planned_bundles(snapshot):
        for bundle in wanted:
            if bundle not in bundles:
                missing.setdefault(bundle, []).append(task_id)
    if missing:
        named = "; ".join(f"{b!r} (tasks {', '.join(ids)})" for b, ids in missing.items())
        raise CliError(
            f"the plan uses tool bundles this resume does not have: {named}. Give the "
            "application's tools with --tools MODULE:ATTR, its MCP servers with --mcp FILE "
            "(available bundles: "
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
