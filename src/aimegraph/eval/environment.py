"""The simulated world of one rollout (a public benchmark's): its tools and the state
its checks read afterwards; shared by the suite format, the runners and the adapters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.tools import BaseTool

__all__ = ["RolloutEnvironment"]


@dataclass(frozen=True)
class RolloutEnvironment:
    """A simulated world of one rollout (a public benchmark's): its tools, the only
    work tools every system gets (in the bundle ``bundle``), and ``state``, what the
    checks read afterwards (:attr:`aimegraph.eval.checkers.CheckInput.environment`).
    ``begin_turn(index)`` is told when each turn of the conversation starts (a
    benchmark that checks the world turn by turn files each call under its turn)."""

    bundle: str
    description: str
    tools: Sequence[BaseTool]
    state: object
    begin_turn: Callable[[int], None] | None = None
