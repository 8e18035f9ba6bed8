"""A tool function's annotations resolved once, where the tool is registered.

LangChain reads a tool function's type hints on every call (``BaseTool.run`` looks
for a ``RunnableConfig`` parameter). In a module written with ``from __future__
import annotations`` the hints are strings, and ``typing.get_type_hints`` compiles
each of them again on every call: for the actor's reports, which run in its react
step, that was most of a call's own cost (``python -m bench --only overhead``).
Resolving them once leaves the function with the objects ``get_type_hints`` would
have returned on each call, so LangChain sees the same hints, only sooner.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool


def resolve_annotations(tool: BaseTool) -> BaseTool:
    """Resolve the string annotations of ``tool``'s functions in place; ``tool`` back."""
    if isinstance(tool, StructuredTool):
        _resolve(tool.func)
        _resolve(tool.coroutine)
    return tool


def _resolve(func: Callable[..., Any] | None) -> None:
    while isinstance(func, functools.partial):
        func = func.func
    target = getattr(func, "__func__", func)  # a bound method's function
    annotations = getattr(target, "__annotations__", None)
    if not annotations or not any(isinstance(hint, str) for hint in annotations.values()):
        return
    try:
        target.__annotations__ = typing.get_type_hints(target, include_extras=True)
    except Exception:  # noqa: BLE001 - a name only a type checker sees: left as it was
        return
