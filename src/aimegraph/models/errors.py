"""Model errors: the one a model spec that cannot be resolved raises, and which
errors of a model call are transient.

Their own module so that the loaders :mod:`aimegraph.models.resolve` dispatches to
(``local``, ``local_server``) and its fallback chains can use them without importing
the resolver (or :mod:`aimegraph.models.calls`) back.
"""

from __future__ import annotations

import sys

import httpx


class ModelSpecError(ValueError):
    """A model spec cannot be resolved; the message says what to change."""


_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    TimeoutError,
    ConnectionError,
    httpx.TimeoutException,
    httpx.TransportError,
)

_OPENAI_TRANSIENT = (
    "APITimeoutError",
    "APIConnectionError",
    "RateLimitError",
    "InternalServerError",
)


def openai_errors(*names: str) -> tuple[type[BaseException], ...]:
    """openai's error classes ``names``, once openai is loaded (by an OpenAI model); a
    process that never loaded it cannot have raised them, and need not load it."""
    module = sys.modules.get("openai")
    return tuple(getattr(module, name) for name in names) if module is not None else ()


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: the service may answer next time (timeouts, dropped
    connections, rate limits, 408/409/429 and 5xx answers). Provider packages raise
    LangChain's ``ModelError`` kinds, which say so themselves (``is_retryable``): an
    Anthropic connection error has no status code and is no openai or httpx error."""
    if isinstance(exc, (*_TRANSIENT_TYPES, *openai_errors(*_OPENAI_TRANSIENT))):
        return True
    if getattr(exc, "is_retryable", False) is True:
        return True
    status = status_code_of(exc)
    return status is not None and (status in (408, 409, 429) or status >= 500)


def status_code_of(exc: BaseException) -> int | None:
    """The HTTP status an error carries (``status_code``, or its ``response``'s), if any."""
    status = getattr(exc, "status_code", None) or getattr(
        getattr(exc, "response", None), "status_code", None
    )
    return status if isinstance(status, int) else None
