"""The shape every node factory returns, matching LangGraph's ``(state, *, runtime)`` nodes."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig

S_contra = TypeVar("S_contra", contravariant=True)


class Node(Protocol[S_contra]):
    """A graph node: reads ``state``, gets models' context and stream writer from ``runtime``."""

    def __call__(self, state: S_contra, *, runtime: Runtime[AimeConfig]) -> Any: ...
