"""Tool registry: every tool registered once, grouped into named bundles.

Actors get the bundles their task names (or, failing that, the best matching
ones), so adding a tool to a bundle makes it available to every actor that needs
that kind of work, and to no other.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, StructuredTool

from aimegraph.imports import import_object

if TYPE_CHECKING:
    from aimegraph.knowledge import KnowledgeBase

ToolLike = BaseTool | Callable[..., Any]


class ToolRegistryError(ValueError):
    """A tool or bundle is registered twice, or an unknown one is asked for."""


@dataclass(frozen=True)
class ToolBundle:
    name: str
    description: str
    tools: tuple[str, ...]


class ToolRegistry:
    """Named tools in named bundles. Tool names are unique across the registry."""

    def __init__(self) -> None:
        self._tools: dict[str, BaseTool] = {}
        self._bundles: dict[str, ToolBundle] = {}

    def add_bundle(self, name: str, description: str, tools: Iterable[ToolLike] = ()) -> None:
        """Declare a bundle (the planner sees its name and description) and fill it."""
        if name in self._bundles:
            raise ToolRegistryError(f"bundle {name!r} is already registered")
        self._bundles[name] = ToolBundle(name, description, ())
        for tool in tools:
            self.add(tool, bundle=name)

    def add(self, tool: ToolLike, *, bundle: str) -> BaseTool:
        """Register ``tool`` (a BaseTool, or a typed function with a docstring) in ``bundle``."""
        if bundle not in self._bundles:
            raise ToolRegistryError(
                f"unknown bundle {bundle!r}; declare it first with add_bundle "
                f"(known: {', '.join(self._bundles) or 'none'})"
            )
        base = tool if isinstance(tool, BaseTool) else StructuredTool.from_function(tool)
        if base.name in self._tools:
            raise ToolRegistryError(f"a tool named {base.name!r} is already registered")
        self._tools[base.name] = base
        old = self._bundles[bundle]
        self._bundles[bundle] = ToolBundle(old.name, old.description, (*old.tools, base.name))
        return base

    @property
    def tools(self) -> Mapping[str, BaseTool]:
        return dict(self._tools)

    @property
    def bundles(self) -> Mapping[str, ToolBundle]:
        return dict(self._bundles)

    def select(self, bundle_names: Iterable[str]) -> list[BaseTool]:
        """The tools of the named bundles, each once, in registration order."""
        wanted: set[str] = set()
        for name in bundle_names:
            if name not in self._bundles:
                raise ToolRegistryError(
                    f"unknown tool bundle {name!r}; available: {', '.join(self._bundles)}"
                )
            wanted.update(self._bundles[name].tools)
        return [tool for name, tool in self._tools.items() if name in wanted]

    def describe(self) -> str:
        """Bundles as the planner sees them."""
        if not self._bundles:
            return "(no tool bundles: tasks are done by reasoning alone)"
        return "\n".join(
            f"- {b.name}: {b.description} (tools: {', '.join(b.tools) or 'none'})"
            for b in self._bundles.values()
        )


def default_registry(
    workspace: str | Path,
    *,
    knowledge: KnowledgeBase | None = None,
    extra_tools: Iterable[ToolLike] = (),
) -> ToolRegistry:
    """The built-in bundles (files, compute, human, memory, and knowledge when a
    knowledge base is given) plus ``extra_tools`` in a ``custom`` bundle."""
    from aimegraph.tools.calculator import calculator
    from aimegraph.tools.files import make_file_tools
    from aimegraph.tools.python import make_python_tool

    registry = ToolRegistry()
    registry.add_bundle(
        "files",
        "Read, write, append and list text files in the run's workspace.",
        make_file_tools(workspace),
    )
    registry.add_bundle(
        "compute",
        "Exact arithmetic and percentages, and running Python code on workspace data.",
        [calculator, make_python_tool(workspace)],
    )
    from aimegraph.tools.human import ask_human

    registry.add_bundle(
        "human", "Ask the human user a question and wait for the answer.", [ask_human]
    )
    from aimegraph.memory.working import MEMORY_BUNDLE, MEMORY_BUNDLE_DESCRIPTION, memory_tools

    registry.add_bundle(MEMORY_BUNDLE, MEMORY_BUNDLE_DESCRIPTION, memory_tools())
    if knowledge is not None:
        from aimegraph.tools.knowledge import make_knowledge_search_tool

        registry.add_bundle(
            "knowledge",
            "Search the knowledge base for background facts and documents.",
            [make_knowledge_search_tool(knowledge)],
        )
    extra = list(extra_tools)
    if extra:
        names = ", ".join(t.name if isinstance(t, BaseTool) else t.__name__ for t in extra)
        registry.add_bundle("custom", f"Tools provided by the application: {names}.", extra)
    return registry


def import_tools(spec: str) -> ToolRegistry | list[ToolLike]:
    """The tools named by ``module:attr`` (as ``aimegraph run --tools`` takes them):
    a tool, a typed function, a list or tuple of them, or a whole ToolRegistry."""
    value = import_object(
        spec,
        malformed=f"--tools takes module:attr (e.g. myapp.tools:TOOLS); got {spec!r}",
        failed="cannot import tools",
        error=ToolRegistryError,
    )
    if isinstance(value, ToolRegistry):
        return value
    items = list(value) if isinstance(value, list | tuple) else [value]
    wrong = [repr(item) for item in items if not (isinstance(item, BaseTool) or callable(item))]
    if wrong:
        raise ToolRegistryError(
            f"{spec!r} must name a tool, a function, a list of them or a ToolRegistry; "
            f"got {', '.join(wrong)}"
        )
    return items


def tool_spec(tool: ToolLike) -> str | None:
    """The ``module:attr`` that :func:`import_tools` finds ``tool`` under in another
    process, or None: a tool defined in ``__main__``, inside a function, or not
    bound to a module-level name (it must be given again where the run resumes)."""
    func = getattr(tool, "func", None) or getattr(tool, "coroutine", None) or tool
    module_name = getattr(func, "__module__", None)
    name = getattr(func, "__qualname__", None)
    if not module_name or not name or module_name == "__main__" or "<locals>" in name:
        return None
    module = sys.modules.get(module_name)
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part, None)
    return f"{module_name}:{name}" if found is tool else None
