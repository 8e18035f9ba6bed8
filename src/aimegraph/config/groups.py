"""The run-time groups of ``AimeConfig``, one class per concern: what a run may
spend, how its plan is made and scheduled, what is verified, where a human decides,
what memory and context its prompts get, how tools are called, how the online
optimiser behaves. ``AimeConfig`` inherits every group (and
:class:`aimegraph.config.build.BuildSettings`), so its flat field names are the
groups' names; a node factory that needs one concern is typed with that group and
still takes an ``AimeConfig``. Each group may be overridden per run."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import Field, field_serializer, field_validator, model_validator

from aimegraph.config.settings import _Settings
from aimegraph.models.server_schema import ServerSchema
from aimegraph.policy import PolicySpec, ToolRule, policy_name, resolve_policy
from aimegraph.sandbox.protocol import MAX_OUTPUT_CHARS
from aimegraph.state import Price, RoleUsage, Usage
from aimegraph.waits import HumanWaitSettings

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

ReplanPolicy = Literal["on_failure", "every_step"]
VerifyPolicy = Literal["auto", "final", "tasks", "both", "off"]
InspectPolicy = Literal["auto", "always", "never"]
EscalatePolicy = Literal["off", "exhausted", "failures"]
EscalationDefault = Literal["give_up", "replan"]
ToolCallingMode = Literal["auto", "native", "json"]
MemoryPolicy = Literal["on", "off"]
ActorDurability = Literal["inherit", "exit"]


class RunSettings(_Settings):
    """A group a run may override through its context, so a node factory typed with
    it reads the run's values, as one given the whole ``AimeConfig`` does."""

    def for_run(self, runtime: Runtime[Any] | None) -> Self:
        """These settings with the run's context overrides applied."""
        return self.override(runtime.context if runtime is not None else None)

    def override(self, changes: _Settings | Mapping[str, Any] | None) -> Self:
        """These settings with the fields of ``changes`` that are this group's
        applied (validated). Settings that set every field of this group (the run's
        whole config, as the top-level graph makes it when a run starts) are the
        result as they are, without a validation."""
        if changes is None or changes is self:
            return self
        fields = type(self).model_fields
        if isinstance(changes, _Settings):
            if isinstance(changes, type(self)) and changes.model_fields_set.issuperset(fields):
                return changes
            changes = changes.model_dump(exclude_unset=True)
        mine = {key: value for key, value in changes.items() if key in fields}
        if not mine:
            return self
        return self.model_validate({**self.model_dump(), **mine})


class BudgetSettings(RunSettings):
    """What a run may spend before it ends with ``status`` 'budget_exhausted'."""

    max_actor_steps: int = Field(10, ge=1, description="ReAct iterations per task.")
    max_steps: int = Field(50, ge=1, description="Orchestration steps per run.")
    max_llm_calls: int | None = Field(None, ge=1, description="LLM calls per run.")
    max_tokens: int | None = Field(None, ge=1, description="Input plus output tokens per run.")
    max_cost_usd: float | None = Field(None, gt=0, description="Spend per run (needs prices).")
    max_wall_s: float | None = Field(
        None,
        gt=0,
        description="Wall-clock seconds per run, from its start; time paused at an interrupt "
        "counts. Checked between steps, like the other budgets.",
    )
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description="USD per million (input, output) tokens, or (input, output, cached input), "
        "by model name: the cost in usage, per role, task and member; feeds max_cost_usd.",
    )

    @model_validator(mode="after")
    def _cost_needs_prices(self) -> Self:
        if self.max_cost_usd is not None and not self.prices:
            raise ValueError("max_cost_usd needs a price table: set prices={model: (in, out)}")
        return self

    def budget_spent(
        self, usage: Usage | RoleUsage, steps: int, *, started_at: float | None = None
    ) -> str | None:
        """Which run budget is spent, if any (a sentence for the report).

        ``started_at`` is the run's start (``time.time()``, the state's
        ``run_started_at``); without it the wall-clock budget is not checked.
        """
        if self.max_wall_s is not None and started_at is not None:
            elapsed = time.time() - started_at
            if elapsed >= self.max_wall_s:
                return f"max_wall_s ({self.max_wall_s:g} s) reached ({elapsed:.1f} s elapsed)"
        if steps >= self.max_steps:
            return f"max_steps ({self.max_steps}) orchestration steps reached"
        if self.max_llm_calls is not None and usage.llm_calls >= self.max_llm_calls:
            return f"max_llm_calls ({self.max_llm_calls}) reached"
        if self.max_tokens is not None and usage.total_tokens >= self.max_tokens:
            return f"max_tokens ({self.max_tokens}) reached ({usage.total_tokens} used)"
        if self.max_cost_usd is not None and usage.cost_usd >= self.max_cost_usd:
            return f"max_cost_usd ({self.max_cost_usd}) reached (${usage.cost_usd:.4f} spent)"
        return None


