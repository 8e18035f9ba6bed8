"""How a tool is called: retried on its transient failures, and its own time limit.

``with_policy(tool, retry=ToolRetry(...), timeout_s=...)`` returns a copy of the tool
whose calls are retried with the backoff the models use (``LLM_RETRY_POLICY``: exponential,
with jitter, bounded attempts) and whose time limit replaces ``AimeConfig.tool_timeout_s``.
The limit covers the whole call, its retries and waits included: a call never takes longer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import tenacity
from langchain_core.tools import BaseTool, StructuredTool

from aimegraph.models.calls import LLM_RETRY_POLICY, retrying
from aimegraph.models.errors import status_code_of

__all__ = ["TIMEOUT_KEY", "ToolRetry", "timeout_of", "with_policy"]

TIMEOUT_KEY = "aimegraph_timeout_s"
"""The key of a tool's ``metadata`` holding its time limit in seconds."""


@dataclass(frozen=True)
class ToolRetry:
    """Which failures of a tool are transient, and how many attempts a call gets.

    A failure is transient when the exception, or one it was raised from (its
    ``__cause__``), is an instance of ``on`` or carries an HTTP status (its
    ``status_code``, or its ``response``'s, as httpx and most SDKs raise them) in
    ``status_codes``. Waits between attempts grow from ``initial_interval`` as the
    models' do.
    """

    on: tuple[type[BaseException], ...] = (TimeoutError, ConnectionError, httpx.TransportError)
    status_codes: tuple[int, ...] = (408, 429, 500, 502, 503, 504)
    max_attempts: int = LLM_RETRY_POLICY.max_attempts
    initial_interval: float = LLM_RETRY_POLICY.initial_interval

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_interval < 0:
            raise ValueError("initial_interval must not be negative")

    def is_transient(self, exc: BaseException) -> bool:
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, self.on) or status_code_of(cause) in self.status_codes:
                return True
            cause = cause.__cause__
        return False

    def retrying(self, kind: type[tenacity.BaseRetrying]) -> tenacity.BaseRetrying:
        return retrying(
            kind,
            retry_on=self.is_transient,
            max_attempts=self.max_attempts,
            initial_interval=self.initial_interval,
        )


def with_policy(
    tool: BaseTool | Callable[..., Any],
    *,
    retry: ToolRetry | bool = False,
    timeout_s: float | None = None,
) -> BaseTool:
    """A copy of ``tool`` retried on transient failures and/or with its own time limit.

    Args:
        tool: A function tool (``@tool``, ``StructuredTool``, an MCP server's tool) or a
            typed function with a docstring. Other ``BaseTool`` subclasses take a
            ``timeout_s`` but no ``retry``.
        retry: ``True`` for :class:`ToolRetry`'s defaults (timeouts, dropped
            connections, 408/429/5xx), or a ``ToolRetry`` saying what is transient.
        timeout_s: Seconds a call may take in all, instead of ``tool_timeout_s``.
    """
    base = tool if isinstance(tool, BaseTool) else StructuredTool.from_function(tool)
    update: dict[str, Any] = {}
    if retry:
        rule = retry if isinstance(retry, ToolRetry) else ToolRetry()
        if not isinstance(base, StructuredTool):
            raise TypeError(
                f"retry needs a function tool (@tool, StructuredTool); {base.name!r} is a "
                f"{type(base).__name__}: retry inside its _run instead"
            )
        if base.func is not None:
            update["func"] = rule.retrying(tenacity.Retrying).wraps(base.func)
        if base.coroutine is not None:
            update["coroutine"] = rule.retrying(tenacity.AsyncRetrying).wraps(base.coroutine)
    if timeout_s is not None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        update["metadata"] = {**(base.metadata or {}), TIMEOUT_KEY: float(timeout_s)}
    return base.model_copy(update=update)


def timeout_of(tool: BaseTool | None, default: float) -> float:
    """The time limit of a call of ``tool``: its own (:func:`with_policy`), else ``default``."""
    limit = (tool.metadata or {}).get(TIMEOUT_KEY) if tool is not None else None
    return float(limit) if isinstance(limit, int | float) else default
