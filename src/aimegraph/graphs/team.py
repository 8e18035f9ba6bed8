"""Team graphs: the executor over agent units, and one team mode on its own.

The modes' nodes are :mod:`aimegraph.nodes.teams`, their wiring
:mod:`aimegraph.graphs.team_modes`; here they get their
members, each a team-member actor graph (``build_actor_graph(member=True)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Send

from aimegraph.config import AimeConfig
from aimegraph.graphs.actor import build_actor_graph
from aimegraph.graphs.backed_unit import build_backed_unit_graph
from aimegraph.graphs.parts import GraphParts
from aimegraph.graphs.team_modes import mode_graph
from aimegraph.knowledge import KnowledgeBase
from aimegraph.knowledge.embeddings import EmbeddingsSpec
from aimegraph.middleware.calls import call_wrapper
from aimegraph.nodes.actor_factory import ActorFactory, DefaultActorFactory, UnitActorFactory
from aimegraph.nodes.teams.common import MODES, TeamParts, TeamState
from aimegraph.prompts.source import PromptsArg
from aimegraph.state import ActorInput, ActorOutput, ActorState, TeamMode, TeamSpec
from aimegraph.teams.units import AgentRegistry, AgentUnit, UnitMatcher
from aimegraph.tools.registry import ToolRegistry, registry_for


def build_team_executor(
    model: BaseChatModel | str,
    *,
    agents: AgentRegistry | Sequence[AgentUnit],
    registry: ToolRegistry | None = None,
    factory: ActorFactory | None = None,
    knowledge: KnowledgeBase | None = None,
    config: AimeConfig | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    verifier_model: BaseChatModel | str | None = None,
    memory: bool = False,
    embeddings: EmbeddingsSpec = None,
    checkpointer: Checkpointer = None,
    prompts: PromptsArg = None,
    parts: GraphParts | None = None,
) -> CompiledStateGraph[ActorState, AimeConfig, ActorInput, ActorOutput]:
    """Build the executor over agent units: the task's team runs in its mode's
    subgraph; any other task runs in ``single``, the actor graph, as the unit the
    task names (``agent``) or the matcher picks (none when no unit fits). A single
    unit with a model of its own runs as a sequential team of one, on that model.

    Args:
        model: The actors' model (or a spec), for units without one of their own.
        agents: The agent units.
        registry: The tools units' and tasks' bundles come from.
        factory: Builds each actor before its unit is applied; defaults to
            :class:`DefaultActorFactory` over ``registry`` and ``knowledge``.
        knowledge: Passages nearest each task go into its actors' prompts.
        config: Budgets and policies.
        models: The graph's role models, which a unit's ``model`` may name.
        verifier_model: Checks results against completion criteria when
            ``config.verify`` is ``"tasks"`` or ``"both"``.
        memory: Recall and record episodes of single-actor tasks (see
            :func:`build_actor_graph`), and record team tasks' episodes.
        embeddings: What the matcher compares tasks and unit descriptions with
            (hashing by default; ``"minilm"`` for meaning rather than words).
        checkpointer: Only when used on its own; as a node it inherits the parent's.
        prompts: The actors' prompts, members' too (see ``build_aime_graph``).
        parts: The parts shared with the other builders of a graph (``build_aime_graph``
            passes its own); instead of ``config``, ``registry``, ``knowledge`` and
            ``prompts``, and ``models`` by default.

    Returns:
        A compiled graph with the executor's input (:class:`ActorInput`) and output.
    """
    # One set for the members and "single" (one prompt store object, one registry).
    shared = _shared_parts(
        parts, config=config, registry=registry, knowledge=knowledge, prompts=prompts
    )
    team = team_parts(
        model,
        agents=agents,
        factory=factory,
        models=models,
        verifier_model=verifier_model,
        embeddings=embeddings,
        memory=memory,
        parts=shared,
    )

    builder = StateGraph(
        ActorState, context_schema=AimeConfig, input_schema=ActorInput, output_schema=ActorOutput
    )
    builder.add_node(
        "single",
        build_actor_graph(
            team.default_chat,
            factory=team.unit_factory,
            verifier_model=verifier_model,
            memory=memory,
            name="single",
            parts=shared,
        ),
    )
    for mode in MODES:
        builder.add_node(mode, mode_graph(mode, team))
        builder.add_edge(mode, END)
    # A unit backed by an agent of its own does its tasks alone in its own node.
    backed = [unit for unit in team.units.values() if unit.agent is not None]
    for unit in backed:
        builder.add_node(_backed_node(unit.name), build_backed_unit_graph(unit, shared.config))
        builder.add_edge(_backed_node(unit.name), END)
    builder.add_conditional_edges(
        START,
        _route(team.unit_factory),
        ["single", *MODES, *(_backed_node(unit.name) for unit in backed)],
    )
    builder.add_edge("single", END)
    return builder.compile(checkpointer=checkpointer, name="executor")


def _route(units: UnitActorFactory) -> Callable[[ActorState], str | Send]:
    """The task's team mode, else ``single`` (also for a tool step); a unit with a
    model of its own runs as a sequential team of one."""

    def route(state: ActorState) -> str | Send:
        task = state["task"]
        if task.call is not None:  # a tool step: the engine makes its call, no unit
            return "single"
        if task.team is not None:
            return task.team.mode
        name, _ = units.choose(task)
        if name is not None and units.units[name].agent is not None:
            return _backed_node(name)
        if name is not None and units.units[name].model is not None:
            alone = TeamSpec(mode="sequential", members=(name,), max_rounds=1)
            return Send("sequential", {**state, "task": task.model_copy(update={"team": alone})})
        return "single"

    return route


def _backed_node(unit: str) -> str:
    return f"agent_{unit}"


def build_team_graph(
    mode: TeamMode,
    model: BaseChatModel | str,
    *,
    agents: Sequence[AgentUnit],
    registry: ToolRegistry | None = None,
    config: AimeConfig | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    factory: ActorFactory | None = None,
    knowledge: KnowledgeBase | None = None,
    checkpointer: Checkpointer = None,
    prompts: PromptsArg = None,
) -> CompiledStateGraph[TeamState, AimeConfig, ActorInput, ActorOutput]:
    """Build one team mode as a graph of its own.

    Args:
        mode: ``sequential``, ``joint``, ``hierarchical`` or ``broadcast``.
        model: The members' model (or a spec), for units without one of their own.
        agents: The agent units the task's team may name.
        registry: The tools units' bundles come from; defaults to the built-in
            bundles over ``config.workspace``.
        config: Budgets and policies (``max_actor_steps`` per turn, ``tool_calling``...).
        models: Models a unit's ``model`` may name by role key.
        factory: Builds each turn's actor before the unit is applied; defaults to
            :class:`DefaultActorFactory` over ``registry`` and ``knowledge``.
        knowledge: Passages nearest the task go into each member's prompt.
        checkpointer: Only when used on its own; as a node it inherits the parent's.
        prompts: The members' ``actor`` and ``persona_habits`` prompts (see
            ``build_aime_graph``).

    Returns:
        A compiled graph. Input: :class:`ActorInput` whose ``task.team`` names the
        members. Output: ``tasks`` (the task with its result and ``members``, one
        :class:`MemberResult` per turn), ``updates``, ``usage`` (every member's
        calls and the lead's or merge's) and ``facts``.
    """
    parts = team_parts(
        model,
        agents=agents,
        registry=registry,
        factory=factory,
        knowledge=knowledge,
        config=config,
        models=models,
        prompts=prompts,
    )
    return mode_graph(mode, parts, checkpointer=checkpointer)


def team_parts(
    model: BaseChatModel | str,
    *,
    agents: AgentRegistry | Sequence[AgentUnit],
    registry: ToolRegistry | None = None,
    factory: ActorFactory | None = None,
    knowledge: KnowledgeBase | None = None,
    config: AimeConfig | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    verifier_model: BaseChatModel | str | None = None,
    matcher: UnitMatcher | None = None,
    embeddings: EmbeddingsSpec = None,
    prompts: PromptsArg = None,
    memory: bool = False,
    parts: GraphParts | None = None,
) -> TeamParts:
    """Build the member graphs: one over ``model`` for the units without a model of
    their own, one per unit with one (``AgentUnit.model``: a key of ``models``, a
    spec or a chat model). ``prompts`` are the actors' (see ``build_actor_graph``); with
    ``memory``, each mode graph ends by recording the team task's episode. Without a
    ``matcher``, units are matched to tasks over ``embeddings``. ``parts`` (a graph's
    shared parts) replace ``config``, ``registry``, ``knowledge`` and ``prompts``, and
    give ``models`` by default."""
    shared = _shared_parts(
        parts, config=config, registry=registry, knowledge=knowledge, prompts=prompts
    )
    config, registry, source = shared.config, shared.registry, shared.prompts
    units = agents if isinstance(agents, AgentRegistry) else AgentRegistry(agents, tools=registry)
    chat = config.chat_model(model)
    base = factory or DefaultActorFactory(
        registry, workspace=shared.workspace, knowledge=shared.knowledge, skills=shared.skills
    )
    unit_factory = UnitActorFactory(
        base, units, matcher or UnitMatcher(units, embeddings=embeddings)
    )
    roles = dict(models if models is not None else shared.models)
    chat_of = units.chat_models(chat, roles, resolve=config.chat_model)

    def member_graph(
        member_chat: BaseChatModel, name: str
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        return build_actor_graph(
            member_chat, factory=unit_factory, member=True, name=name, parts=shared
        )

    graphs: dict[str, CompiledStateGraph[Any, Any, Any, Any]] = {
        "member": member_graph(chat, "member")
    }
    # One member graph per distinct model: "member" for the default one, else named
    # after the first unit using it.
    node_by_model: dict[int, str] = {id(chat): "member"}
    node_of = {}
    for name, unit in units.items():
        if unit.agent is not None:  # its turns are its own agent's
            node_of[name] = f"member_{name}"
            graphs[node_of[name]] = build_backed_unit_graph(
                unit, config, member=True, name=node_of[name]
            )
            continue
        node = node_by_model.setdefault(id(chat_of[name]), f"member_{name}")
        if node not in graphs:
            graphs[node] = member_graph(chat_of[name], node)
        node_of[name] = node
    checker = None
    if config.verify in ("tasks", "both"):
        checker = config.chat_model(verifier_model) if verifier_model is not None else chat
    return TeamParts(
        units,
        graphs,
        node_of,
        chat_of,
        chat,
        config,
        registry,
        unit_factory,
        checker,
        source,
        memory,
        call_wrapper(shared.middleware["verifier"]),
    )


def _shared_parts(
    parts: GraphParts | None,
    *,
    config: AimeConfig | None,
    registry: ToolRegistry | None,
    knowledge: KnowledgeBase | None,
    prompts: PromptsArg,
) -> GraphParts:
    """``GraphParts.given``, where a team's registry defaults to the built-in bundles
    over ``config.workspace`` (its units name them)."""
    if parts is None:
        config = config or AimeConfig()
        registry = registry or registry_for(config, knowledge=knowledge)
    return GraphParts.given(
        parts, config=config, registry=registry, knowledge=knowledge, prompts=prompts
    )
