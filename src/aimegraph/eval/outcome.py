"""What a runner gets for one rollout and what it hands back, shared by the runners
of every kind of system (:mod:`aimegraph.eval.runners`, :mod:`aimegraph.eval.baselines`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import RunControl

from aimegraph.eval.suite import Budget, Task
from aimegraph.eval.systems import SystemSpec
from aimegraph.eval.usage import UsageCounter
from aimegraph.models.calls import Mode, resolve_mode
from aimegraph.tools.registry import ToolLike, ToolRegistry, default_registry

__all__ = [
    "UNATTENDED_BUNDLES_LEFT_OUT",
    "Outcome",
    "RolloutSetup",
    "thread_config",
    "tool_calling_mode",
    "unattended_registry",
]

UNATTENDED_BUNDLES_LEFT_OUT = ("human",)
"""Bundles no system is offered in an eval: no one answers ``ask_human`` while an
eval runs, and a question would end the rollout ``paused`` (the baselines never
have it either)."""


@dataclass(frozen=True)
class RolloutSetup:
    """What a runner gets for one rollout. ``control`` stops its graph at the next
    step when the eval is stopped (LangGraph's cooperative drain)."""

    task: Task
    workspace: Path
    model: BaseChatModel
    budget: Budget
    counter: UsageCounter
    tools: tuple[ToolLike, ...]
    thread_id: str
    control: RunControl


@dataclass(frozen=True)
class Outcome:
    """What a system produced: the last turn's answer (text) and typed answer (JSON
    data), its status (aimegraph's; a baseline ``succeeded`` when it answered,
    ``budget_exhausted`` when stopped by the budget), why it ended that way, and the
    output state the checkers may read."""

    answer: str
    structured_response: Any
    status: str
    reason: str | None
    state: Mapping[str, Any]


def unattended_registry(setup: RolloutSetup) -> ToolRegistry:
    """The default bundles over the rollout's workspace, with the application's tools,
    less :data:`UNATTENDED_BUNDLES_LEFT_OUT`."""
    full = default_registry(setup.workspace, extra_tools=setup.tools)
    registry = ToolRegistry()
    for name, bundle in full.bundles.items():
        if name not in UNATTENDED_BUNDLES_LEFT_OUT:
            registry.add_bundle(name, bundle.description, full.select([name]))
    return registry


def tool_calling_mode(spec: SystemSpec, model: BaseChatModel) -> Mode:
    """How ``spec``'s system calls tools with ``model``: an aimegraph system as its
    ``tool_calling`` says (``auto`` by default), a baseline as aimegraph's default does,
    so that both describe the tools in the prompt (JSON mode) for a model without
    native tool calling."""
    setting = spec.config.get("tool_calling", "auto") if spec.kind == "aimegraph" else "auto"
    return resolve_mode(str(setting), model)


def thread_config(setup: RolloutSetup) -> RunnableConfig:
    """The rollout's thread, with its usage counter as the callback."""
    return {"configurable": {"thread_id": setup.thread_id}, "callbacks": [setup.counter]}
