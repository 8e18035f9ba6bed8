"""AIME's actor factory: the five parts (persona, tools, knowledge, environment,
output format) an actor for a task is assembled from, and the task message that
hands it its task and inputs.

The system prompt puts its stable parts first and the task-specific ones last (the
tools, knowledge, the workspace's files); the criteria and inputs come in the task
message, so that the calls of a run share a prefix for provider prompt caches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Protocol

from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool

from aimegraph.knowledge import KnowledgeBase
from aimegraph.knowledge.embeddings import EmbeddingsSpec
from aimegraph.memory.sections import facts_section
from aimegraph.prompts import actor as prompts
from aimegraph.state import ActorState, Task, TaskResult
from aimegraph.teams.units import AgentRegistry, UnitMatcher
from aimegraph.tools.hints import resolve_annotations
from aimegraph.tools.progress import submit_result, update_progress
from aimegraph.tools.registry import ToolRegistry
from aimegraph.tools.skills import SKILLS_BUNDLE, Skill, skills_section

ALWAYS_BOUND: tuple[BaseTool, ...] = tuple(
    resolve_annotations(report) for report in (update_progress, submit_result)
)
"""Tools every actor has, whatever its bundles: its reports to the engine. A reply
calling only these is run in the react step itself (no tools step)."""


@dataclass(frozen=True)
class ActorSpec:
    """Everything that makes an actor specialised for its task (AIME's actor
    factory): persona, tools (from ``bundles``), retrieved knowledge,
    environment and output format. Inspect it, or render ``system_prompt()``."""

    task_id: str
    persona: str
    bundles: tuple[str, ...]
    tools: tuple[BaseTool, ...]
    knowledge: tuple[str, ...]
    environment: str
    output_format: str
    # Long-term memory (filled by the graph's recall node, not by factories):
    # past episodes shown with the knowledge, the run's whiteboard with the environment.
    experience: tuple[str, ...] = ()
    facts: tuple[tuple[str, str], ...] = ()
    # The prompt components the system prompt is written with (the ``actor``
    # template and the ``persona_habits``): the graph's assemble node sets the
    # run's versions of them (``build_aime_graph(prompts=...)``).
    template: str = prompts.SYSTEM
    habits: str = prompts.PERSONA_HABITS
    # The agent unit doing the task (aimegraph.teams), and why: the matcher's cosine
    # score of each unit's description against the task, best first.
    unit: str | None = None
    unit_scores: tuple[tuple[str, float], ...] = ()

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]

    def system_prompt(self) -> str:
        tools = [*self.tools, *ALWAYS_BOUND]
        return self.template.format(
            persona=self.persona,
            habits=self.habits,
            # The bound definitions (native, or json_mode's list) carry each tool's
            # description and arguments: the prompt only names them.
            tools=", ".join(t.name for t in tools),
            knowledge="\n\n".join([*self.knowledge, *self.experience]) or prompts.NO_KNOWLEDGE,
            environment=self.environment + facts_section(dict(self.facts)),
            output_format=self.output_format,
        )


class ActorFactory(Protocol):
    """Builds the actor for a task. Pass your own to ``build_aime_graph(factory=...)``."""

    def build(self, task: Task, goal: str, dependencies: Mapping[str, TaskResult]) -> ActorSpec:
        """The actor for ``task``."""
        ...


class DefaultActorFactory:
    """AIME's actor factory over a tool registry and an optional knowledge base.

    * persona: the task's persona, looked up in ``personas`` (name -> full text)
      when it is a known name;
    * tools: the task's ``tool_bundles``; when it names none, the bundles whose
      descriptions best match the task (cosine similarity with ``embeddings``, the
      offline hashing embeddings by default): at most ``max_bundles``, each scoring
      at least ``min_match`` and half the best score. Only these are bound: fewer
      tools, fewer mistakes;
    * knowledge: the ``knowledge_k`` passages of ``knowledge`` nearest the task;
    * environment: the workspace and what is in it, today's date;
    * output format: the form of the result (the completion criteria, like the
      inputs, come in the task message: the system prompt stays the same across
      tasks up to the tools, for provider prompt caches);
    * skills: the names and descriptions of ``skills`` in the environment (only
      those the task names, when it names any), with the ``skills`` bundle bound to
      load them (their bodies only on demand).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        workspace: Path,
        knowledge: KnowledgeBase | None = None,
        personas: Mapping[str, str] | None = None,
        embeddings: EmbeddingsSpec = None,
        max_bundles: int = 2,
        min_match: float = 0.05,
        knowledge_k: int = 3,
        skills: Sequence[Skill] = (),
    ) -> None:
        self.registry = registry
        self.skills = tuple(skills)
        self.workspace = Path(workspace)
        self.knowledge = knowledge
        self.personas = dict(personas or {})
        self.max_bundles = max_bundles
        self.min_match = min_match
        self.knowledge_k = knowledge_k
        self._bundle_index = KnowledgeBase(embeddings)
        bundles = list(registry.bundles.values())
        self._bundle_index.add_texts(
            [f"{b.name}: {b.description} Tools: {', '.join(b.tools)}." for b in bundles],
            metadatas=[{"source": b.name} for b in bundles],
        )

    def build(self, task: Task, goal: str, dependencies: Mapping[str, TaskResult]) -> ActorSpec:
        bundles = self.bundles(task)
        # Skills are listed only where load_skill can be bound (a registry of the
        # application's own may have no skills bundle).
        skills = self.skills_for(task) if SKILLS_BUNDLE in self.registry.bundles else ()
        if skills:
            bundles = list(dict.fromkeys([*bundles, SKILLS_BUNDLE]))
        return ActorSpec(
            task_id=task.id,
            persona=self.persona(task),
            bundles=tuple(bundles),
            tools=tuple(self.registry.select(bundles)),
            knowledge=tuple(self.retrieve(task)),
            environment=self.environment() + skills_section(skills),
            output_format=self.output_format(task),
        )

    def persona(self, task: Task) -> str:
        if task.persona in self.personas:
            return self.personas[task.persona]
        if task.persona:
            return prompts.NAMED_PERSONA.format(persona=task.persona)
        return prompts.DEFAULT_PERSONA

    def skills_for(self, task: Task) -> tuple[Skill, ...]:
        """The skills the task names (the planner picked them), else all installed."""
        named = tuple(skill for skill in self.skills if skill.name in task.skills)
        return named or self.skills

    def bundles(self, task: Task) -> list[str]:
        known = [b for b in task.tool_bundles if b in self.registry.bundles]
        if known:
            return known
        matches = self._bundle_index.search(_task_text(task), k=self.max_bundles)
        if not matches:
            return []
        # A weak second match is noise, not a need: keep those close to the best.
        floor = max(self.min_match, matches[0].score * 0.5)
        return [p.source for p in matches if p.source is not None and p.score >= floor]

    def retrieve(self, task: Task) -> list[str]:
        if self.knowledge is None or self.knowledge_k == 0:
            return []
        return [
            f"[{p.citation}] {p.text.strip()}"
            for p in self.knowledge.search(_task_text(task), k=self.knowledge_k)
        ]

    def environment(self) -> str:
        files = sorted(p.name + ("/" if p.is_dir() else "") for p in self.workspace.glob("*"))
        shown = ", ".join(files[:30]) + (" ..." if len(files) > 30 else "")
        lines = [
            f"Workspace: file and python tools work in {self.workspace} "
            "(paths are relative to it).",
            f"Files there now: {shown or '(empty)'}",
            f"Today is {date.today().isoformat()}.",
        ]
        return "\n".join(lines)

    def output_format(self, task: Task) -> str:
        return prompts.DEFAULT_OUTPUT_FORMAT


