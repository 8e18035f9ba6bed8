"""The extra a missing module comes with: how a command that reached a missing
optional dependency says which ``pip install`` fixes it, in one line."""

from __future__ import annotations

__all__ = ["EXTRA_OF_MODULE", "missing_extra_message"]

EXTRA_OF_MODULE = {
    "gepa": "optimize",
    "starlette": "dashboard",
    "sse_starlette": "dashboard",
    "uvicorn": "dashboard",
    "celery": "distributed",
    "kombu": "distributed",
    "redis": "distributed",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "langgraph.checkpoint.postgres": "postgres",
    "langgraph.store.postgres": "postgres",
    "sentence_transformers": "semantic",
    "torch": "semantic",
    "graphviz": "draw",
    "opentelemetry": "tracing",
    "openinference": "tracing",
    "llama_cpp": "local",
    "a2a": "a2a",
    "mcp": "mcp",
    "prometheus_client": "metrics",
    "agentdojo": "agentdojo",
}
"""Modules only an extra installs, by the extra (``pip install 'aimegraph[extra]'``)."""


def missing_extra_message(exc: ImportError) -> str | None:
    """One line saying which extra to install for ``exc``: its own message when it
    already names the ``pip install``, else the extra of the missing module;
    ``None`` for a module no extra provides (a bug, or the user's own module)."""
    text = " ".join(str(exc).split())
    if "pip install 'aimegraph[" in text:
        return text
    name = exc.name or ""
    for module, extra in EXTRA_OF_MODULE.items():
        if name == module or name.startswith(module + "."):
            return f"{text} (pip install 'aimegraph[{extra}]')"
    return None
