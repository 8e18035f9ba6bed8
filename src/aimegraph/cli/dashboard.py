"""``aimegraph dashboard``: serve the local web app over the checkpoint store."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console

from aimegraph.cli.options import alerts_option, broker_options, load_alert_rules
from aimegraph.cli.support import EXIT_USAGE, AddCommand, CliError
from aimegraph.eval.harness import DEFAULT_EVALS

__all__ = ["register"]


def register(command: AddCommand) -> None:
    """Add ``dashboard``."""
    dashboard = command("dashboard", cmd_dashboard)
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
    dashboard.add_argument(
        "--evals",
        metavar="DIR",
        default=str(DEFAULT_EVALS),
        help=f"folder of aimegraph eval's directories the evals pane lists ({DEFAULT_EVALS})",
    )
    broker_options(dashboard, "that distributed runs' resumes go to")
    alerts_option(dashboard)


def cmd_dashboard(
    args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console
) -> int:
    try:
        from aimegraph.dashboard.runs import DistributedQueue
        from aimegraph.dashboard.server import TOKEN_ENV, check_exposure, serve
    except ImportError as exc:
        raise CliError(
            f"the dashboard needs: pip install 'aimegraph[dashboard]' ({exc})", EXIT_USAGE
        ) from exc
    from aimegraph.distributed.records import is_postgres_url
    from aimegraph.optimizer.store import PromptStore, default_prompt_store

    token = args.token or os.environ.get(TOKEN_ENV) or None
    check_exposure(args.host, token)
    alerts = load_alert_rules(args.alerts)
    store = args.memory_store()  # --store, or beside the checkpoints (as `aimegraph run`)
    prompts = PromptStore(args.prompts or default_prompt_store(args.checkpoints))
    distributed = (
        DistributedQueue(args.checkpoints, args.broker, args.queue)
        if is_postgres_url(args.checkpoints)
        else None
    )
    shown = f"[{args.host}]" if ":" in args.host else args.host
    console.print(
        f"aimegraph dashboard on http://{shown}:{args.port}/"
        + ("?token=YOUR_TOKEN" if token else "")
        + "  (Ctrl+C stops it)"
    )
    try:
        serve(
            saver,
            store=store,
            prompts=prompts,
            distributed=distributed,
            host=args.host,
            port=args.port,
            token=token,
            evals=Path(args.evals),
            alerts=alerts,
        )
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl+C it shut down on
        console.print("dashboard stopped")
    return 0