def _task_text(task: Task) -> str:
    return f"{task.title}. {task.description}"


def task_message(state: ActorState) -> HumanMessage:
    """The human turn that hands the actor its task and its inputs."""
    task = state["task"]
    previous = ""
    if task.attempts > 1 and task.result is not None and task.result.status == "failed":
        previous = prompts.PREVIOUS_ATTEMPT.format(
            attempt=task.attempts, reason=task.result.summary
        )
    deps = "".join(
        prompts.DEPENDENCY.format(
            task_id=dep_id,
            summary=result.summary,
            artifacts=artifact_lines(result.artifacts),
        )
        for dep_id, result in state.get("dependency_results", {}).items()
    )
    return HumanMessage(
        prompts.TASK.format(
            goal=state["goal"],
            conversation=state.get("conversation", ""),
            task_id=task.id,
            attempt=max(task.attempts, 1),
            title=task.title,
            description=_line(prompts.DESCRIPTION, task.description, unless=task.title),
            criteria=_line(prompts.CRITERIA, task.completion_criteria),
            previous_attempt=previous,
            dependencies=deps,
        )
        + state.get("brief", "")
    )


def _line(template: str, text: str, *, unless: str = "") -> str:
    """``template`` filled with ``text``; nothing when ``text`` is empty or ``unless``
    (a line that would say nothing new)."""
    return template.format(text=text) if text not in ("", unless) else ""


def artifact_lines(artifacts: Mapping[str, str]) -> str:
    """A result's artifacts as ``- name: value`` lines, for prompts."""
    return "".join(f"- {name}: {value}\n" for name, value in artifacts.items())


class UnitActorFactory:
    """An :class:`ActorFactory` over agent units, wrapping another factory.

    The unit is the task's ``agent`` (a team member's turn sets it), else the
    matcher's pick; its persona opens the actor's prompt and its bundles join the
    task's. The spec records the unit and the matcher's scores (``unit_scores``).
    A task no unit fits gets the wrapped factory's actor.
    """

    def __init__(self, base: ActorFactory, units: AgentRegistry, matcher: UnitMatcher) -> None:
        self.base = base
        self.units = units
        self.matcher = matcher

    def choose(self, task: Task) -> tuple[str | None, tuple[tuple[str, float], ...]]:
        """The unit for ``task`` and the matcher's scores (none for a named unit)."""
        if task.agent in self.units:
            return task.agent, ()
        return self.matcher.pick(task)

    def build(self, task: Task, goal: str, dependencies: Mapping[str, TaskResult]) -> ActorSpec:
        """The base factory's actor, given the chosen unit's persona and bundles."""
        name, scores = self.choose(task)
        if name is None:
            return replace(self.base.build(task, goal, dependencies), unit_scores=scores)
        unit = self.units[name]
        bundles = tuple(dict.fromkeys((*unit.tool_bundles, *task.tool_bundles)))
        spec = self.base.build(
            task.model_copy(update={"tool_bundles": bundles}), goal, dependencies
        )
        return replace(spec, persona=unit.persona or spec.persona, unit=name, unit_scores=scores)
