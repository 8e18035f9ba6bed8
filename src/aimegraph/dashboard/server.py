"""Serving the dashboard with uvicorn, and the ``aimegraph dashboard`` command."""

from __future__ import annotations

import argparse
import ipaddress
import os
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from rich.console import Console

from aimegraph.dashboard.app import LOOPBACK_HOSTS, create_app

TOKEN_ENV = "AIMEGRAPH_DASHBOARD_TOKEN"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(
    saver: BaseCheckpointSaver[Any],
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> None:
    """Serve the dashboard until interrupted. Any host but a loopback address
    needs a ``token``, which every request must then carry."""
    import uvicorn

    if not is_loopback(host) and not token:
        raise ValueError(
            f"binding {host} exposes your runs to the network: pass --token "
            f"(or set {TOKEN_ENV}), or bind 127.0.0.1"
        )
    allowed = LOOPBACK_HOSTS if is_loopback(host) else ("*",)
    app = create_app(saver, token=token, allowed_hosts=(*allowed, host))
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)


def cmd_dashboard(
    args: argparse.Namespace, saver: BaseCheckpointSaver[Any], console: Console
) -> int:
    token = args.token or os.environ.get(TOKEN_ENV) or None
    shown = f"[{args.host}]" if ":" in args.host else args.host
    console.print(
        f"aimegraph dashboard on http://{shown}:{args.port}/"
        + ("?token=YOUR_TOKEN" if token else "")
        + "  (Ctrl+C stops it)"
    )
    serve(saver, host=args.host, port=args.port, token=token)
    return 0
