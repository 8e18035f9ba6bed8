"""Who may reach a served aimegraph: the loopback interface freely, anything else
only with a bearer token (as for the dashboard)."""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from aimegraph.dashboard.server import is_loopback

__all__ = ["TOKEN_ENV", "BearerTokenMiddleware", "check_exposure"]

TOKEN_ENV = "AIMEGRAPH_SERVE_TOKEN"


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve beyond this machine without a token."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"binding {host} lets anyone on the network start and steer runs: pass --token "
            f"(or set {TOKEN_ENV}), or bind 127.0.0.1"
        )


class BearerTokenMiddleware:
    """Every HTTP request but those for the ``public`` paths must carry
    ``Authorization: Bearer <token>``; others get 401."""

    def __init__(self, app: ASGIApp, *, token: str, public: Sequence[str] = ()) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.public = tuple(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.public:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = JSONResponse(
                    {"error": "a bearer token is required (Authorization: Bearer TOKEN)"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
