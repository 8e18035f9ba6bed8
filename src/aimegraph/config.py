"""AimeConfig: budgets and policies of a run.

The config given to the builder is the default; a run may override any field
through LangGraph's runtime context (``graph.invoke(inp, cfg, context={...})``).
Context is not checkpointed, so pass the same overrides again when resuming.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, Field, model_validator

from aimegraph.state import Usage

ReplanPolicy = Literal["on_failure", "every_step"]
VerifyPolicy = Literal["final", "tasks", "both", "off"]
ToolCallingMode = Literal["auto", "native", "json"]


class AimeConfig(BaseModel):
    """Budgets and policies. Every budget is enforced by the engine itself, so a
    run always terminates with a clear ``status``, never by ``recursion_limit``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_parallel: int = Field(4, ge=1, description="Actors dispatched per orchestration step.")
    max_tasks: int = Field(30, ge=1, description="Largest plan accepted.")
    max_plan_repairs: int = Field(2, ge=0, description="Re-asks when a drafted plan is invalid.")
    max_replans: int = Field(3, ge=0, description="Replans per run.")
    task_retries: int = Field(1, ge=0, description="Re-runs of a failed task before a replan.")
    max_actor_steps: int = Field(10, ge=1, description="ReAct iterations per task.")
    max_steps: int = Field(50, ge=1, description="Orchestration steps per run.")
    max_llm_calls: int | None = Field(None, ge=1, description="LLM calls per run.")
    max_tokens: int | None = Field(None, ge=1, description="Input plus output tokens per run.")
    max_cost_usd: float | None = Field(None, gt=0, description="Spend per run (needs prices).")
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="USD per million (input, output) tokens, by model name; feeds max_cost_usd.",
    )
    replan: ReplanPolicy = "on_failure"
    verify: VerifyPolicy = "final"
    approve_plan: bool = False
    approve_tools: tuple[str, ...] = ()
    tool_calling: ToolCallingMode = "auto"
    max_output_retries: int = Field(
        2, ge=0, description="Re-asks when a model reply does not parse or validate."
    )
    tool_timeout_s: float = Field(60.0, gt=0, description="Wall-clock limit per tool call.")
    max_observation_chars: int = Field(
        8_000, ge=200, description="Tool output longer than this is truncated."
    )
    workspace: Path = Field(
        Path(".aimegraph/workspace"),
        description="Directory the file and python tools are jailed to.",
    )

    @model_validator(mode="after")
    def _cost_needs_prices(self) -> AimeConfig:
        if self.max_cost_usd is not None and not self.prices:
            raise ValueError("max_cost_usd needs a price table: set prices={model: (in, out)}")
        return self

    def budget_spent(self, usage: Usage, steps: int) -> str | None:
        """Which run budget is spent, if any (a sentence for the report)."""
        if steps >= self.max_steps:
            return f"max_steps ({self.max_steps}) orchestration steps reached"
        if self.max_llm_calls is not None and usage.llm_calls >= self.max_llm_calls:
            return f"max_llm_calls ({self.max_llm_calls}) reached"
        if self.max_tokens is not None and usage.total_tokens >= self.max_tokens:
            return f"max_tokens ({self.max_tokens}) reached ({usage.total_tokens} used)"
        if self.max_cost_usd is not None and usage.cost_usd >= self.max_cost_usd:
            return f"max_cost_usd ({self.max_cost_usd}) reached (${usage.cost_usd:.4f} spent)"
        return None

    def for_run(self, runtime: Runtime[Any] | None) -> AimeConfig:
        """This config with the run's context overrides applied."""
        return self.override(runtime.context if runtime is not None else None)

    def override(self, changes: AimeConfig | Mapping[str, Any] | None) -> AimeConfig:
        """This config with the fields of ``changes`` applied (validated)."""
        if changes is None:
            return self
        if isinstance(changes, AimeConfig):
            changes = changes.model_dump(exclude_unset=True)
        if not changes:
            return self
        return AimeConfig.model_validate({**self.model_dump(), **dict(changes)})