class PlanningSettings(RunSettings):
    """How the plan is drafted, repaired, replanned and dispatched."""

    max_parallel: int = Field(4, ge=1, description="Actors dispatched per orchestration step.")
    max_tasks: int = Field(30, ge=1, description="Largest plan accepted.")
    max_plan_repairs: int = Field(2, ge=0, description="Re-asks when a drafted plan is invalid.")
    planner_tools: bool = Field(
        False,
        description="With native tool calling, bind the run's work tools to the planner: a "
        "plain tool call in its reply is a tool step. Off by default: their schemas would be "
        "in every planner prompt, and the planner writes the same tool steps as `call` in "
        "its plan for less (bench/results/eval.md).",
    )
    max_replans: int = Field(3, ge=0, description="Replans per run.")
    task_retries: int = Field(1, ge=0, description="Re-runs of a failed task before a replan.")
    replan: ReplanPolicy = "on_failure"
    stream_plans: bool = Field(
        False,
        description="Eager scheduler only: start each task while the planner's reply is still "
        "streaming in, once its spec is complete and checked and its dependencies came before "
        "it; the whole plan is checked when the reply ends. Applies where the planner model "
        "streams (when the graph is built with it on); a run may turn it off; approve_plan "
        "and replan='every_step' turn it off. Off by default: the planner node then runs the "
        "tasks it started, so the top-level checkpoints (get_state, the A2A and MCP servers' "
        "progress) show the plan's tasks only when that node returns.",
    )
    actor_durability: ActorDurability = Field(
        "inherit",
        description="Eager scheduler only. 'inherit': each actor checkpoints its own ReAct "
        "steps as the run does (a crash resumes an actor mid-way; the dashboard shows its "
        "transcript). 'exit': an actor checkpoints only when it pauses on an interrupt; a "
        "finished actor's result is durable all the same (it is the unit saved), a crash "
        "redoes the actors in flight from their start; cheapest with a database checkpointer.",
    )


class VerificationSettings(RunSettings):
    """What the verifier checks, and how it looks."""

    verify: VerifyPolicy = Field(
        "auto",
        description="'auto': the verifier judges the final answer wherever it can catch "
        "something (actors did tasks, files written, failures or replans, a direct answer, "
        "an answer that goes beyond the tool outputs) and not when the answer is written "
        "from clean tool steps alone; 'final': always; 'tasks': each task's result against "
        "its completion criteria instead; 'both'; 'off'.",
    )
    verifier_inspects: InspectPolicy = Field(
        "auto",
        description="The verifier (and the per-task check) as a small agent inspecting the "
        "workspace with read-only tools (list_dir, read_lines, python to recompute a figure): "
        "'auto' when the run wrote or changed files there, 'always', or 'never' (one call "
        "judging the answer's text).",
    )
    verifier_max_steps: int = Field(
        6, ge=1, description="Tool steps the inspecting verifier may take per verdict."
    )


class HumanControlSettings(RunSettings, HumanWaitSettings):
    """Where a human decides: plan and tool approvals, escalations, and (from
    :class:`aimegraph.waits.HumanWaitSettings`) how long a wait lasts and who is told."""

    approve_plan: bool = False
    approve_tools: tuple[str | ToolRule, ...] = Field(
        (),
        description="Tool calls a human approves, approves with edited arguments, or rejects: "
        "tool names (every call asked) and rules ({tool, args, decision, reason}: the first "
        "matching rule allows, asks or denies the call); a call no entry matches runs.",
    )
    tool_policy: PolicySpec | None = Field(
        None,
        description="A callable (or its 'module:attr') deciding each tool call before the "
        "approve_tools rules: policy(call, task) -> 'allow' | 'ask' | 'deny' | None (None: "
        "the rules decide).",
    )
    escalate: EscalatePolicy = Field(
        "off",
        description="Pause for a human instead of ending the run: 'exhausted' when plan "
        "repairs or replans run out (a task failed after them, a stall, the verifier "
        "rejecting with none left); 'failures' also as soon as a task fails for good (after "
        "its retries), before any replan. The human edits the plan, answers for the failed "
        "task, grants a replan or gives up.",
    )
    escalation_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Seconds a human has to answer an escalation; then the front end driving "
        "the run (aimegraph run / resume, the dashboard, a distributed worker, "
        "aimegraph.waits.await_overdue) "
        "takes escalation_default, for unattended runs.",
    )
    escalation_default: EscalationDefault = Field(
        "give_up", description="What an unanswered escalation does: 'give_up' or 'replan'."
    )

    @field_validator("tool_policy")
    @classmethod
    def _policy_imports(cls, policy: PolicySpec | None) -> PolicySpec | None:
        if policy is not None:
            resolve_policy(policy)  # a 'module:attr' that does not import fails here
        return policy

    @field_serializer("tool_policy", when_used="json")
    def _policy_by_name(self, policy: PolicySpec | None) -> str | None:
        return None if policy is None else policy_name(policy)

    @property
    def gates_tools(self) -> bool:
        """Whether some tool call may have to wait for a human (or be refused)."""
        return bool(self.approve_tools) or self.tool_policy is not None


