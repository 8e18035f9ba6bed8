"""The executor with agent units: one actor, or a team subgraph per mode."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Send

from aimegraph.config import AimeConfig
from aimegraph.graphs.actor import build_actor_graph
from aimegraph.knowledge import KnowledgeBase
from aimegraph.knowledge.embeddings import EmbeddingsSpec
from aimegraph.nodes.executor import ActorFactory
from aimegraph.prompts.source import PromptsArg
from aimegraph.state import ActorInput, ActorOutput, ActorState, TeamSpec
from aimegraph.teams.modes import MODES, mode_graph, team_parts
from aimegraph.teams.units import AgentRegistry, AgentUnit, UnitActorFactory
from aimegraph.tools.registry import ToolRegistry


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

    Returns:
        A compiled graph with the executor's input (:class:`ActorInput`) and output.
    """
    parts = team_parts(
        model,
        agents=agents,
        registry=registry,
        factory=factory,
        knowledge=knowledge,
        config=config,
        models=models,
        verifier_model=verifier_model,
        embeddings=embeddings,
        prompts=prompts,  # one store object for the members and "single"
        memory=memory,
    )

    builder = StateGraph(
        ActorState, context_schema=AimeConfig, input_schema=ActorInput, output_schema=ActorOutput
    )
    builder.add_node(
        "single",
        build_actor_graph(
            parts.default_chat,
            registry=parts.registry,
            factory=parts.unit_factory,
            config=parts.config,
            verifier_model=verifier_model,
            memory=memory,
            name="single",
            prompts=parts.prompts,
        ),
    )
    for mode in MODES:
        builder.add_node(mode, mode_graph(mode, parts))
        builder.add_edge(mode, END)
    builder.add_conditional_edges(START, _route(parts.unit_factory), ["single", *MODES])
    builder.add_edge("single", END)
    return builder.compile(checkpointer=checkpointer, name="executor")


def _route(units: UnitActorFactory) -> Callable[[ActorState], str | Send]:
    """The task's team mode, else ``single``; a unit with a model of its own runs as
    a sequential team of one."""

    def route(state: ActorState) -> str | Send:
        task = state["task"]
        if task.team is not None:
            return task.team.mode
        name, _ = units.choose(task)
        if name is not None and units.units[name].model is not None:
            alone = TeamSpec(mode="sequential", members=(name,), max_rounds=1)
            return Send("sequential", {**state, "task": task.model_copy(update={"team": alone})})
        return "single"

    return route
