"""``aimegraph worker | submit | wait`` and the distributed paths of ``show`` and
``resume`` (the parser lives in ``aimegraph.cli``; these are its handlers)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import CheckpointConnectionError, new_thread_id, run_config
from aimegraph.cli_support import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    CliError,
    config_from_args,
    run_prompts,
)
from aimegraph.distributed import records
from aimegraph.distributed.app import (
    BrokerConnectionError,
    WorkerSettings,
    check_broker,
    make_app,
)
from aimegraph.distributed.records import RunRecord
from aimegraph.distributed.runner import load_graph_builder, takes_store
from aimegraph.distributed.submit import (
    RunNotResumableError,
    enqueue_resume,
    submit_run,
    wait_for_run,
)

EXIT_TIMEOUT = 7


@contextmanager
def _cli_errors() -> Iterator[None]:
    """Errors the caller has to act on, as one line and an exit code: an unreachable
    broker or database, or a run that cannot be resumed (usage), an unknown run (not
    found), a wait that timed out."""
    try:
        yield
    except (BrokerConnectionError, CheckpointConnectionError, RunNotResumableError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except LookupError as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from exc
    except TimeoutError as exc:
        raise CliError(str(exc), EXIT_TIMEOUT) from exc


def cmd_worker(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    """Serve runs until stopped (Ctrl+C or SIGTERM: the runs in hand finish first)."""
    with _cli_errors():
        app = _worker_app(args, console)
    # Threads, not processes: a run mostly waits on its models and Postgres, and one
    # process shares its imports; use more worker processes for CPU-bound models.
    app.worker_main(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={args.concurrency}",
            f"--queues={args.queue}",
            f"--hostname={args.name or f'aimegraph-{os.getpid()}@%h'}",
            f"--loglevel={args.log_level}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
    return 0


def _worker_app(args: argparse.Namespace, console: Console) -> Celery:
    checkpoints = _postgres_url(args)
    builder = load_graph_builder(args.graph)  # fail here, not on the first delivery
    broker = make_app(args.broker, queue=args.queue)
    check_broker(broker)
    with records.connect(checkpoints):  # reachable, and the runs table exists
        pass
    # One store for the process, shared by its threads (--store, else the
    # checkpoints' database: the same default as `aimegraph run`).
    store = args.memory_store()
    if not takes_store(builder):
        console.print(
            f"warning: --graph {args.graph} takes no store=: its runs recall and record "
            "no memories",
            markup=False,
        )
    return make_app(
        args.broker,
        visibility_timeout=args.visibility_timeout,
        queue=args.queue,
        worker=WorkerSettings(checkpoints=checkpoints, graph_builder=args.graph, store=store),
    )


def cmd_submit(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    thread_id = args.thread or new_thread_id()
    if saver.get_tuple(run_config(thread_id)) is not None:
        raise ValueError(f"thread {thread_id!r} exists; resume it or pick a new id")
    with _cli_errors():
        _submit(args, thread_id)
    print(json.dumps({"thread_id": thread_id}) if args.json else thread_id)
    return 0


def _submit(args: argparse.Namespace, thread_id: str) -> None:
    config = config_from_args(args, thread_id)  # the same config flags as `run`
    if args.agents:  # a bad file or import fails here, not on a worker
        from aimegraph.teams import load_agents

        load_agents(args.agents)
    submit_run(
        args.goal,
        broker=args.broker,
        checkpoints=_postgres_url(args),
        model=args.model,
        config=config,
        tools=args.tools,
        # stdout carries the thread id alone: say the prompt version on stderr
        prompts=run_prompts(args, Console(stderr=True), online=config.optimize_online),
        agents=args.agents,
        thread_id=thread_id,
        queue=args.queue,
    )


def wait_record(args: argparse.Namespace) -> RunRecord:
    """``aimegraph wait``: block until the submitted run pauses or ends (the CLI then
    shows it, as ``aimegraph show``)."""
    with _cli_errors():
        return wait_for_run(args.thread, checkpoints=_postgres_url(args), timeout=args.timeout)


def show_record(record: RunRecord, args: argparse.Namespace, console: Console) -> int:
    """``aimegraph show`` of a distributed run that its checkpoints cannot describe yet:
    queued, on a worker, or ended before its first checkpoint."""
    if args.json:
        print(json.dumps(record.as_dict(), indent=2))
        return 0
    where = f" on {record.worker}" if record.state == "running" else ""
    reason = f" ({record.reason})" if record.reason else ""
    console.print(f"\n[bold]status:[/bold] {record.outcome}{where}{escape(reason)}")
    console.print(f"goal: {record.goal}", markup=False)
    console.print(
        f"model: {record.settings.model}; submitted {record.submitted_at:%Y-%m-%d %H:%M:%S}; "
        f"deliveries: {record.deliveries}",
        markup=False,
    )
    if record.state in records.ACTIVE_STATES:
        console.print(f"wait for it with: aimegraph wait {record.thread_id}")
    return 0


def resume_distributed(
    args: argparse.Namespace, record: RunRecord, inputs: Command[Any] | None, console: Console
) -> int:
    """``aimegraph resume`` of a distributed run: queue it for the workers."""
    answers = inputs.resume if inputs is not None else None
    if answers is not None and not isinstance(answers, dict):
        raise CliError("a distributed resume answers interrupts by id", EXIT_USAGE)
    with _cli_errors():
        enqueue_resume(
            record.thread_id,
            answers,
            broker=args.broker,
            checkpoints=_postgres_url(args),
            queue=args.queue,
        )
    if args.json:
        print(json.dumps({"thread_id": record.thread_id, "status": "queued"}))
    else:
        console.print(
            f"queued the resume of {record.thread_id}; follow it with: "
            f"aimegraph wait {record.thread_id}"
        )
    return 0


def _postgres_url(args: argparse.Namespace) -> str:
    url = str(args.checkpoints)
    if not records.is_postgres_url(url):
        raise ValueError(
            "distributed runs need Postgres checkpoints shared by every worker: pass "
            "--checkpoints postgresql://user:password@host:5432/dbname"
        )
    return url
