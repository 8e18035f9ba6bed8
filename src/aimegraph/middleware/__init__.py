"""LangChain middleware on aimegraph's model and tool calls (architecture: Middleware).

``build_aime_graph(middleware=[...])`` gives the actors LangChain v1
``AgentMiddleware`` (instances of its classes, or made with ``@before_model``,
``@wrap_model_call``, ``@wrap_tool_call``, ...); a mapping ``{"actor": [...],
"planner": [...], "reporter": [...], "verifier": [...]}`` gives each role its own.
What a role cannot honour is refused when the graph is built
(:class:`MiddlewareError`); see :mod:`aimegraph.middleware.stack`.
"""

from aimegraph.middleware.compose import CommandNotHonoured
from aimegraph.middleware.stack import (
    ROLES,
    Middleware,
    MiddlewareArg,
    MiddlewareError,
    MiddlewareStack,
    RoleMiddleware,
)

__all__ = [
    "ROLES",
    "CommandNotHonoured",
    "Middleware",
    "MiddlewareArg",
    "MiddlewareError",
    "MiddlewareStack",
    "RoleMiddleware",
]