class ToolSettings(RunSettings):
    """How tools are called and where they work (the tool bundles, the sandbox and
    MCP servers are set when built: :class:`aimegraph.config.build.BuildSettings`)."""

    tool_calling: ToolCallingMode = "auto"
    server_schema: ServerSchema = Field(
        "auto",
        description="In JSON mode, how an OpenAI-compatible server (openai:<model>) is asked "
        "for the schema of each reply (plan, verdict, one call of one bound tool): 'auto' "
        "tries OpenAI's response_format json_schema (llama.cpp server, vLLM, Ollama, LM "
        "Studio), then llama-cpp-python's json_object with a schema, remembering per model "
        "what the server takes; 'json_schema', 'json_object' or 'guided_json' (vLLM's "
        "extra parameter) name one; 'off' describes the schema in the prompt only. A server "
        "refusing the field is asked again without it.",
    )
    max_output_retries: int = Field(
        2, ge=0, description="Re-asks when a model reply does not parse or validate."
    )
    tool_timeout_s: float = Field(
        60.0, gt=0, description="Wall-clock limit per tool call (a tool's own limit replaces it)."
    )
    workspace: Path = Field(
        Path(".aimegraph/workspace"),
        description="Directory the file and code tools are jailed to.",
    )


class ContextSettings(RunSettings):
    """How much text goes into prompts: the goal, tool observations, an actor's
    conversation, a thread's earlier turns."""

    max_goal_chars: int = Field(
        20_000, ge=1, description="Longest goal accepted (the goal goes into every prompt)."
    )
    max_observation_chars: int = Field(
        8_000,
        ge=200,
        description="Tool output longer than this is kept whole in the workspace "
        "(.tool_outputs/) and shown as its head, tail and path. The python and shell "
        f"tools' output is capped at {MAX_OUTPUT_CHARS:,} characters before that (a note "
        "says so when the cap cuts it).",
    )
    max_context_tokens: int | None = Field(
        None,
        ge=500,
        description="An actor's conversation above this (approximate) size has its older "
        "tool observations summarised by the model.",
    )
    max_conversation_tokens: int = Field(
        2_000,
        ge=0,
        description="A run on a thread with earlier turns shows the planner, the reporter and "
        "the verifier this many (approximate) tokens of them at most, newest whole, older ones "
        "a line each; actors get a quarter of it. 0: no earlier turns.",
    )


class MemorySettings(RunSettings):
    """Long-term memory: whether it is written and read, how much, for whom."""

    memory: MemoryPolicy = Field(
        "on",
        description="Long-term memory (with a store): write episodes and lessons, retrieve them.",
    )
    memory_k: int = Field(3, ge=0, description="Past episodes or runs retrieved per prompt.")
    memory_chars: int = Field(
        2_000, ge=100, description="Characters of retrieved memory per prompt, at most."
    )
    user_id: str | None = Field(
        None, description="Memory scope of the run (else configurable user_id, else 'default')."
    )


class OptimisationSettings(RunSettings):
    """The online prompt optimiser's loop (switched on when built, by
    ``optimize_online``)."""

    optimize_window: int = Field(
        5, ge=1, description="Runs of one prompt version the online loop's rolling score covers."
    )
    optimize_threshold: float = Field(
        0.5, ge=0, le=1, description="Rolling score (0-1) below which the online loop mutates."
    )
    optimize_max_llm_calls: int = Field(
        10,
        ge=0,
        description="Reflection calls the online loop may make in all, counted in its trace "
        "file across runs and processes; apart from the runs' own budgets.",
    )
    optimize_components: tuple[str, ...] = Field(
        ("planner", "actor"), min_length=1, description="Components the online loop may mutate."
    )
    optimize_trace_file: Path | None = Field(
        None,
        description="The online loop's trace file (JSON Lines); default: "
        "<prompt store>.traces.jsonl beside the store.",
    )
