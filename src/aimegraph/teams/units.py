"""Agent units: named specialists the planner may assign to
tasks, a matcher that picks one by similarity when a task names none, and the actor
factory that turns a unit into the actor for a task."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from langchain_core.language_models import BaseChatModel
from langgraph.pregel.protocol import PregelProtocol
from pydantic import BaseModel, ConfigDict, Field, model_validator

from aimegraph.imports import import_object
from aimegraph.knowledge import KnowledgeBase
from aimegraph.knowledge.embeddings import EmbeddingsSpec
from aimegraph.state import Task
from aimegraph.tools.registry import ToolRegistry


class AgentUnit(BaseModel):
    """A named specialist: what it is for (``description``, which the planner reads
    and the matcher compares tasks with), who it is (``persona``, the opening of
    its actors' system prompt), the tool bundles it works with and, optionally, its
    own model: a role key of the graph's models (``"planner"``, ``"verifier"``, ...),
    a model spec (``"openai:gpt-4o-mini"``) or a chat model.

    Instead of aimegraph's own actor, ``agent`` may do the unit's work: any agent
    with a ``messages`` channel (a compiled graph such as ``create_agent``'s or a
    deepagents agent, or a ``RemoteGraph``), or an A2A agent: the base URL its agent
    card is published under (the ``a2a`` extra); see :mod:`aimegraph.nodes.teams.backed`."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
    description: str = Field(min_length=1)
    persona: str = ""
    tool_bundles: tuple[str, ...] = ()
    model: str | BaseChatModel | None = None
    agent: PregelProtocol | str | None = None

    @model_validator(mode="after")
    def _one_worker(self) -> AgentUnit:
        if self.agent is not None and (self.model is not None or self.tool_bundles):
            raise ValueError(
                f"agent unit {self.name!r} is backed by an agent: its model and tools are "
                "the agent's own, so it takes no model or tool_bundles"
            )
        if isinstance(self.agent, str) and not self.agent.startswith(("http://", "https://")):
            raise ValueError(
                f"agent unit {self.name!r}: an A2A agent is named by its http(s) URL; "
                f"got {self.agent!r}"
            )
        return self


class AgentRegistry(Mapping[str, AgentUnit]):
    """The units of a graph by name; names are unique and bundles must exist."""

    def __init__(self, units: Iterable[AgentUnit], *, tools: ToolRegistry | None = None) -> None:
        self._units: dict[str, AgentUnit] = {}
        for unit in units:
            if unit.name in self._units:
                raise ValueError(f"two agent units are named {unit.name!r}")
            if tools is not None and (
                unknown := [b for b in unit.tool_bundles if b not in tools.bundles]
            ):
                raise ValueError(
                    f"agent unit {unit.name!r} names unknown tool bundles {unknown}; "
                    f"available: {sorted(tools.bundles)}"
                )
            self._units[unit.name] = unit

    def __getitem__(self, name: str) -> AgentUnit:
        return self._units[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._units)

    def __len__(self) -> int:
        return len(self._units)

    def descriptions(self) -> dict[str, str]:
        """Each unit as the planner sees it: its description and bundles."""
        return {
            unit.name: unit.description
            + (f" (tools: {', '.join(unit.tool_bundles)})" if unit.tool_bundles else "")
            for unit in self._units.values()
        }

    def chat_models(
        self,
        default: BaseChatModel,
        roles: Mapping[str, BaseChatModel],
        *,
        resolve: Callable[[str], BaseChatModel],
    ) -> dict[str, BaseChatModel]:
        """Each unit's chat model: its own, a role's, or ``default``. Each distinct
        spec is resolved once by ``resolve`` (the graph's ``AimeConfig.chat_model``, as
        its role models), so units sharing ``"local"`` share one loaded model."""
        specs: dict[str, BaseChatModel] = {}
        chosen: dict[str, BaseChatModel] = {}
        for name, unit in self._units.items():
            if unit.model is None:
                chosen[name] = default
            elif isinstance(unit.model, BaseChatModel):
                chosen[name] = unit.model
            elif unit.model in roles:
                chosen[name] = roles[unit.model]
            else:
                if unit.model not in specs:
                    specs[unit.model] = resolve(unit.model)
                chosen[name] = specs[unit.model]
        return chosen


class UnitMatcher:
    """Picks the unit whose description is most similar to a task (cosine similarity
    of ``embeddings``, the offline hashing embeddings by default), as the default
    factory picks tool bundles. A best score under ``min_match`` picks none."""

    def __init__(
        self, units: AgentRegistry, *, embeddings: EmbeddingsSpec = None, min_match: float = 0.05
    ) -> None:
        self.min_match = min_match
        self._index = KnowledgeBase(embeddings)
        if units:
            self._index.add_texts(
                [f"{name}: {text}" for name, text in units.descriptions().items()],
                metadatas=[{"source": name} for name in units],
            )
        self._count = len(units)

    def scores(self, task: Task) -> tuple[tuple[str, float], ...]:
        """Every unit with its score for ``task``, best first."""
        if not self._count:
            return ()
        hits = self._index.search(f"{task.title}. {task.description}", k=self._count)
        return tuple((hit.source, round(hit.score, 4)) for hit in hits if hit.source is not None)

    def pick(self, task: Task) -> tuple[str | None, tuple[tuple[str, float], ...]]:
        """The best unit for ``task`` (None when no score reaches ``min_match``),
        and the scores it was chosen by."""
        scores = self.scores(task)
        best = scores[0][0] if scores and scores[0][1] >= self.min_match else None
        return best, scores


def load_agents(spec: str) -> list[AgentUnit]:
    """The agent units ``spec`` names, as ``aimegraph run --agents`` takes them: a YAML
    or JSON file holding a list of units (or ``{agents: [...]}``), or ``module:attr``
    naming an AgentUnit, a list of them or an AgentRegistry.

    Raises:
        ValueError: the file or attribute cannot be read, or is not units.
    """
    if spec.endswith((".yaml", ".yml", ".json")):
        try:
            text = Path(spec).read_text(encoding="utf-8")
            data: Any = json.loads(text) if spec.endswith(".json") else yaml.safe_load(text)
        except (OSError, ValueError) as exc:  # yaml.YAMLError is a ValueError too
            raise ValueError(f"cannot read agent units from {spec}: {exc}") from exc
        if isinstance(data, dict):
            data = data.get("agents")
        if not isinstance(data, list):
            raise ValueError(f"{spec}: expected a list of agent units (or {{agents: [...]}})")
        return [AgentUnit.model_validate(item) for item in data]
    value = import_object(
        spec,
        malformed=f"--agents takes a .yaml/.json file or module:attr; got {spec!r}",
        failed="cannot import agent units",
    )
    units = list(value.values()) if isinstance(value, AgentRegistry) else value
    units = [units] if isinstance(units, AgentUnit) else list(units)
    if not all(isinstance(unit, AgentUnit) for unit in units):
        raise ValueError(f"{spec!r} must name an AgentUnit, a list of them or an AgentRegistry")
    return units
