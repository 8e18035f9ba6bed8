"""The token a served aimegraph (the dashboard, the A2A and MCP servers) asks of every
request: a request without one is told that one is needed, a request with a wrong one
that it is wrong, so a caller with a stale or mistyped token does not go looking for
where to put it."""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from typing import Literal

__all__ = ["TokenProblem", "bearer_token", "token_problem"]

TokenProblem = Literal["missing", "wrong"]


def bearer_token(authorization: str) -> str:
    """The token of an ``Authorization: Bearer TOKEN`` header's value ("" for none, or
    for another scheme)."""
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() if scheme.casefold() == "bearer" else ""


def token_problem(offered: Iterable[str], token: str) -> TokenProblem | None:
    """What keeps a request from a server guarded by ``token``, given the credentials
    it ``offered`` ("" for each place it left empty: no header, no cookie): None when
    one of them is the token, else ``missing`` (it offered none) or ``wrong``. Each is
    compared in constant time, all of them, so the answer's timing tells nothing of
    the token nor of which place held it."""
    given = [value for value in offered if value]
    matches = [hmac.compare_digest(value.encode(), token.encode()) for value in given]
    if any(matches):
        return None
    return "wrong" if given else "missing"
