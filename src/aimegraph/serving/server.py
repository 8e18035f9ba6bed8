"""Serving an ASGI app (the A2A or the MCP server) with uvicorn: in the foreground
for the CLI, or from a background thread for tests and notebooks."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from starlette.types import ASGIApp

__all__ = ["serve_app", "serving_in_background"]


def serve_app(app: ASGIApp, host: str, port: int) -> None:
    """Serve ``app`` until interrupted."""
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()


@contextmanager
def serving_in_background(
    make_app: Callable[[str], ASGIApp], host: str = "127.0.0.1"
) -> Iterator[str]:
    """Serve ``make_app(base URL)`` (lifespan included) on a free port of ``host``
    while the ``with`` block runs; yields the base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.bind((host, 0))
    url = f"http://{host}:{sock.getsockname()[1]}"
    config = uvicorn.Config(make_app(url), log_level="warning", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()
