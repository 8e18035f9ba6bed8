"""What a runner gets for one rollout and what it hands back, shared by the runners
of every kind of system (:mod:`aimegraph.eval.task_run`, :mod:`aimegraph.eval.baselines`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import RunControl

from aimegraph.eval.environment import RolloutEnvironment
from aimegraph.eval.suite import Budget, Task
from aimegraph.eval.systems import SystemSpec
from aimegraph.eval.usage import UsageCounter
from aimegraph.models.calls import Mode, resolve_mode
from aimegraph.tools.registry import ToolLike, ToolRegistry, default_registry
from aimegraph.tools.skills import Skill

__all__ = [
    "UNATTENDED_BUNDLES_LEFT_OUT",
    "WORK_BUNDLES",
    "Outcome",
    "RolloutEnvironment",
    "RolloutSetup",
    "thread_config",
    "tool_calling_mode",
    "unattended_registry",
]

UNATTENDED_BUNDLES_LEFT_OUT = ("human",)
"""Bundles no system is offered in an eval: no one answers ``ask_human`` while an
eval runs, and a question would end the rollout ``paused`` (the baselines never
have it either)."""


WORK_BUNDLES = ("files", "compute", "knowledge", "web", "custom")
"""aimegraph's work bundles: what a baseline gets, and what a rollout's own
environment replaces."""


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
    environment: RolloutEnvironment | None = None

    def begin_turn(self, index: int) -> None:
        """Tell the rollout's world that turn ``index`` of the conversation starts."""
        if self.environment is not None and self.environment.begin_turn is not None:
            self.environment.begin_turn(index)


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


def unattended_registry(setup: RolloutSetup, skills: Sequence[Skill] = ()) -> ToolRegistry:
    """The default bundles over the rollout's workspace, with the application's tools
    (and ``skills``, an aimegraph system's), less :data:`UNATTENDED_BUNDLES_LEFT_OUT`. A
    rollout with its own environment gets its tools instead of the work bundles
    (:data:`WORK_BUNDLES`): a benchmark's world is the only one its tasks are judged in."""
    full = default_registry(setup.workspace, extra_tools=setup.tools, skills=skills)
    left_out = set(UNATTENDED_BUNDLES_LEFT_OUT)
    if setup.environment is not None:
        left_out.update(WORK_BUNDLES)
    registry = ToolRegistry()
    for name, bundle in full.bundles.items():
        if name not in left_out:
            registry.add_bundle(name, bundle.description, full.select([name]))
    if setup.environment is not None:
        own = setup.environment
        registry.add_bundle(own.bundle, own.description, own.tools)
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
