"""A small HTTP server on 127.0.0.1 for the web tests and stub model servers: each path
(the query string aside) answers with a status, headers and body set by the test, or
computed from a POST's body by the route's ``answer``; it records the Host header of
every request it gets and the body of every POST."""

from __future__ import annotations

import http.server
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Route:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay_s: float = 0.0
    """Seconds to wait before answering (a slow server)."""
    answer: Callable[[bytes], Route] | None = None
    """For a POST: the route to answer with, given the request's body."""


class LocalSite:
    """``site.route("/page", body=b"...", headers={...})``; ``site.url("/page")``."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.hosts: list[str] = []
        self.posted: list[bytes] = []
        self.tls = tls
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.hosts.append(self.headers.get("Host", ""))
                self._send(site.routes.get(urlsplit(self.path).path, Route(404, body=b"not found")))

            def do_POST(self) -> None:
                site.hosts.append(self.headers.get("Host", ""))
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                site.posted.append(body)
                route = site.routes.get(urlsplit(self.path).path, Route(404, body=b"not found"))
                self._send(route.answer(body) if route.answer else route)

            def _send(self, route: Route) -> None:
                time.sleep(route.delay_s)
                try:
                    self.send_response(route.status)
                    for name, value in route.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(route.body)))
                    self.end_headers()
                    self.wfile.write(route.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:  # HTTPS: the handshake happens as each connection is accepted
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def route(self, path: str, **kwargs: object) -> str:
        """Answer ``path`` as told (see :class:`Route`); return its URL."""
        self.routes[path] = Route(**kwargs)  # type: ignore[arg-type]
        return self.url(path)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://{host}:{self.port}{path}"

    def __enter__(self) -> LocalSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(tls: ssl.SSLContext | None = None) -> Iterator[LocalSite]:
    """A running :class:`LocalSite`, for a fixture to yield from."""
    with LocalSite(tls) as site:
        yield site
