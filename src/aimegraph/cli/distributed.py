"""``aimegraph worker | submit``, and the distributed paths of ``wait``, ``show`` and
``resume``. Celery (the ``[distributed]`` extra) is imported when a command needs
it, so the parser can be built without it."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command
from rich.console import Console
from rich.markup import escape

from aimegraph.checkpoints import CheckpointConnectionError, new_thread_id, run_config
from aimegraph.cli.options import (
    DEFAULT_MODEL,
    alerts_option,
    broker_options,
    load_alert_rules,
    run_options,
)
from aimegraph.cli.report import report_cancel
from aimegraph.cli.support import (
    EXIT_NOT_FOUND,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    AddCommand,
    CliError,
    config_from_args,
    run_prompts,
)
from aimegraph.distributed import records
from aimegraph.distributed.records import RunRecord
from aimegraph.distributed.runner import load_graph_builder, takes_store
from aimegraph.mcp_servers import load_mcp_servers

if TYPE_CHECKING:
    from celery import Celery

    from aimegraph.alerts import AlertSettings

__all__ = ["cancel_distributed", "register", "resume_distributed", "show_record", "wait_record"]


def register(command: AddCommand) -> None:
    """Add ``submit`` and ``worker`` (``wait`` reads threads: see ``aimegraph.cli.threads``)."""
    submit = command("submit", cmd_submit)
    run_options(submit)
    broker_options(submit, "to queue the run on")
    worker = command("worker", cmd_worker)
    broker_options(worker, "to take runs from")
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
    worker.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics (the runs here, the queue's depth) on PORT at /metrics",
    )
    worker.add_argument(
        "--metrics-host", default="127.0.0.1", help="address the metrics bind (127.0.0.1)"
    )
    alerts_option(worker)


@contextmanager
def _cli_errors() -> Iterator[None]:
    """Errors the caller has to act on, as one line and an exit code: an unreachable
    broker or database, or a run that cannot be resumed (usage), an unknown run (not
    found), a wait that timed out."""
    try:
        from aimegraph.distributed.app import BrokerConnectionError
        from aimegraph.distributed.submit import RunNotResumableError
    except ImportError as exc:
        raise CliError(
            f"distributed runs need: pip install 'aimegraph[distributed]' ({exc})", EXIT_USAGE
        ) from exc
    try:
        yield
    except (BrokerConnectionError, CheckpointConnectionError, RunNotResumableError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except LookupError as exc:
        raise CliError(str(exc), EXIT_NOT_FOUND) from exc
    except TimeoutError as exc:
        raise CliError(str(exc), EXIT_TIMEOUT) from exc


def cmd_worker(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    """Serve runs until stopped (Ctrl+C or SIGTERM: no new delivery; the runs in hand
    stop at their next step boundary and are queued again)."""
    alerts = load_alert_rules(args.alerts)
    with _cli_errors():
        app = _worker_app(args, console)
    hostname = args.name or f"aimegraph-{os.getpid()}@%h"
    if args.metrics_port is not None or alerts is not None:
        _serve_metrics(app, args, alerts, hostname)
    # Threads, not processes: a run mostly waits on its models and Postgres, and one
    # process shares its imports; use more worker processes for CPU-bound models.
    app.worker_main(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={args.concurrency}",
            f"--queues={args.queue}",
            f"--hostname={hostname}",
            f"--loglevel={args.log_level}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
    return 0


def _serve_metrics(
    app: Celery, args: argparse.Namespace, alerts: AlertSettings | None, hostname: str
) -> None:
    """``--metrics-port`` and ``--alerts``: the metrics served, the rules checked (the
    alerts recorded in the runs database under the worker's node name, as Celery
    expands ``hostname``, the name its runs record)."""
    try:
        from celery.utils.nodenames import default_nodename, host_format

        from aimegraph.distributed.monitoring import serve_worker_metrics
    except ImportError as exc:
        raise CliError(
            f"metrics need: pip install 'aimegraph[metrics]' ({exc})", EXIT_USAGE
        ) from exc
    try:
        serve_worker_metrics(
            app,
            args.queue,
            args.metrics_port,
            args.metrics_host,
            alerts,
            worker=host_format(default_nodename(hostname)),
            checkpoints=_postgres_url(args),
        )
    except OSError as exc:  # the port is taken, the address is not ours
        raise CliError(
            f"cannot serve metrics on port {args.metrics_port}: {exc}", EXIT_USAGE
        ) from exc


def _worker_app(args: argparse.Namespace, console: Console) -> Celery:
    from aimegraph.distributed.app import WorkerSettings, check_broker, make_app

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
    from aimegraph.distributed.submit import submit_run
    from aimegraph.models.response_format import load_response_format

    config = config_from_args(args, thread_id)  # the same config flags as `run`
    if args.agents:  # a bad file or import fails here, not on a worker
        from aimegraph.teams import load_agents

        load_agents(args.agents)
    if args.response_format:  # likewise
        load_response_format(args.response_format)
    if args.mcp:  # a malformed file fails here, not on a worker
        load_mcp_servers(args.mcp)
    submit_run(
        args.goal,
        broker=args.broker,
        checkpoints=_postgres_url(args),
        model=args.model or DEFAULT_MODEL,
        config=config,
        tools=args.tools,
        # stdout carries the thread id alone: say the prompt version on stderr
        prompts=run_prompts(args, Console(stderr=True), online=config.optimize_online),
        agents=args.agents,
        response_format=args.response_format,
        mcp=args.mcp,
        thread_id=thread_id,
        queue=args.queue,
    )


def wait_record(args: argparse.Namespace) -> RunRecord:
    """``aimegraph wait``: block until the submitted run pauses or ends (the CLI then
    shows it, as ``aimegraph show``)."""
    with _cli_errors():
        from aimegraph.distributed.submit import wait_for_run

        return wait_for_run(args.thread, checkpoints=_postgres_url(args), timeout=args.timeout)


def show_record(record: RunRecord, args: argparse.Namespace, console: Console) -> int:
    """``aimegraph show`` of a distributed run that its checkpoints cannot describe yet:
    queued, on a worker, or ended before its first checkpoint."""
    if args.json:
        print(json.dumps(record.as_dict(), indent=2))
        return 0
    where = f" on {record.worker}" if record.state == "running" else ""
    reason = f" ({record.reason})" if record.reason else ""
    console.print(f"[bold]thread:[/bold] {escape(record.thread_id)}")
    console.print(f"[bold]goal:[/bold] {escape(' '.join(record.goal.split()))}")
    console.print(f"[bold]status:[/bold] {record.outcome}{where}{escape(reason)}")
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
        from aimegraph.distributed.submit import enqueue_resume

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


def cancel_distributed(
    args: argparse.Namespace, record: RunRecord, saver: BaseCheckpointSaver[Any], console: Console
) -> int:
    """``aimegraph cancel`` of a distributed run: revoked while queued, ended at once
    when paused or stopped, stopped at its next step on the worker running it."""
    from aimegraph.distributed import runner

    try:
        outcome = runner.cancel_distributed(
            _postgres_url(args), record, wait=args.wait, reason=args.reason
        )
    except LookupError as exc:
        raise CliError(f"thread {record.thread_id!r}: {exc}", EXIT_NOT_FOUND) from exc
    report_cancel(
        args, record.thread_id, outcome, console, follow=f"aimegraph wait {record.thread_id}"
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
