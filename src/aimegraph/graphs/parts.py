"""The parts an aime graph's builders share, each made once.

``build_aime_graph`` makes them (the role models with the config's timeout and
retries, the tool registry, the prompt source...) and hands them to every
sub-builder as ``parts=``; a sub-builder used alone makes its own the same way,
from its ``config``, ``registry``, ``prompts`` and ``knowledge`` arguments.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.language_models import BaseChatModel

from aimegraph.config import AimeConfig
from aimegraph.graphs.sources import open_prompt_source
from aimegraph.guardrails import Guards, as_guards
from aimegraph.knowledge import KnowledgeBase
from aimegraph.middleware import MiddlewareArg, RoleMiddleware
from aimegraph.prompts.source import PromptsArg, PromptSource
from aimegraph.state import PlanChecks
from aimegraph.tools.registry import ToolRegistry
from aimegraph.tools.skills import SKILLS_BUNDLE, Skill, load_skills
from aimegraph.tools.steps import call_checker

if TYPE_CHECKING:
    from aimegraph.teams import AgentRegistry

__all__ = ["GraphParts"]


@dataclass(frozen=True)
class GraphParts:
    """What the builders of one graph share."""

    config: AimeConfig
    registry: ToolRegistry
    prompts: PromptSource
    models: Mapping[str, BaseChatModel] = field(default_factory=dict)
    """The graph's role models (``build_aime_graph``'s); a builder used alone has
    none: its model is its own argument, resolved with ``config.chat_model``."""
    knowledge: KnowledgeBase | None = None
    units: AgentRegistry | None = None
    middleware: RoleMiddleware = field(default_factory=RoleMiddleware)
    """Each role's LangChain middleware (``build_aime_graph(middleware=...)``), checked."""
    guards: Guards = field(default_factory=Guards)
    """The graph's guardrails: the built-ins ``config.guardrails`` names, then the
    builder's ``guardrails``."""

    @cached_property
    def workspace(self) -> Path:
        """``config.workspace``, absolute and resolved: where the file tools are jailed."""
        return Path(self.config.workspace).expanduser().resolve()

    @cached_property
    def skills(self) -> tuple[Skill, ...]:
        """The Agent Skills of ``config.skills``, whose names and descriptions actors see."""
        return load_skills(self.config.skills)

    @cached_property
    def skill_names(self) -> tuple[str, ...]:
        """The skills a plan may name: those actors can load (the registry has the
        ``skills`` bundle to load them with)."""
        if SKILLS_BUNDLE not in self.registry.bundles:
            return ()
        return tuple(skill.name for skill in self.skills)

    def plan_checks(self, agents: Collection[str]) -> PlanChecks:
        """What the run's plans are checked against (the planner's drafts, a predefined
        plan, a human's edits alike): the registry's bundles and tools, the skills a
        plan may name, and ``agents``, the agent units a task may name."""
        return PlanChecks(
            bundles=tuple(self.registry.bundles),
            agents=tuple(agents),
            skills=self.skill_names,
            check_call=call_checker(self.registry.tools),
        )

    @classmethod
    def of(
        cls,
        *,
        config: AimeConfig | None = None,
        registry: ToolRegistry | None = None,
        prompts: PromptsArg = None,
        knowledge: KnowledgeBase | None = None,
        middleware: MiddlewareArg | RoleMiddleware = None,
    ) -> GraphParts:
        """A builder's parts from its own arguments (an empty registry by default)."""
        config = config or AimeConfig()
        return cls(
            config=config,
            registry=registry or ToolRegistry(),
            prompts=open_prompt_source(prompts),
            knowledge=knowledge,
            middleware=RoleMiddleware.of(middleware),
            guards=as_guards((), config.guardrails),
        )

    @classmethod
    def given(
        cls,
        parts: GraphParts | None,
        *,
        config: AimeConfig | None = None,
        registry: ToolRegistry | None = None,
        prompts: PromptsArg = None,
        knowledge: KnowledgeBase | None = None,
        middleware: MiddlewareArg | RoleMiddleware = None,
    ) -> GraphParts:
        """``parts`` when a builder was given them (then none of the rest may be
        given: they are within), else the builder's parts from the rest.

        Raises:
            TypeError: ``parts`` and one of the others both given.
        """
        if parts is None:
            return cls.of(
                config=config,
                registry=registry,
                prompts=prompts,
                knowledge=knowledge,
                middleware=middleware,
            )
        given = {
            "config": config,
            "registry": registry,
            "prompts": prompts,
            "knowledge": knowledge,
            "middleware": middleware,
        }
        clash = [name for name, value in given.items() if value is not None]
        if clash:
            raise TypeError(f"pass {', '.join(clash)} within parts=, not beside it")
        return parts
