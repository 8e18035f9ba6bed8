"""The settings applied when the graph is built (models resolved, tools and the
sandbox made once), not per run: a run's context may not change them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from aimegraph.config.settings import WebConfig, _Settings
from aimegraph.guardrails.builtin import builtin_guardrail
from aimegraph.mcp_servers import McpServer
from aimegraph.models.resilience import requests_per_second
from aimegraph.models.resolve import DEFAULT_MODEL_RETRIES, DEFAULT_MODEL_TIMEOUT_S, resolve_model
from aimegraph.sandbox.factory import SANDBOX_NAMES

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from aimegraph.models.resolve import ModelSpec

__all__ = ["BuildSettings", "OptInBundle", "SchedulerPolicy"]

SchedulerPolicy = Literal["eager", "batch"]
OptInBundle = Literal["shell"]


class BuildSettings(_Settings):
    """The model clients, the scheduler, the tool bundles, the sandbox, the
    guardrails and the online optimiser's switch: every one is used when the graph
    is built, so ``AimeConfig.BUILD_ONLY`` is exactly this group's fields."""

    scheduler: SchedulerPolicy = Field(
        "eager",
        description="'eager': a task starts the moment its dependencies complete; 'batch': "
        "the orchestrator's batch runs to its slowest member before the next (set when built).",
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
    optimize_online: bool = Field(
        False,
        description="Online prompt optimisation (aimegraph.optimizer.online; needs prompts= a "
        "prompt store and the [optimize] extra; set when built): every finished run is traced; "
        "when the rolling score falls below optimize_threshold, the weakest prompt component "
        "gets one reflective mutation by models['reflection'] (default: the planner's model), "
        "used from the next run on.",
    )
    web: WebConfig | None = Field(
        None,
        description="Turns the opt-in web bundle (fetch_url, and web_search when a search "
        "tool is named) on, with its policy; set when built.",
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
