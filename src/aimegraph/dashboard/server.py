"""Serving the dashboard with uvicorn (``aimegraph dashboard`` is ``aimegraph.cli.dashboard``)."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from starlette.applications import Starlette

from aimegraph.alerts import AlertSettings
from aimegraph.dashboard.app import LOOPBACK_HOSTS, create_app
from aimegraph.dashboard.runs import DistributedQueue, RunManager
from aimegraph.eval.harness import DEFAULT_EVALS
from aimegraph.optimizer.store import PromptStore

TOKEN_ENV = "AIMEGRAPH_DASHBOARD_TOKEN"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve beyond this machine without a token."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"binding {host} exposes your runs to the network: pass --token "
            f"(or set {TOKEN_ENV}), or bind 127.0.0.1"
        )


def serve(
    saver: BaseCheckpointSaver[Any],
    *,
    store: BaseStore | None = None,
    prompts: PromptStore | None = None,
    distributed: DistributedQueue | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    evals: Path = DEFAULT_EVALS,
    alerts: AlertSettings | None = None,
) -> None:
    """Serve the dashboard until interrupted. Runs started or resumed here use the
    memory ``store``; the prompts pane shows the ``prompts`` store; the evals pane
    the evals under ``evals``; the resumes of distributed runs go to the
    ``distributed`` queue; the ``alerts`` rules are checked. Any host but a loopback
    address needs a ``token``, which every request must then carry."""
    import uvicorn

    check_exposure(host, token)
    allowed = LOOPBACK_HOSTS if is_loopback(host) else ("*",)
    runs = RunManager(saver, store=store, prompts=prompts, distributed=distributed)
    app = create_app(
        saver,
        store=store,
        prompts=prompts,
        runs=runs,
        token=token,
        allowed_hosts=(*allowed, host),
        evals=evals,
        alerts=alerts,
    )

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            app.state.closing.set()  # open pages' event streams end, so Ctrl+C is prompt
            super().handle_exit(sig, frame)

    Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()


@contextmanager
def serve_in_background(app: Starlette, host: str = DEFAULT_HOST) -> Iterator[str]:
    """Serve ``app`` (from :func:`create_app`) from a background thread on a free
    port of ``host`` while the ``with`` block runs (for tests, benchmarks and
    notebooks); yields the base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.bind((host, 0))
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        app.state.closing.set()  # event streams end, so the shutdown is prompt
        server.should_exit = True
        thread.join(5)
        sock.close()
