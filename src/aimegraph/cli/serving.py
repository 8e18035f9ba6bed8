"""``aimegraph a2a serve`` and ``aimegraph mcp serve``: aimegraph served to other
agents over A2A (needs the ``[a2a]`` extra) and MCP (needs ``[mcp]``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console

from aimegraph.cli.support import EXIT_USAGE, AddCommand, CliError, config_json
from aimegraph.console import cli_console

__all__ = ["register"]


def register(command: AddCommand) -> None:
    """Add ``a2a`` and ``mcp``, each with its ``serve`` action."""
    a2a = command("a2a", cmd_a2a).add_subparsers(dest="a2a_action", required=True)
    serve = a2a.add_parser("serve", help="serve aimegraph as an A2A agent (JSON-RPC, streaming)")
    serving_options(serve, port=8766)
    serve.add_argument(
        "--url",
        help="the URL the agent card gives clients (default: http://HOST:PORT/; set it "
        "behind a proxy)",
    )
    mcp = command("mcp", cmd_mcp).add_subparsers(dest="mcp_action", required=True)
    serve = mcp.add_parser("serve", help="serve aimegraph's run tools over MCP")
    serve.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (for a client that starts this command) or streamable HTTP at /mcp",
    )
    serving_options(serve, port=8767)


def serving_options(parser: argparse.ArgumentParser, port: int) -> None:
    """Where ``a2a serve`` / ``mcp serve`` listen and what their runs use."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=port, help=f"port ({port})")
    parser.add_argument(
        "--token",
        help="required by every request as Authorization: Bearer TOKEN; mandatory when "
        "--host is not a loopback address (default: $AIMEGRAPH_SERVE_TOKEN)",
    )
    parser.add_argument(
        "--model",
        default="scripted:demo",
        help="model spec of the runs started here, as for run (default: scripted:demo, the "
        "offline demo, which plays only its own goal)",
    )
    parser.add_argument(
        "--config",
        help="AimeConfig fields as a JSON object for every run started here; callers may "
        "add budgets and human control, never change these",
    )


def cmd_a2a(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    try:
        from aimegraph.serving.a2a import create_a2a_app
    except ImportError as exc:
        raise CliError(
            f"A2A serving needs: pip install 'aimegraph[a2a]' ({exc})", EXIT_USAGE
        ) from exc
    from aimegraph.serving.server import serve_app

    runs, token = _served(args, saver)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = args.url or f"http://{shown}:{args.port}/"
    console.print(
        f"aimegraph A2A agent on {url} (card: {url}.well-known/agent-card.json)  (Ctrl+C stops it)"
    )
    try:
        serve_app(create_a2a_app(runs, url, token), args.host, args.port)
    except KeyboardInterrupt:
        console.print("A2A server stopped")
    return 0


def cmd_mcp(args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console) -> int:
    try:
        from aimegraph.serving.mcp import create_mcp_server, mcp_http_app
    except ImportError as exc:
        raise CliError(
            f"MCP serving needs: pip install 'aimegraph[mcp]' ({exc})", EXIT_USAGE
        ) from exc
    from aimegraph.serving.server import serve_app

    runs, token = _served(args, saver)
    server = create_mcp_server(runs, args.host)
    # stdout carries the protocol on stdio: everything said goes to stderr.
    said = cli_console(stderr=True)
    if args.transport == "stdio":
        said.print("aimegraph MCP server on stdio")
        server.run("stdio")
        return 0
    shown = f"[{args.host}]" if ":" in args.host else args.host
    said.print(f"aimegraph MCP server on http://{shown}:{args.port}/mcp  (Ctrl+C stops it)")
    try:
        serve_app(mcp_http_app(server, token), args.host, args.port)
    except KeyboardInterrupt:
        said.print("MCP server stopped")
    return 0


def _served(args: argparse.Namespace, saver: BaseCheckpointSaver[Any]) -> tuple[Any, str | None]:
    """The runs both servers steer, and their token; refuses an exposed host
    without a token, and a --config that is no AimeConfig."""
    from aimegraph.config import AimeConfig
    from aimegraph.serving.runs import ServedRuns
    from aimegraph.serving.security import TOKEN_ENV, check_exposure

    token = args.token or os.environ.get(TOKEN_ENV) or None
    if getattr(args, "transport", "http") == "http":
        try:
            check_exposure(args.host, token)
        except ValueError as exc:
            raise CliError(str(exc), EXIT_USAGE) from exc
    config = config_json(args.config)
    AimeConfig.model_validate(config)  # a bad field fails here, not in each run
    return ServedRuns(saver, model=args.model, config=config, store=args.memory_store()), token
