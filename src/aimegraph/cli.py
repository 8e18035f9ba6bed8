"""``aimegraph``: run, demo, resume, inspect and draw workflows from the terminal.

Exit codes tell outcomes apart: 0 succeeded, 1 failed, 2 usage error, 3 rejected,
4 budget exhausted, 5 paused (waiting for a human: see ``aimegraph resume``),
6 unknown thread or nothing to resume.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.load import dumpd
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from langgraph.types import StateSnapshot
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import (
    DEFAULT_CHECKPOINT_URL,
    CheckpointConnectionError,
    MissingCheckpointBackendError,
    RunSettings,
    SettingsNotStoredError,
    ThreadNotFoundError,
    latest_settings,
    list_threads,
    new_thread_id,
    open_checkpointer,
    redact_url,
    run_config,
    run_state,
)
from aimegraph.checkpoints.delta import with_finished_tasks
from aimegraph.cli_support import (
    EXIT_CODES,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    CliError,
    checked_config,
    config_from_args,
    config_json,
    run_prompts,
)
from aimegraph.config import AimeConfig
from aimegraph.console import LiveProgress
from aimegraph.drawing import GraphvizNotFoundError
from aimegraph.graphs.aime import AimeGraph, build_aime_graph
from aimegraph.sandbox import SandboxUnavailable, open_sandbox
from aimegraph.state import PlanUpdate, Task, render_checklist
from aimegraph.steering import (
    DEMO_SCENARIO,
    WORKSPACES,
    AnswerError,
    NoSuchInterruptError,
    prepare_demo,
    resume_command,
    run_graph,
    run_tools,
)

ANSWER_HINTS = {
    "answer": "answer it with --answer TEXT",
    "decision": "--approve or --reject REASON",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    console = Console(stderr=args.json, highlight=False)
    errors = Console(stderr=True, highlight=False)
    try:
        with _tracing(args.otlp), ExitStack() as stack:
            checkpointer = _open_store(stack, args.checkpoints)
            args.memory_store = lambda: _open_memory(stack, args)
            return int(args.handler(args, checkpointer, console))
    except CliError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        return exc.code
    except (ValueError, SandboxUnavailable) as exc:  # bad URLs, specs, config values, tools
        errors.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        return EXIT_USAGE
    except ImportError as exc:
        # Whatever path reached a missing extra (a flag, a --config field such as
        # optimize_online, a stored run's settings), the user's fix is one pip install.
        if (message := missing_extra_message(exc)) is None:
            raise
        errors.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
        return EXIT_USAGE


EXTRA_OF_MODULE = {
    "gepa": "optimize",
    "starlette": "dashboard",
    "sse_starlette": "dashboard",
    "uvicorn": "dashboard",
    "celery": "distributed",
    "kombu": "distributed",
    "redis": "distributed",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "langgraph.checkpoint.postgres": "postgres",
    "langgraph.store.postgres": "postgres",
    "sentence_transformers": "semantic",
    "torch": "semantic",
    "graphviz": "draw",
    "opentelemetry": "tracing",
    "openinference": "tracing",
    "llama_cpp": "local",
}
"""Modules only an extra installs, by the extra (``pip install 'aimegraph[extra]'``)."""


def missing_extra_message(exc: ImportError) -> str | None:
    """One line saying which extra to install for ``exc``: its own message when it
    already names the ``pip install``, else the extra of the missing module;
    ``None`` for a module no extra provides (a bug, or the user's own module)."""
    text = " ".join(str(exc).split())
    if "pip install 'aimegraph[" in text:
        return text
    name = exc.name or ""
    for module, extra in EXTRA_OF_MODULE.items():
        if name == module or name.startswith(module + "."):
            return f"{text} (pip install 'aimegraph[{extra}]')"
    return None


STORE_ERRORS = (CheckpointConnectionError, MissingCheckpointBackendError, sqlite3.Error, OSError)


def _open_store(stack: ExitStack, url: str) -> BaseCheckpointSaver[Any]:
    """The checkpointer for ``url``, closed with ``stack``; a store that cannot be
    opened (server down, bad path, missing extra) is a usage error."""
    try:
        return stack.enter_context(open_checkpointer(url))
    except STORE_ERRORS as exc:
        reason, where = " ".join(str(exc).split()), redact_url(url)
        message = reason if where in reason else f"cannot open checkpoint store {where}: {reason}"
        raise CliError(message, EXIT_USAGE) from exc


def _open_memory(stack: ExitStack, args: argparse.Namespace) -> BaseStore:
    """The long-term memory store (``--store``, default beside the checkpoints)."""
    from aimegraph.memory import open_store
    from aimegraph.memory.commands import default_store_url

    url = args.store or default_store_url(args.checkpoints)
    try:
        return stack.enter_context(
            open_store(url, embeddings=args.embeddings, ttl_days=args.memory_ttl_days)
        )
    except (*STORE_ERRORS, ImportError) as exc:
        reason = " ".join(str(exc).split())
        raise CliError(f"cannot open memory store {redact_url(url)}: {reason}", EXIT_USAGE) from exc


def cmd_memory(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    from aimegraph.memory.commands import run_memory_command

    return run_memory_command(args, args.memory_store(), console)


def cmd_optimize(
    args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console
) -> int:
    from aimegraph.optimizer.optimize_command import run_optimize_command

    return run_optimize_command(args, console)


def cmd_prompts(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    from aimegraph.optimizer.prompt_commands import run_prompts_command

    return run_prompts_command(args, console)


@contextmanager
def _tracing(endpoint: str | None) -> Iterator[None]:
    """OpenTelemetry spans of the command's runs to ``endpoint`` (OTLP/HTTP)."""
    if not endpoint:
        yield
        return
    try:
        from aimegraph.tracing import enable_tracing
    except ImportError as exc:
        raise CliError(
            f"--otlp needs: pip install 'aimegraph[tracing]' ({exc})", EXIT_USAGE
        ) from exc
    tracing = enable_tracing(endpoint)
    try:
        yield
    finally:
        tracing.shutdown()


# --- commands ---


def cmd_run(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    thread_id = args.thread or new_thread_id()
    if saver.get_tuple(run_config(thread_id)) is not None:
        raise CliError(f"thread {thread_id!r} exists; resume it or pick a new id", EXIT_USAGE)
    config = config_from_args(args, thread_id)
    settings = RunSettings(
        model=args.model,
        config=config,
        tools=tuple(args.tools),
        prompts=run_prompts(args, console, online=config.optimize_online),
        agents=args.agents,
    )
    graph = run_graph(settings, saver, args.memory_store())
    return _execute(graph, {"goal": args.goal}, thread_id, settings, args, console)


def cmd_demo(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    thread_id = args.thread or new_thread_id("demo-")
    settings, goal = prepare_demo(thread_id, sandbox=args.sandbox)
    workspace = settings.config.workspace
    try:
        # The demo's python calls need the sandbox: say so now, not as five failed calls.
        sandbox = open_sandbox(settings.config.sandbox).check()
    except SandboxUnavailable as exc:
        raise CliError(f"{exc} (here: aimegraph demo --sandbox none)", EXIT_USAGE) from exc
    if not args.json:
        console.print(f"[bold]goal:[/bold] {escape(goal)}")
        console.print(f"workspace: {workspace} (sales.csv copied in)", markup=False)
        console.print(f"sandbox: {sandbox}\n", markup=False)
    graph = run_graph(settings, saver, args.memory_store())
    code = _execute(graph, {"goal": goal}, thread_id, settings, args, console)
    if not args.json:
        report = workspace / "report.md"
        if report.exists():
            console.print(f"[bold]report:[/bold] {escape(str(report))}")
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
    if snapshot.interrupts:
        if answer is None:
            _show_interrupts(snapshot.interrupts, console)
            raise CliError("the run waits for a human: pass --approve, --reject or --answer", 5)
        try:
            inputs: Any = resume_command(snapshot.interrupts, answer, args.interrupt)
        except NoSuchInterruptError as exc:
            raise CliError(str(exc), EXIT_NOT_FOUND) from exc
        except AnswerError as exc:
            raise CliError(f"{exc}: {ANSWER_HINTS[exc.needs]}", EXIT_USAGE) from exc
    else:
        inputs = None  # stopped mid-way (crash, kill): carry on from the last checkpoint
    from aimegraph.distributed.records import find_run

    if (record := find_run(args.checkpoints, args.thread)) is not None:  # workers carry on
        return int(_distributed("resume_distributed")(args, record, inputs, console))
    return _execute(graph, inputs, args.thread, settings, args, console)


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
        return int(_distributed("show_record")(record, args, console))
    snapshot = _reader(saver, args.thread).get_state(run_config(args.thread))
    # A run stopped mid-step shows the tasks that step had already finished.
    _report(with_finished_tasks(snapshot, saver), args.thread, args, console)
    return 0


def cmd_wait(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    record = _distributed("wait_record")(args)
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
                "status": run_state(snap),
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


def cmd_fork(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    settings = _run_settings(saver, args)
    graph = run_graph(settings, saver, args.memory_store())
    config = run_config(args.thread, checkpoint_id=args.checkpoint)
    if saver.get_tuple(config) is None:
        raise CliError(f"no checkpoint {args.checkpoint!r} in thread {args.thread!r}", 6)
    _check_tools(graph.get_state(config), settings)
    if not args.json:
        console.print(f"forking {args.thread} from checkpoint {args.checkpoint}", markup=False)
    return _execute(
        graph, None, args.thread, settings, args, console, checkpoint_id=args.checkpoint
    )


def cmd_dashboard(
    args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console
) -> int:
    try:
        from aimegraph.dashboard.server import cmd_dashboard as serve_dashboard
    except ImportError as exc:
        raise CliError(
            f"the dashboard needs: pip install 'aimegraph[dashboard]' ({exc})", EXIT_USAGE
        ) from exc
    return serve_dashboard(args, saver, console)


def _distributed(name: str) -> Any:
    """A handler of ``aimegraph.distributed.commands`` (imported on use: it needs Celery)."""
    try:
        from aimegraph.distributed import commands
    except ImportError as exc:
        raise CliError(
            f"distributed runs need: pip install 'aimegraph[distributed]' ({exc})", EXIT_USAGE
        ) from exc
    return getattr(commands, name)


def _distributed_command(name: str) -> Any:
    def handler(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
        return int(_distributed(name)(args, saver, console))

    return handler


def cmd_draw(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    from aimegraph.drawing import draw, draw_plan

    try:
        if args.plan:
            snapshot = _reader(saver, args.plan).get_state(run_config(args.plan))
            drawing = draw_plan(snapshot.values, args.output, format=args.format)
        else:
            graph = build_aime_graph(args.model, config=AimeConfig(workspace=WORKSPACES / "draw"))
            drawing = draw(graph, args.output, format=args.format, xray=args.xray)
    except GraphvizNotFoundError as exc:
        raise CliError(f"{exc} (or pass --format mermaid)", EXIT_USAGE) from exc
    if args.output:
        console.print(f"wrote {args.output}", markup=False)
    else:
        data = drawing.data
        sys.stdout.write(data if isinstance(data, str) else data.decode("latin-1"))
    return 0


# --- running and printing ---


def _execute(
    graph: AimeGraph,
    inputs: Any,
    thread_id: str,
    settings: RunSettings,
    args: argparse.Namespace,
    console: Console,
    checkpoint_id: str | None = None,
) -> int:
    config = run_config(thread_id, settings, checkpoint_id)
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
    else:
        console.print(f"[bold]thread:[/bold] {escape(thread_id)}")
        with LiveProgress(console, title=f"aimegraph {thread_id}") as live:
            live.follow(chunks)
    snapshot = graph.get_state(run_config(thread_id))
    state = _report(snapshot, thread_id, args, console)
    if not args.json:
        console.print(
            f"inspect with: aimegraph show {thread_id}   (history: aimegraph history {thread_id})"
        )
    return EXIT_CODES.get(state, 1)


def _report(
    snapshot: StateSnapshot, thread_id: str, args: argparse.Namespace, console: Console
) -> str:
    """Print a thread's state (as JSON with --json) and what to do next; returns its status."""
    state = run_state(snapshot)
    summary = _summary(snapshot.values, thread_id, state)
    summary["interrupts"] = [{"id": i.id, **i.value} for i in snapshot.interrupts]
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
        return state
    _print_summary(summary, console)
    if snapshot.interrupts:
        _show_interrupts(snapshot.interrupts, console)
        console.print(
            f"resume with: aimegraph resume {thread_id} --approve "
            "(or --reject REASON, --answer TEXT)"
        )
    elif snapshot.next:
        console.print(
            f"stopped before finishing (next: {', '.join(snapshot.next)}); "
            f"carry on with: aimegraph resume {thread_id}"
        )
    return state


def _summary(values: dict[str, Any], thread_id: str, state: str) -> dict[str, Any]:
    tasks = values.get("tasks") or {}
    usage = values.get("usage")
    verdict = values.get("verdict")
    return {
        "thread_id": thread_id,
        "status": state,
        "reason": values.get("reason"),
        "goal": values.get("goal"),
        "final_answer": values.get("final_answer"),
        "checklist": render_checklist(tasks),
        "tasks": {tid: t.model_dump(mode="json") for tid, t in tasks.items()},
        "verdict": verdict.model_dump(mode="json") if verdict is not None else None,
        "usage": usage.model_dump(mode="json") if usage is not None else None,
        "replans": values.get("replans", 0),
        "prompt_version": values.get("prompt_version"),
    }


def _print_summary(summary: dict[str, Any], console: Console) -> None:
    console.print(
        f"\n[bold]status:[/bold] {summary['status']}"
        + (f" ({escape(summary['reason'])})" if summary.get("reason") else "")
    )
    console.print(summary["checklist"], markup=False)
    if summary.get("verdict"):
        v = summary["verdict"]
        console.print(
            f"[bold]verdict:[/bold] {'passed' if v['passed'] else 'rejected'}: "
            + escape(v["reasoning"])
        )
    if summary.get("usage"):
        u = summary["usage"]
        console.print(
            f"[bold]usage:[/bold] {u['llm_calls']} LLM calls, {u['input_tokens']} in / "
            f"{u['output_tokens']} out tokens, {u['tool_calls']} tool calls"
        )
    if summary.get("final_answer"):
        console.print("\n[bold]final answer:[/bold]")
        console.print(summary["final_answer"], markup=False)


def _show_interrupts(interrupts: Sequence[Any], console: Console) -> None:
    for item in interrupts:
        value = dict(item.value)
        kind = value.pop("kind", "interrupt")
        console.print(f"\n[yellow]waiting ({kind})[/yellow] id={item.id}")
        if kind == "approve_plan":
            console.print(value.get("checklist", ""), markup=False)
            if value.get("error"):
                console.print(f"[red]last edit was invalid:[/red] {escape(value['error'])}")
        else:
            console.print(json.dumps(dumpd(value), indent=1, default=str), markup=False)


def _answer(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.approve:
        return {"action": "approve"}
    if args.reject is not None:
        return {"action": "reject", "reason": args.reject}
    if args.answer is not None:
        return {"answer": args.answer}
    if args.plan_file is not None:
        try:
            plan = json.loads(Path(args.plan_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CliError(f"cannot read --plan-file: {exc}", EXIT_USAGE) from exc
        except ValueError as exc:
            raise CliError(f"--plan-file {args.plan_file} is not JSON: {exc}", EXIT_USAGE) from exc
        return {"action": "edit", "plan": plan}
    return None


def _reader(saver: BaseCheckpointSaver[Any], thread_id: str) -> AimeGraph:
    """A graph to read a thread's state with. The graph's shape is the same for every
    model and config, so reading needs no run settings: threads started from Python
    read like the CLI's own, and no real model is built (no API key, no weights)."""
    if saver.get_tuple(run_config(thread_id)) is None:
        raise CliError(f"no thread {thread_id!r} in this checkpoint store", EXIT_NOT_FOUND)
    return build_aime_graph(
        DEMO_SCENARIO, config=AimeConfig(workspace=WORKSPACES), checkpointer=saver
    )


RESUME_FLAGS = "--model SPEC (and --workspace DIR, --tools MODULE:ATTR, --config JSON as needed)"


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


DURABILITY_HELP = (
    "when checkpoints are written. sync: each step's checkpoint is saved before the next "
    "step starts, so a crash or kill loses at most the steps in flight (a little slower: "
    "one database write per step). async (default): saved in the background while the "
    "next step runs; faster, but a crash can also lose the last finished step, whose "
    "tasks then run again. exit: saved only when the run ends or pauses; fastest, no "
    "crash recovery and no step history. Use sync when tools have side effects that "
    "must not repeat."
)


def _durability_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--durability", choices=["sync", "async", "exit"], default="async", help=DURABILITY_HELP
    )


def _checkpoints_option(parser: argparse.ArgumentParser, default: Any = argparse.SUPPRESS) -> None:
    """``--checkpoints`` before or after the subcommand: a subcommand's copy keeps the
    value given before it unless given again (SUPPRESS sets nothing when absent)."""
    parser.add_argument(
        "--checkpoints",
        default=default,
        help=f"checkpoint store URL: memory, sqlite:///PATH, postgresql://... "
        f"(default {redact_url(DEFAULT_CHECKPOINT_URL)})",
    )


def _tools_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tools",
        metavar="MODULE:ATTR",
        action="append",
        default=[],
        help="the application's tools (a tool, a function, a list of them or a "
        "ToolRegistry), importable as MODULE:ATTR; repeatable. Stored with the run, "
        "so resume finds them again",
    )


def _rebuild_options(parser: argparse.ArgumentParser) -> None:
    """Settings for carrying on a thread: needed for threads started from Python
    (which store none); for the CLI's own threads they replace the stored ones."""
    parser.add_argument("--model", help="model spec (default: the one the run started with)")
    parser.add_argument("--workspace", help="workspace directory (default: the run's)")
    parser.add_argument("--config", help="AimeConfig fields as a JSON object")
    _tools_option(parser)


def _run_options(parser: argparse.ArgumentParser) -> None:
    """The goal, model and config flags of a new run (``run`` and ``submit``)."""
    parser.add_argument("goal", help="what the agents should achieve")
    parser.add_argument(
        "--model", default="openai:gpt-4o-mini", help="openai:<model>, local, scripted:<scenario>"
    )
    parser.add_argument("--thread", help="thread id (default: a new one)")
    parser.add_argument(
        "--workspace", help="directory for file and python tools (default: per thread)"
    )
    parser.add_argument("--max-parallel", type=int)
    parser.add_argument("--max-replans", type=int)
    parser.add_argument("--max-llm-calls", type=int)
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--max-actor-steps", type=int)
    parser.add_argument("--replan", choices=["on_failure", "every_step"])
    parser.add_argument("--verify", choices=["final", "tasks", "both", "off"])
    parser.add_argument("--tool-calling", choices=["auto", "native", "json"])
    parser.add_argument("--approve-plan", action="store_true", help="pause for plan approval")
    parser.add_argument("--approve-tools", help="comma-separated tools that need approval")
    parser.add_argument("--config", help="AimeConfig fields as a JSON object")
    _tools_option(parser)
    parser.add_argument(
        "--prompts",
        metavar="FILE_OR_STORE",
        help="role prompts: a JSON / YAML prompt set, or a prompt store (.jsonl) whose "
        "active version the run uses (default: the prompt store beside the checkpoints, "
        "when it has an active version; else the built-in prompts). A submitted run's "
        "workers read the same path",
    )
    parser.add_argument(
        "--agents",
        metavar="FILE_OR_MODULE:ATTR",
        help="agent units the planner may assign to tasks, alone or as teams: a YAML / JSON "
        "list of {name, description, persona, tool_bundles, model}, or MODULE:ATTR naming "
        "AgentUnits. Stored with the run, so resume (and a submitted run's workers) find "
        "them again",
    )


def _broker_options(parser: argparse.ArgumentParser, purpose: str) -> None:
    parser.add_argument(
        "--broker",
        default=os.environ.get("AIMEGRAPH_BROKER_URL", "redis://127.0.0.1:6379/0"),
        help=f"Redis URL of the queue {purpose} (default: $AIMEGRAPH_BROKER_URL or "
        "redis://127.0.0.1:6379/0)",
    )
    parser.add_argument("--queue", default="aimegraph", help="queue name (aimegraph)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aimegraph",
        description="AIME-style multi-agent workflows on LangGraph.",
        epilog="exit codes: 0 succeeded, 1 failed, 2 usage, 3 rejected, 4 budget exhausted, "
        "5 paused, 6 unknown thread or nothing to resume",
    )
    _checkpoints_option(parser, default=DEFAULT_CHECKPOINT_URL)
    parser.add_argument(
        "--store",
        metavar="URL",
        help="long-term memory store: memory, sqlite:///PATH, postgresql://... (default: "
        "memory.db beside an SQLite checkpoint file, the same database for Postgres)",
    )
    parser.add_argument(
        "--embeddings",
        choices=["hashing", "minilm"],
        default="hashing",
        help="what the memory index embeds with (minilm needs the [semantic] extra)",
    )
    parser.add_argument(
        "--memory-ttl-days",
        type=float,
        metavar="DAYS",
        help="memories expire this many days after they are written (the store's TTL: "
        "SQLite and Postgres; default: kept until forgotten)",
    )
    parser.add_argument(
        "--otlp",
        metavar="URL",
        default=os.environ.get("AIMEGRAPH_OTLP_ENDPOINT"),
        help="send OpenTelemetry traces of the runs to this OTLP/HTTP endpoint, e.g. "
        "http://127.0.0.1:6006 for a local Phoenix (default: $AIMEGRAPH_OTLP_ENDPOINT; "
        "needs the [tracing] extra)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler: Any, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        p.add_argument("--json", action="store_true", help="print the result as JSON, no live view")
        _checkpoints_option(p)
        return p

    run = command("run", cmd_run, "Run a goal to completion (or until a human must answer).")
    _run_options(run)
    _durability_option(run)

    demo = command("demo", cmd_demo, "Run the bundled offline demo (scripted model, real tools).")
    demo.add_argument("--thread", help="thread id (default: a new one)")
    demo.add_argument(
        "--sandbox",
        choices=["auto", "bubblewrap", "none"],
        default="auto",
        help="where the demo's python code runs (default auto: bubblewrap; none: unconfined)",
    )
    _durability_option(demo)

    resume = command("resume", cmd_resume, "Resume a paused or interrupted thread.")
    resume.add_argument("thread")
    answer = resume.add_mutually_exclusive_group()
    answer.add_argument("--approve", action="store_true", help="approve the plan or tool call")
    answer.add_argument("--reject", metavar="REASON", help="reject the plan / deny the tool call")
    answer.add_argument("--answer", metavar="TEXT", help="answer an ask_human question")
    answer.add_argument(
        "--plan-file", metavar="JSON", help="approve an edited plan (PlanUpdate JSON)"
    )
    resume.add_argument(
        "--interrupt", metavar="ID", help="answer only this interrupt (default: all)"
    )
    _rebuild_options(resume)
    _durability_option(resume)
    _broker_options(resume, "of a distributed run")

    command("threads", cmd_threads, "List stored threads (id, status, updated, goal).")
    show = command("show", cmd_show, "Show a thread: checklist, verdict, final answer, usage.")
    show.add_argument("thread")
    history = command("history", cmd_history, "List a thread's checkpoints, newest first.")
    history.add_argument("thread")
    fork = command("fork", cmd_fork, "Re-run a thread from one of its checkpoints.")
    fork.add_argument("thread")
    fork.add_argument("checkpoint", help="checkpoint id from `aimegraph history`")
    _rebuild_options(fork)
    _durability_option(fork)

    dashboard = sub.add_parser(
        "dashboard",
        help="Serve the local web dashboard: watch, answer and start runs.",
        description="Serve the local web dashboard over the checkpoint store: watch, answer "
        "and start runs (needs the [dashboard] extra).",
    )
    dashboard.set_defaults(handler=cmd_dashboard, json=False)
    _checkpoints_option(dashboard)
    dashboard.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    dashboard.add_argument("--port", type=int, default=8765, help="port (8765)")
    dashboard.add_argument(
        "--token",
        help="required by every request (Bearer header, or open the page once with ?token=); "
        "mandatory when --host is not a loopback address (default: "
        "$AIMEGRAPH_DASHBOARD_TOKEN)",
    )
    dashboard.add_argument(
        "--store",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="long-term memory store the memory pane shows and the runs started or "
        "resumed here use (default: as for run, beside the checkpoints)",
    )
    dashboard.add_argument(
        "--prompts",
        metavar="STORE",
        help="prompt store (.jsonl) the prompts pane shows (default: prompts.jsonl beside an "
        "SQLite checkpoint file, else .aimegraph/prompts.jsonl)",
    )
    _broker_options(dashboard, "that distributed runs' resumes go to")

    submit = command(
        "submit",
        _distributed_command("cmd_submit"),
        "Queue a run for the workers and print its thread id (needs [distributed]).",
    )
    _run_options(submit)
    _broker_options(submit, "to queue the run on")
    wait = command(
        "wait",
        cmd_wait,
        "Wait until a submitted run pauses or ends, then show it (exit code as for run).",
    )
    wait.add_argument("thread")
    wait.add_argument("--timeout", type=float, help="give up after this many seconds (exit 7)")
    worker = command(
        "worker",
        _distributed_command("cmd_worker"),
        "Serve submitted runs: a Celery worker over the Postgres checkpoints "
        "(needs [distributed]).",
    )
    _broker_options(worker, "to take runs from")
    worker.add_argument(
        "--store",
        metavar="URL",
        default=argparse.SUPPRESS,  # as before the subcommand: aimegraph --store URL worker
        help="long-term memory the runs recall from and record into (default: the "
        "checkpoints' Postgres database); a run with memory 'off' in its config uses none",
    )
    worker.add_argument("--concurrency", type=int, default=1, help="runs at once (1)")
    worker.add_argument(
        "--visibility-timeout",
        type=float,
        default=float(os.environ.get("AIMEGRAPH_VISIBILITY_TIMEOUT", 300)),
        help="seconds before an unacknowledged run is delivered again: how soon a dead "
        "worker's runs resume elsewhere (default 300, $AIMEGRAPH_VISIBILITY_TIMEOUT)",
    )
    worker.add_argument(
        "--graph",
        metavar="MODULE:ATTR",
        default="aimegraph.steering:run_graph",
        help="callable (RunSettings, checkpointer, store=None) -> compiled graph that "
        "builds each run; given the worker's memory store when it takes store= (default: "
        "the standard aime graph with the run's model, --tools, --prompts and --agents)",
    )
    worker.add_argument("--name", help="worker name (default: aimegraph-PID@HOST)")
    worker.add_argument("--log-level", default="INFO", help="Celery log level (INFO)")

    memory = command(
        "memory", cmd_memory, "Long-term memory: list, search, forget or export episodes."
    )
    from aimegraph.memory.commands import add_memory_arguments

    add_memory_arguments(memory)

    optimize = command(
        "optimize",
        cmd_optimize,
        "Optimise the role prompts with GEPA on JSON Lines examples; the winner goes into "
        "the prompt store, active (needs the [optimize] extra).",
    )
    from aimegraph.optimizer.optimize_command import add_optimize_arguments

    add_optimize_arguments(optimize)

    prompts = command(
        "prompts", cmd_prompts, "Prompt versions in the prompt store: list, show, diff, use, add."
    )
    from aimegraph.optimizer.prompt_commands import add_prompts_arguments

    add_prompts_arguments(prompts)

    draw = command("draw", cmd_draw, "Draw the workflow graph, or a thread's plan (--plan).")
    draw.add_argument("--plan", metavar="THREAD", help="draw this thread's task DAG")
    draw.add_argument("--model", default=DEMO_SCENARIO, help=argparse.SUPPRESS)
    draw.add_argument("--xray", action="store_true", help="expand the subgraphs")
    draw.add_argument(
        "--format",
        choices=["svg", "png", "pdf", "mermaid"],
        default=None,
        help="default: from the suffix of -o (.svg .png .pdf .mmd), else svg",
    )
    draw.add_argument("-o", "--output", help="file to write (default: stdout)")
    return parser


if __name__ == "__main__":
    sys.exit(main())
