"""AimeConfig: budgets and policies of a run.

The config given to the builder is the default; a run may override any field
through LangGraph's runtime context (``graph.invoke(inp, cfg, context={...})``),
except the fields in ``AimeConfig.BUILD_ONLY`` (``model_timeout_s``,
``model_retries``, ``rate_limit``, ``model_cache``, ...), which are applied when the
graph is built.
Context is not checkpointed, so pass the same overrides again when resuming.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import (
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from aimegraph.config.settings import WebConfig, _Settings
from aimegraph.config.settings import settings_error as settings_error
from aimegraph.guardrails.builtin import builtin_guardrail
from aimegraph.mcp_servers import McpServer
from aimegraph.models.resilience import requests_per_second
from aimegraph.models.resolve import DEFAULT_MODEL_RETRIES, DEFAULT_MODEL_TIMEOUT_S, resolve_model
from aimegraph.models.server_schema import ServerSchema
from aimegraph.policy import PolicySpec, ToolRule, policy_name, resolve_policy
from aimegraph.sandbox.factory import SANDBOX_NAMES
from aimegraph.sandbox.protocol import MAX_OUTPUT_CHARS
from aimegraph.state import Price, Usage
from aimegraph.waits import HumanWaitSettings

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.runtime import Runtime

    from aimegraph.models.resolve import ModelSpec

ReplanPolicy = Literal["on_failure", "every_step"]
VerifyPolicy = Literal["auto", "final", "tasks", "both", "off"]
InspectPolicy = Literal["auto", "always", "never"]
EscalatePolicy = Literal["off", "exhausted", "failures"]
EscalationDefault = Literal["give_up", "replan"]
ToolCallingMode = Literal["auto", "native", "json"]
MemoryPolicy = Literal["on", "off"]
SchedulerPolicy = Literal["eager", "batch"]
OptInBundle = Literal["shell"]
ActorDurability = Literal["inherit", "exit"]


class AimeConfig(_Settings, HumanWaitSettings):
    """Budgets and policies. Every budget is enforced by the engine itself, so a
    run always terminates with a clear ``status``, never by ``recursion_limit``."""

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
    replan: ReplanPolicy = "on_failure"
    scheduler: SchedulerPolicy = Field(
        "eager",
        description="'eager': a task starts the moment its dependencies complete; 'batch': "
        "the orchestrator's batch runs to its slowest member before the next (set when built).",
    )
    stream_plans: bool = Field(
        True,
        description="Eager scheduler only: start each task while the planner's reply is still "
        "streaming in, once its spec is complete and checked and its dependencies came before "
        "it; the whole plan is checked when the reply ends. Applies where the planner model "
        "streams (when the graph is built with it on); a run may turn it off; approve_plan "
        "and replan='every_step' turn it off.",
    )
    actor_durability: ActorDurability = Field(
        "inherit",
        description="Eager scheduler only. 'inherit': each actor checkpoints its own ReAct "
        "steps as the run does (a crash resumes an actor mid-way; the dashboard shows its "
        "transcript). 'exit': an actor checkpoints only when it pauses on an interrupt; a "
        "finished actor's result is durable all the same (it is the unit saved), a crash "
        "redoes the actors in flight from their start; cheapest with a database checkpointer.",
    )
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
    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict,
        description="MCP servers whose tools actors may use, one bundle per server, in the "
        "mcpServers JSON shape (needs the [mcp] extra; set when built). Stored with a thread "
        "without literal env / headers values: write secrets as ${VAR}.",
    )
    model_timeout_s: float = Field(
        DEFAULT_MODEL_TIMEOUT_S,
        gt=0,
        description="Seconds per model request, for models given as a spec (set when built).",
    )
    model_retries: int = Field(
        DEFAULT_MODEL_RETRIES,
        ge=0,
        description="Client retries per model request, for models given as a spec (when built).",
    )
    rate_limit: str | None = Field(
        None,
        description="Client-side rate limit per model provider, e.g. '2/s', '30/min', "
        "'1000/h': one limiter per provider, shared by the roles using it, for models "
        "given as a spec (set when built).",
    )
    model_cache: Path | None = Field(
        None,
        description="SQLite file caching model replies: an identical request is answered "
        "from it without calling the model. For development and evals, not production "
        "(models given as a spec; set when built).",
    )
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
    workspace: Path = Field(
        Path(".aimegraph/workspace"),
        description="Directory the file and code tools are jailed to.",
    )
    sandbox: str = Field(
        "auto",
        description="Where model-written code (python, shell) runs (set when built). 'auto': "
        "a bubblewrap sandbox; where it cannot run, code tools refuse each call saying what to "
        "install. 'bubblewrap': the same, but a missing mechanism fails the build. 'none': "
        "unconfined, with a warning on every call. 'module:attr': your own Sandbox.",
    )
    sandbox_network: bool = Field(
        False,
        description="Let sandboxed code use the host's network (set when built). Off, a "
        "python or shell call that fails on a connection or name lookup says the sandbox "
        "has no network.",
    )
    opt_in_bundles: tuple[OptInBundle, ...] = Field(
        (), description="Tool bundles off by default: 'shell' (set when built)."
    )
    skills: tuple[str, ...] = Field(
        (),
        description="Agent Skills folders (each holds a SKILL.md, or is a folder of skill "
        "folders): actors see each skill's name and description and load the rest with "
        "load_skill; the sandbox shows their files read-only at /skills/<name> (set when "
        "built).",
    )
    memory: MemoryPolicy = Field(
        "on",
        description="Long-term memory (with a store): write episodes and lessons, retrieve them.",
    )
    memory_k: int = Field(3, ge=0, description="Past episodes or runs retrieved per prompt.")
    memory_chars: int = Field(
        2_000, ge=100, description="Characters of retrieved memory per prompt, at most."
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
    user_id: str | None = Field(
        None, description="Memory scope of the run (else configurable user_id, else 'default')."
    )
    optimize_online: bool = Field(
        False,
        description="Online prompt optimisation (aimegraph.optimizer.online; needs prompts= a "
        "prompt store and the [optimize] extra; set when built): every finished run is traced; "
        "when the rolling score falls below optimize_threshold, the weakest prompt component "
        "gets one reflective mutation by models['reflection'] (default: the planner's model), "
        "used from the next run on.",
    )
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
    web: WebConfig | None = Field(
        None,
        description="Turns the opt-in web bundle (fetch_url, and web_search when a search "
        "tool is named) on, with its policy; set when built.",
    )
    optimize_trace_file: Path | None = Field(
        None,
        description="The online loop's trace file (JSON Lines); default: "
        "<prompt store>.traces.jsonl beside the store.",
    )
    guardrails: tuple[str, ...] = Field(
        (),
        description="Built-in guardrails, by name: secrets (redact API keys and tokens "
        "in answers and tool arguments), secrets:trip, prompt_injection (flag "
        "instructions in tool outputs), prompt_injection:quarantine, "
        "prompt_injection:trip; set when built.",
    )

    @field_validator("guardrails")
    @classmethod
    def _guardrail_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            builtin_guardrail(name)  # raises ValueError naming the built-in ones
        return value

    @field_validator("sandbox")
    @classmethod
    def _sandbox_spec(cls, value: str) -> str:
        if value not in SANDBOX_NAMES and ":" not in value:
            raise ValueError(
                f"sandbox must be one of {', '.join(SANDBOX_NAMES)} or module:attr; got {value!r}"
            )
        return value

    @field_validator("rate_limit")
    @classmethod
    def _rate_parses(cls, rate: str | None) -> str | None:
        if rate is not None:
            requests_per_second(rate)  # '2/s', '30/min'; anything else fails here
        return rate

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

    def chat_model(self, model: ModelSpec) -> BaseChatModel:
        """The chat model ``model`` names, with this config's ``model_timeout_s``,
        ``model_retries``, ``rate_limit`` and ``model_cache`` (a ``BaseChatModel`` is
        returned as it is): how every builder resolves a model, alone or within
        ``build_aime_graph``."""
        return resolve_model(
            model,
            timeout=self.model_timeout_s,
            max_retries=self.model_retries,
            rate_limit=self.rate_limit,
            cache=self.model_cache,
        )

    @model_validator(mode="after")
    def _cost_needs_prices(self) -> AimeConfig:
        if self.max_cost_usd is not None and not self.prices:
            raise ValueError("max_cost_usd needs a price table: set prices={model: (in, out)}")
        return self

    #: Fields used when the graph is built (models resolved, tools made once), not per run.
    BUILD_ONLY: ClassVar[frozenset[str]] = frozenset(
        {
            "model_timeout_s",
            "model_retries",
            "rate_limit",
            "model_cache",
            "scheduler",
            "optimize_online",
            "web",
            "mcp_servers",
            "sandbox",
            "sandbox_network",
            "opt_in_bundles",
            "skills",
            "guardrails",
        }
    )

    def budget_spent(
        self, usage: Usage, steps: int, *, started_at: float | None = None
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

    def for_run(self, runtime: Runtime[Any] | None) -> AimeConfig:
        """This config with the run's context overrides applied.

        Free when the context is already the run's whole config, as the top-level
        graph makes it when a run starts (:class:`aimegraph.graphs.compiled.AimeGraph`):
        every node and tool call of the run then shares that one validated object."""
        return self.override(runtime.context if runtime is not None else None)

    def override(self, changes: AimeConfig | Mapping[str, Any] | None) -> AimeConfig:
        """This config with the fields of ``changes`` applied (validated).

        A ``changes`` config with every field set is the result as it is: merging
        it would give an equal config, at the cost of a validation."""
        if changes is None or changes is self:
            return self
        if isinstance(changes, AimeConfig):
            if changes.model_fields_set.issuperset(type(self).model_fields):
                self._refuse_build_only({key: getattr(changes, key) for key in self.BUILD_ONLY})
                return changes
            changes = changes.model_dump(exclude_unset=True)
        if not changes:
            return self
        self._refuse_build_only(changes)
        return AimeConfig.model_validate({**self.model_dump(), **dict(changes)})

    def _refuse_build_only(self, changes: Mapping[str, Any]) -> None:
        """Refuse a change of a field applied when the graph was built."""
        fixed = sorted(
            key for key in self.BUILD_ONLY if key in changes and changes[key] != getattr(self, key)
        )
        if fixed:
            raise ValueError(
                f"{', '.join(fixed)} apply when the graph is built (models and tools are set "
                "up then): set them in build_aime_graph(config=AimeConfig(...)), not per run"
            )
