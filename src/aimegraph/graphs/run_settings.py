"""What a graph built in Python stores with its threads: the settings another process
rebuilds it from (:class:`~aimegraph.checkpoints.runs.RunSettings`), and the names of
what it was given as objects, which no stored setting can rebuild."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from aimegraph.checkpoints.runs import RunSettings
from aimegraph.config import AimeConfig
from aimegraph.guardrails import GuardrailsArg, as_guards
from aimegraph.mcp_servers import McpServersArg
from aimegraph.middleware import RoleMiddleware
from aimegraph.models.resolve import ModelSpec
from aimegraph.tools.registry import ToolLike, ToolRegistry, tool_spec


def built_settings(
    model: ModelSpec,
    config: AimeConfig,
    *,
    tools: ToolRegistry | Iterable[ToolLike] | None,
    prompts: Any,
    mcp_servers: McpServersArg,
    middleware: RoleMiddleware,
    guardrails: GuardrailsArg,
    models: Mapping[str, ModelSpec] | None,
    objects: Mapping[str, Any],
) -> RunSettings:
    """The settings of a graph ``build_aime_graph`` made from these arguments.

    ``objects`` are the other arguments only Python can give (``agents``, ``knowledge``,
    ``response_format``, ``factory``), by name, None when not given: each given one is
    named in ``unstored``, as are the middleware and the guardrails given as objects,
    each per-role model, prompts given as texts rather than a file or store, and MCP
    servers given as content rather than a file."""
    mcp_file = isinstance(mcp_servers, str | Path) and Path(mcp_servers).expanduser().is_file()
    prompts_file = _prompts_file(prompts)
    unstored = (
        *(f"middleware {name}" for name in middleware.names()),
        *(f"guardrail {g.name}" for g in as_guards(guardrails or ()).guardrails),
        *(f"models {role}" for role in models or {}),
        *(name for name, given in objects.items() if given is not None),
        *(["prompts"] if prompts is not None and prompts_file is None else []),
        *(["mcp_servers"] if mcp_servers is not None and not mcp_file else []),
    )
    return RunSettings(
        model=_spec_text(model),
        config=config,
        tools=_tool_specs(tools),
        prompts=prompts_file,
        mcp=str(mcp_servers) if mcp_file else None,
        unstored=unstored,
    )


def _prompts_file(prompts: Any) -> str | None:
    """The prompt-set file or prompt store (``.jsonl``) the prompts come from, which
    another process opens again; None for texts given in Python."""
    if isinstance(prompts, str | Path):
        return str(prompts)
    path = getattr(prompts, "path", None)  # a PromptStore: reopened from its file
    return str(path) if isinstance(path, str | Path) and str(path).endswith(".jsonl") else None


def _spec_text(model: ModelSpec) -> str | None:
    """The model as a spec string to store with the run (a fallback chain of specs
    joined by commas), or None when a chat model object is part of it."""
    if isinstance(model, str):
        return model
    if isinstance(model, BaseChatModel) or not all(isinstance(m, str) for m in model):
        return None
    return ",".join(str(m).strip() for m in model)


def _tool_specs(tools: ToolRegistry | Iterable[ToolLike] | None) -> tuple[str, ...]:
    """The ``module:attr`` of each application tool another process can import (a
    whole registry, or a tool defined in ``__main__``, must be given again there)."""
    if tools is None or isinstance(tools, ToolRegistry):
        return ()
    return tuple(spec for spec in map(tool_spec, tools) if spec is not None)
