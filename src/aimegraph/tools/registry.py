"""Tool registry: every tool registered once, grouped into named bundles.

Actors get the bundles their task names (or, failing that, the best matching
ones), so adding a tool to a bundle makes it available to every actor that needs
that kind of work, and to no other.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from langchain_core.tools import BaseTool, StructuredTool

from aimegraph.config import OptInBundle
from aimegraph.imports import import_object
from aimegraph.tools.hints import resolve_annotations
from aimegraph.tools.shell import SHELL_BUNDLE, SHELL_BUNDLE_DESCRIPTION, make_shell_tool

if TYPE_CHECKING:
    from aimegraph.config import AimeConfig, WebConfig
    from aimegraph.knowledge import KnowledgeBase
    from aimegraph.sandbox import Sandbox
    from aimegraph.tools.skills import Skill

ToolLike = BaseTool | Callable[..., Any]

OPT_IN_BUNDLES: tuple[str, ...] = get_args(OptInBundle)
"""Bundles a run has only when its config names them (``AimeConfig.opt_in_bundles``)."""


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def first_sentence(text: str) -> str:
    """The first sentence of a tool's description: its summary where the whole
    description is already in front of the model (the bound tool definition)."""
    return _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]


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
        resolve_annotations(base)
        self._tools[base.name] = base
        old = self._bundles[bundle]
        self._bundles[bundle] = ToolBundle(old.name, old.description, (*old.tools, base.name))
        return base

    def copy(self) -> ToolRegistry:
        """A registry with the same bundles and tools, to extend without changing this one."""
        copied = ToolRegistry()
        copied._tools = dict(self._tools)
        copied._bundles = dict(self._bundles)
        return copied

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
    web: WebConfig | None = None,
    extra_tools: Iterable[ToolLike] = (),
    sandbox: Sandbox | None = None,
    opt_in: Iterable[str] = (),
    skills: Sequence[Skill] = (),
) -> ToolRegistry:
    """The built-in bundles (files, compute, human, memory; knowledge when a
    knowledge base is given; web when a web policy is given), the opt-in bundles
    named in ``opt_in`` (``shell``), ``skills`` in a ``skills`` bundle, plus
    ``extra_tools`` in a ``custom`` bundle. The code tools run in ``sandbox`` (default:
    ``open_sandbox("auto")``, bubblewrap), which shows the skills' folders read-only."""
    from aimegraph.sandbox import Workspace, open_sandbox
    from aimegraph.tools.calculator import calculator
    from aimegraph.tools.files import make_file_tools
    from aimegraph.tools.python import make_python_tool

    opt_in = set(opt_in)
    unknown = sorted(opt_in - set(OPT_IN_BUNDLES))
    if unknown:
        raise ToolRegistryError(
            f"unknown opt-in bundles {unknown}; available: {', '.join(OPT_IN_BUNDLES)}"
        )
    from aimegraph.tools.skills import skill_sandbox

    jail = Workspace(workspace)
    box = skill_sandbox(sandbox if sandbox is not None else open_sandbox(), skills)
    registry = ToolRegistry()
    registry.add_bundle(
        "files",
        "Read, write, append and list text files in the run's workspace.",
        make_file_tools(jail),
    )
    registry.add_bundle(
        "compute",
        "Exact arithmetic and percentages, and running Python code on workspace data.",
        [calculator, make_python_tool(jail, sandbox=box)],
    )
    if SHELL_BUNDLE in opt_in:
        registry.add_bundle(
            SHELL_BUNDLE, SHELL_BUNDLE_DESCRIPTION, [make_shell_tool(jail, sandbox=box)]
        )
    from aimegraph.tools.human import ask_human

    registry.add_bundle(
        "human", "Ask the human user a question and wait for the answer.", [ask_human]
    )
    from aimegraph.tools.whiteboard import MEMORY_BUNDLE, MEMORY_BUNDLE_DESCRIPTION, memory_tools

    registry.add_bundle(MEMORY_BUNDLE, MEMORY_BUNDLE_DESCRIPTION, memory_tools())
    if knowledge is not None:
        from aimegraph.tools.knowledge import make_knowledge_search_tool

        registry.add_bundle(
            "knowledge",
            "Search the knowledge base for background facts and documents.",
            [make_knowledge_search_tool(knowledge)],
        )
    if web is not None:
        from aimegraph.tools.web import WEB_BUNDLE, WEB_BUNDLE_DESCRIPTION, make_web_tools

        registry.add_bundle(WEB_BUNDLE, WEB_BUNDLE_DESCRIPTION, make_web_tools(web))
    if skills:
        add_skills_bundle(registry, skills, sandbox=box)
    extra = list(extra_tools)
    if extra:
        names = ", ".join(t.name if isinstance(t, BaseTool) else t.__name__ for t in extra)
        registry.add_bundle("custom", f"Tools provided by the application: {names}.", extra)
    return registry


def add_skills_bundle(registry: ToolRegistry, skills: Sequence[Skill], *, sandbox: Sandbox) -> None:
    """Add the ``skills`` bundle (``load_skill``, ``read_skill_file``) to ``registry``."""
    from aimegraph.tools.skills import SKILLS_BUNDLE, make_skill_tools, skills_description

    registry.add_bundle(
        SKILLS_BUNDLE, skills_description(skills), make_skill_tools(skills, sandbox=sandbox)
    )


def registry_for(
    config: AimeConfig,
    *,
    knowledge: KnowledgeBase | None = None,
    extra_tools: Iterable[ToolLike] = (),
) -> ToolRegistry:
    """:func:`default_registry` as ``config`` sets it up: its workspace, its sandbox
    (``sandbox``, ``sandbox_network``), its ``opt_in_bundles``, its ``skills`` and its
    ``web`` policy.

    Raises:
        SkillError: a skill folder is malformed (a ``ValueError``).
    """
    from aimegraph.sandbox import open_sandbox
    from aimegraph.tools.skills import load_skills

    return default_registry(
        config.workspace,
        knowledge=knowledge,
        web=config.web,
        extra_tools=extra_tools,
        sandbox=open_sandbox(config.sandbox, network=config.sandbox_network),
        opt_in=config.opt_in_bundles,
        skills=load_skills(config.skills),
    )


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
