"""Who may reach a served aimegraph: the loopback interface freely, anything else
only with a bearer token (as for the dashboard)."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from aimegraph.dashboard.server import is_loopback
from aimegraph.dashboard.tokens import TokenProblem, bearer_token, token_problem

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
    ``Authorization: Bearer <token>``; others get 401 saying whether their token is
    missing or wrong."""

    def __init__(self, app: ASGIApp, *, token: str, public: Sequence[str] = ()) -> None:
        self.app = app
        self.token = token
        self.public = tuple(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.public:
            header = dict(scope["headers"]).get(b"authorization", b"")
            offered = bearer_token(header.decode("utf-8", "replace"))
            if problem := token_problem([offered], self.token):
                await _refusal(problem)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _refusal(problem: TokenProblem) -> JSONResponse:
    """401, saying whether the token is missing or wrong (as RFC 6750's
    ``invalid_token`` error does in the challenge)."""
    if problem == "missing":
        error, challenge = "a bearer token is required (Authorization: Bearer TOKEN)", "Bearer"
    else:
        error = "the bearer token is wrong: it is not the one this server was started with"
        challenge = 'Bearer error="invalid_token"'
    return JSONResponse({"error": error}, status_code=401, headers={"WWW-Authenticate": challenge})
