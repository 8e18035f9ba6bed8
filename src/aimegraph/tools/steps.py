"""Checks of a tool step's call (``TaskSpec.call``) when a plan is validated: the tool
is one the run has and the arguments fit its schema. An argument holding a reference
to a dependency's result (:mod:`aimegraph.state.references`) gets its value only when
the step runs: its type is checked then, by the tool's own validation."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from aimegraph.models.json_tools import tool_args_schema
from aimegraph.state import CallCheck, ToolCallSpec
from aimegraph.state.references import referenced_ids
from aimegraph.tools.registry import ToolRegistry
from aimegraph.tools.whiteboard import MEMORY_BUNDLE

__all__ = ["args_problems", "call_checker", "planner_tools"]

_NOT_FOR_THE_PLANNER = ("human", MEMORY_BUNDLE)
"""Bundles whose tools are an actor's, never a tool step the planner calls: asking
the human, and the run's working memory."""

_LISTED = 40
"""Tool names an unknown-tool error lists at most."""


def call_checker(tools: Mapping[str, BaseTool]) -> CallCheck:
    """The plan check of tool steps over the run's ``tools`` (by name)."""

    def check(call: ToolCallSpec) -> str | None:
        tool = tools.get(call.tool)
        if tool is None:
            names = sorted(tools)
            shown = ", ".join(names[:_LISTED]) + (" ..." if len(names) > _LISTED else "")
            return f"calls unknown tool {call.tool!r}; the run's tools: {shown or '(none)'}"
        pending = [name for name, value in call.args.items() if referenced_ids(value)]
        problems = args_problems(tool, call.args, unchecked=pending)
        known = tool_args_schema(tool).get("properties", {})
        if unknown := [name for name in call.args if known and name not in known]:
            problems.append(f"unknown arguments {unknown}")
        if not problems:
            return None
        return (
            f"the arguments of its call to {call.tool} do not fit it: {'; '.join(problems)}. "
            f"Expected arguments (JSON schema): {json.dumps(known)[:1000]}"
        )

    return check


def args_problems(
    tool: BaseTool, args: Mapping[str, Any], *, unchecked: Collection[str] = ()
) -> list[str]:
    """What is wrong with ``args`` as the arguments of a call to ``tool``, checked
    against the schema a model fills in (``tool_call_schema``: types, required
    arguments), leaving out the values of the ``unchecked`` arguments. A tool
    described by a JSON schema instead of a pydantic model (MCP tools) is checked
    for its required arguments only; the tool checks the rest when it runs."""
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(dict(args))
        except ValidationError as exc:
            return [
                f"{'.'.join(map(str, e['loc'])) or 'args'}: {e['msg']}"
                for e in exc.errors()
                if not (e["loc"] and e["loc"][0] in unchecked and e["type"] != "missing")
            ]
        return []
    required = schema.get("required", []) if isinstance(schema, dict) else []
    if missing := [name for name in required if name not in args]:
        return [f"missing {', '.join(missing)}"]
    return []


def planner_tools(registry: ToolRegistry) -> list[BaseTool]:
    """The run's work tools, bound to the planner (native tool calling) so that a
    plain call in its reply is a tool step: every tool but those of the human and
    memory bundles."""
    work = [name for name in registry.bundles if name not in _NOT_FOR_THE_PLANNER]
    return registry.select(work)
