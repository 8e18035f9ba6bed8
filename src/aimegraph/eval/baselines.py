"""The ReAct baselines: LangChain's ``create_agent`` and deepagents, with the same
model and work tools as aimegraph (extra ``[eval]``; deepagents when installed), and
the same tool-calling mode aimegraph's default picks for the model: native, or the
tools described in the prompt (:mod:`aimegraph.eval.json_baseline`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

from aimegraph.eval.checkers import structured_json
from aimegraph.eval.json_baseline import JsonToolCalling
from aimegraph.eval.rollout_io import (
    WORK_BUNDLES,
    Outcome,
    RolloutSetup,
    thread_config,
    tool_calling_mode,
    unattended_registry,
)
from aimegraph.eval.suite import Budget
from aimegraph.eval.systems import SystemSpec
from aimegraph.eval.usage import UsageCounter
from aimegraph.models.reasoning import visible_text
from aimegraph.prompts import baseline
from aimegraph.tools.registry import ToolRegistry

__all__ = ["BASELINE_BUNDLES", "BudgetMiddleware", "baseline_tools", "run_baseline"]

BASELINE_BUNDLES = WORK_BUNDLES
"""The bundles whose tools a baseline gets: aimegraph's work tools (or, in a rollout
with its own environment, that environment's bundle). ``memory`` (aimegraph's run
whiteboard) is an engine part; ``human`` is offered to no system in an eval (no one
answers)."""

DEEPAGENTS_FILE_TOOLS = ("read_file", "write_file", "append_file", "list_dir")
"""aimegraph's file tools, left out for deepagents, which brings its own over the
same workspace."""


class BudgetMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """The task's budget for a ReAct loop: before each model call, the rollout's
    counted calls and tokens (the counter the report reads) and its elapsed time
    are compared with the limits; at one the loop ends (``jump_to: end``) with a
    message saying which, and :attr:`stopped` holds the reason."""

    def __init__(self, counter: UsageCounter, budget: Budget) -> None:
        super().__init__()
        self.counter = counter
        self.budget = budget
        self.started = time.monotonic()
        self.stopped: str | None = None

    @property
    def name(self) -> str:
        return "RolloutBudget"

    def spent(self) -> str | None:
        """The limit reached, if any."""
        limits = self.budget
        if limits.max_llm_calls is not None and self.counter.llm_calls >= limits.max_llm_calls:
            return f"max_llm_calls ({limits.max_llm_calls}) reached"
        if limits.max_tokens is not None and self.counter.total_tokens >= limits.max_tokens:
            return f"max_tokens ({limits.max_tokens}) reached"
        if limits.timeout_s is not None and time.monotonic() - self.started >= limits.timeout_s:
            return f"timeout_s ({limits.timeout_s:g}) reached"
        return None

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        reason = self.spent()
        if reason is None:
            return None
        self.stopped = reason
        return {"jump_to": "end", "messages": [AIMessage(f"Stopped: {reason}.")]}

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)


def baseline_tools(
    registry: ToolRegistry, *, without: Sequence[str] = (), environment: str | None = None
) -> list[BaseTool]:
    """aimegraph's work tools (:data:`BASELINE_BUNDLES`) and the ``environment``
    bundle, less the names in ``without``."""
    wanted = (*BASELINE_BUNDLES, environment) if environment else BASELINE_BUNDLES
    bundles = [b for b in wanted if b in registry.bundles]
    return [tool for tool in registry.select(bundles) if tool.name not in without]


def run_baseline(spec: SystemSpec, setup: RolloutSetup) -> Outcome:
    """Every turn of the task on one thread of a ``create_agent`` (or deepagents) loop."""
    budget = BudgetMiddleware(setup.counter, setup.budget)
    registry = unattended_registry(setup)
    prompt = spec.system_prompt or baseline.SYSTEM
    model = setup.model
    if tool_calling_mode(spec, model) == "json":
        model = JsonToolCalling(inner=model)
    if spec.kind == "deepagents":
        graph = _deep_agent(setup, model, registry, prompt, budget)
    else:
        graph = create_agent(
            model,
            baseline_tools(registry, environment=_environment_bundle(setup)),
            system_prompt=prompt,
            response_format=setup.task.answer_schema,
            middleware=[budget],
            checkpointer=InMemorySaver(),
        )
    state: Mapping[str, Any] = {}
    for index, goal in enumerate(setup.task.goals):
        setup.begin_turn(index)
        state = graph.invoke(
            {"messages": [HumanMessage(goal)]}, thread_config(setup), control=setup.control
        )
    messages = state.get("messages") or []
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    answer = visible_text(last) if last is not None else ""
    structured = structured_json(state.get("structured_response"))
    if budget.stopped is not None:
        status, reason = "budget_exhausted", budget.stopped
    elif answer or structured is not None:
        status, reason = "succeeded", None
    else:
        status, reason = "failed", "the agent ended without an answer"
    return Outcome(answer, structured, status, reason, state)


def _environment_bundle(setup: RolloutSetup) -> str | None:
    return setup.environment.bundle if setup.environment is not None else None


def _deep_agent(
    setup: RolloutSetup,
    model: BaseChatModel,
    registry: ToolRegistry,
    prompt: str,
    budget: BudgetMiddleware,
) -> Any:
    from deepagents import create_deep_agent
    from deepagents.backends import FilesystemBackend

    return create_deep_agent(
        model=model,
        tools=baseline_tools(
            registry, without=DEEPAGENTS_FILE_TOOLS, environment=_environment_bundle(setup)
        ),
        system_prompt=prompt,
        response_format=setup.task.answer_schema,
        middleware=[budget],
        backend=FilesystemBackend(root_dir=str(setup.workspace.resolve()), virtual_mode=True),
        checkpointer=InMemorySaver(),
    )
