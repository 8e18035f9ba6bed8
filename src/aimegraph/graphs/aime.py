"""The top-level aime graph: planner -> orchestrator <-> executors -> reporter -> verifier."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer

from aimegraph.checkpoints.lease import share_leases
from aimegraph.checkpoints.serde import allowed_types, with_allowed_types
from aimegraph.config import AimeConfig
from aimegraph.graphs.actor import build_actor_graph
from aimegraph.graphs.compiled import AimeGraph
from aimegraph.graphs.parts import GraphParts
from aimegraph.graphs.planner import build_planner_graph
from aimegraph.graphs.run_settings import built_settings
from aimegraph.graphs.screening import INPUT_GUARDRAILS, SCREEN, add_input_screen
from aimegraph.graphs.sources import open_prompt_source
from aimegraph.graphs.verifier import build_verifier_graph
from aimegraph.guardrails import GuardrailsArg, as_guards
from aimegraph.knowledge import KnowledgeBase
from aimegraph.mcp_servers import McpServersArg, load_mcp_servers
from aimegraph.middleware import MiddlewareArg, RoleMiddleware
from aimegraph.middleware.approval import approval_rules
from aimegraph.middleware.calls import call_wrapper
from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.models.partial import streams
from aimegraph.models.resolve import ModelSpec, resolve_models
from aimegraph.models.response_format import ResponseFormat, TypedAnswer
from aimegraph.nodes.actor_factory import ActorFactory
from aimegraph.nodes.escalation import make_escalate_node
from aimegraph.nodes.executor import make_executor_node
from aimegraph.nodes.human import make_approve_plan_node, route_after_approval
from aimegraph.nodes.intake import make_intake_node
from aimegraph.nodes.memory import make_run_record_node
from aimegraph.nodes.orchestrator import make_orchestrator_node
from aimegraph.nodes.reporter import make_reporter_node, route_after_reporter
from aimegraph.nodes.streamed_plan import make_streaming_planner_node
from aimegraph.prompts.source import PromptsArg
from aimegraph.state import (
    AimeInput,
    AimeOutput,
    AimeState,
    PlanChecks,
    PlanLike,
    PlanUpdate,
    Usage,
    load_plan,
)
from aimegraph.tools.registry import ToolLike, ToolRegistry, registry_for

if TYPE_CHECKING:
    from aimegraph.teams import AgentUnit


def build_aime_graph(
    model: ModelSpec,
    *,
    tools: ToolRegistry | Iterable[ToolLike] | None = None,
    config: AimeConfig | None = None,
    models: Mapping[str, ModelSpec] | None = None,
    checkpointer: Checkpointer = None,
    store: BaseStore | None = None,
    knowledge: KnowledgeBase | None = None,
    factory: ActorFactory | None = None,
    agents: Sequence[AgentUnit] | None = None,
    prompts: PromptsArg = None,
    response_format: ResponseFormat | None = None,
    mcp_servers: McpServersArg = None,
    plan: PlanLike | str | Path | None = None,
    skills: Iterable[str | Path] = (),
    middleware: MiddlewareArg = None,
    guardrails: GuardrailsArg = None,
    name: str = "aime",
) -> AimeGraph:
    """Build the AIME workflow: plan a task DAG, run ready tasks in parallel, report, verify.

    Args:
        model: The chat model for every role, or a spec: ``openai:<model>``,
            ``<provider>:<model>`` (``anthropic:``, ``ollama:``, ... any provider
            ``init_chat_model`` knows), ``local``, ``scripted:<scenario>``; or a
            fallback chain: a list of them, or specs joined by commas (the next model
            answers when one fails with a rate limit, a 5xx, a timeout).
        tools: A :class:`ToolRegistry` used as is, or tools to add to the built-in
            bundles (files, compute, human, memory, knowledge, and web when
            ``config.web`` is set) in a ``custom`` bundle.
        config: Budgets and policies; fields can be overridden per run through
            ``context=`` (e.g. ``graph.invoke(inp, cfg, context={"max_parallel": 2})``).
        models: Per-role models overriding ``model``: keys ``planner``, ``actor``,
            ``verifier``, ``reporter``; and ``reflection``, the model that rewrites
            prompts when ``config.optimize_online`` is on (default: the planner's).
        checkpointer: Enables pause/resume, human approval and crash recovery. The
            graph uses it with aimegraph's records, the types registered with
            ``aimegraph.checkpoints.allow_types`` and the ``response_format`` model
            in its serializer's allowlist (``aimegraph.checkpoints.with_allowed_types``:
            LangGraph's default serializer is replaced by ``make_serializer()``'s, an
            allowlist is extended, a serializer of your own is kept as it is).
        store: A LangGraph store (see ``aimegraph.memory.open_store``): long-term
            memory. The planner and each actor recall similar past runs and
            episodes from it, and each settled task and each finished run is
            recorded in it (``AimeConfig.memory="off"`` turns this off per run).
        knowledge: A knowledge base: actors search it with the ``knowledge`` bundle's
            tool, and the default factory puts the passages nearest each task in
            the actor's prompt.
        factory: Assembles each task's actor; defaults to :class:`DefaultActorFactory`.
        agents: Agent units (:class:`aimegraph.AgentUnit`). The planner sees them and
            may give a task one (``agent``) or a team (``team``: sequential, joint,
            hierarchical or broadcast, each a subgraph of the executor); a task
            naming neither is done by the unit whose description matches it best.
        prompts: The role prompts (components ``planner``, ``actor``, ``verifier``,
            ``reporter``, ``persona_habits``; see ``aimegraph.prompts.DEFAULT_PROMPTS``):
            a mapping of overrides, a JSON / YAML prompt-set file, a prompt store
            (``aimegraph.optimizer.store.PromptStore`` or its ``.jsonl`` path), or
            any ``aimegraph.prompts.source.PromptSource``. Each run uses the
            source's current version when it starts (a store's active one), recorded
            in ``prompt_version``; a change takes effect from the next run, never
            mid-run, and a resumed run keeps its version. Overrides are checked
            here: an unknown component or a dropped placeholder is a ``ValueError``.
        response_format: A typed final answer, as LangChain's ``create_agent`` takes
            it: a pydantic model or a JSON schema of an object. The reporter fills it
            in with structured output (re-asked when a reply does not validate) into
            ``structured_response`` (the model's instance, or a dict for a schema);
            ``final_answer`` is its JSON, which the verifier judges. A reply that
            never validates ends the run ``failed`` with the reason. The model
            class joins the checkpointer's allowlist (see ``checkpointer``).
        mcp_servers: MCP servers whose tools actors may use (the ``[mcp]`` extra): the
            path of a JSON file in the common ``{"mcpServers": {...}}`` shape, that
            content, or ``{name: spec}``; added to ``config.mcp_servers``. Each server
            is a tool bundle named after it. Their tools are listed here (a server
            that cannot start raises ``McpServerError`` naming it); during a run each
            server has one session, opened on its first call and closed when the run
            ends, however it ends (see :mod:`aimegraph.tools.mcp`).
        plan: A predefined plan each run starts from, instead of the planner's first
            plan (no model call): a ``PlanUpdate``, its dict, a list of task specs
            (actor tasks and tool steps), or the path of a YAML / JSON file of one.
            Checked here as the planner's plans are (``PlanError``, a ``ValueError``,
            says why it is refused); a run's input ``plan`` takes its place. Failed
            tasks and rejected answers are still replanned by the planner model.
        skills: Agent Skills folders (each holds a ``SKILL.md`` with ``name`` and
            ``description`` front matter, or is a folder of such folders), added to
            ``config.skills``. Each actor's prompt lists their names and descriptions;
            the ``skills`` bundle's ``load_skill`` returns a skill's instructions, and
            the code tools see its files read-only at ``/skills/<name>``. A malformed
            folder raises ``SkillError`` (a ``ValueError``) naming the file.
        middleware: LangChain v1 ``AgentMiddleware`` (prebuilt classes, subclasses, or
            made with ``@before_model``, ``@wrap_model_call``, ``@wrap_tool_call``...): a
            list for the actors (their model and tool calls), or a mapping of
            ``actor``, ``planner``, ``reporter`` and ``verifier`` to lists (the last
            three honour ``wrap_model_call`` hooks only). ``HumanInTheLoopMiddleware``
            becomes approval rules of the actors' tool calls. What a role cannot
            honour raises :class:`aimegraph.middleware.MiddlewareError` here (README:
            Middleware).
        guardrails: Checks (``aimegraph.guardrails.Guardrail``) on the goal (run beside
            the first planner call), the final answer, and every tool call's arguments
            and output; after the built-ins ``config.guardrails`` names. One may pass,
            redact the text, or trip: the run then ends ``blocked`` with the reason,
            and a goal that trips has no task started, so no tool runs.
        name: The compiled graph's name.

    Returns:
        A compiled graph (an :class:`~aimegraph.graphs.compiled.AimeGraph`: each run
        holds its MCP sessions and async tool calls, released when it ends; its
        settings go into its checkpoints; Ctrl-C drains it; an ``update_state`` never
        drops actors waiting on a human). Input
        ``{"goal": ...}`` or ``{"messages": [...]}``; output ``final_answer``,
        ``status``, ``reason``, ``tasks``, ``verdict``, ``usage``,
        ``structured_response`` and the rest of ``AimeOutput``. A run on a thread with
        earlier turns sees a bounded view of them (``max_conversation_tokens``).
    """
    config = config or AimeConfig()
    if skills:
        config = config.model_copy(update={"skills": (*config.skills, *map(str, skills))})
    typed = TypedAnswer.of(response_format) if response_format is not None else None
    # The typed answer's class too: a strict serializer would hand it back from a
    # checkpoint as a plain dict.
    answer_class = [typed.schema] if typed is not None and not typed.plain else []
    checkpointer = with_allowed_types(checkpointer, answer_class)
    if tools is not None and not isinstance(tools, ToolRegistry):
        tools = list(tools)  # read twice: registered, and recorded in the run settings
    parts = _graph_parts(
        model,
        models=models,
        config=config,
        tools=tools,
        knowledge=knowledge,
        prompts=prompts,
        mcp_servers=mcp_servers,
        agents=agents,
        middleware=RoleMiddleware.of(middleware),
        guardrails=guardrails,
    )
    registry, source, units, role_models = parts.registry, parts.prompts, parts.units, parts.models
    checks = parts.plan_checks(units.descriptions() if units is not None else ())
    given = _checked_plan(plan, parts, checks) if plan is not None else None
    screen_input = bool(parts.guards.at("input"))
    # Before the other nodes: it checks that approve_tools names tools there are.
    intake = make_intake_node(
        config,
        tool_names=list(registry.tools),
        prompts=source,
        plan=given,
        approvals=approval_rules(parts.middleware["actor"]),
        screen_input=screen_input,
    )

    builder = StateGraph(
        AimeState, context_schema=AimeConfig, input_schema=AimeInput, output_schema=AimeOutput
    )
    memory = store is not None
    planner = build_planner_graph(
        role_models["planner"],
        memory=memory,
        ask_approval=False,
        agents=units.descriptions() if units is not None else None,
        parts=parts,
    )
    builder.add_node(
        "orchestrator",
        make_orchestrator_node(config),
        destinations=("executor", "planner", "reporter", "escalate"),
    )
    # Where repairs or replans run out, a human decides instead (AimeConfig.escalate).
    builder.add_node(
        "escalate",
        make_escalate_node(config, checks=checks),
        destinations=("orchestrator", "planner", "reporter"),
    )
    if units is None:
        actor = build_actor_graph(
            role_models["actor"],
            factory=factory,
            verifier_model=role_models["verifier"],
            memory=memory,
            parts=parts,
        )
    else:  # the team executor holds its own single-actor graph
        from aimegraph.graphs.team import build_team_executor

        actor = build_team_executor(
            role_models["actor"],
            agents=units,
            factory=factory,
            verifier_model=role_models["verifier"],
            memory=memory,
            parts=parts,
        )
    # Streamed plans: the planner node runs the planner subgraph and starts each task
    # of its reply as it streams in (see aimegraph.nodes.streamed_plan). Not beside
    # input guardrails: nothing may run before the goal is screened.
    eager, checkpointed = config.scheduler == "eager", bool(checkpointer)
    streamed = config.stream_plans and not screen_input and streams(role_models["planner"])
    streaming = make_streaming_planner_node(planner, actor, config, checkpointed=checkpointed)
    builder.add_node("planner", streaming if eager and streamed else planner)
    # Batch: one actor subgraph per Send. Eager: a runner starting each task's actor
    # the moment its dependencies complete (see aimegraph.nodes.executor).
    builder.add_node(
        "executor",
        make_executor_node(actor, config, checkpointed=checkpointed) if eager else actor,
    )
    builder.add_node(
        "reporter",
        make_reporter_node(
            role_models["reporter"],
            config=config,
            prompt_source=source,
            response_format=typed,
            wrap=call_wrapper(parts.middleware["reporter"]),
            guards=parts.guards,
        ),
        retry_policy=LLM_RETRY_POLICY,
    )
    builder.add_node("verifier", build_verifier_graph(role_models["verifier"], parts=parts))

    starts = ("planner", "reporter", "approve_plan")
    builder.add_node(
        "intake", intake, destinations=(*starts, INPUT_GUARDRAILS) if screen_input else starts
    )
    after_plan = ("approve_plan", "orchestrator")
    if screen_input:  # the goal's screen, beside the first planner call
        add_input_screen(builder, parts.guards, route_after_planner, after_plan)
    builder.add_edge(START, "intake")
    # Plan approval (approve_plan, which a run's context may turn on) pauses here,
    # once the planner has returned: the run's usage and budgets count its calls.
    builder.add_node(
        "approve_plan",
        make_approve_plan_node(config=config, checks=checks),
    )
    builder.add_conditional_edges(
        "approve_plan", route_after_approval("orchestrator"), ["approve_plan", "orchestrator"]
    )
    planned = [*after_plan, SCREEN] if screen_input else list(after_plan)
    builder.add_conditional_edges("planner", route_after_planner, planned)
    builder.add_edge("executor", "orchestrator")
    # A finished run ends with these nodes, in order: with a store, recording its
    # episode (and lesson) in it; with optimize_online, tracing it for the online
    # prompt optimiser, which may make the next run's prompts.
    finals = [
        n for n, on in (("record_run", memory), ("optimize_online", config.optimize_online)) if on
    ]
    if memory:
        builder.add_node("record_run", make_run_record_node(role_models["reporter"], config))
    if config.optimize_online:
        from aimegraph.nodes.online import make_online_node  # wave 2: only when asked for

        builder.add_node(
            "optimize_online",
            make_online_node(
                config, source, (models or {}).get("reflection") or role_models["planner"]
            ),
        )
    for here, there in pairwise([*finals, END]):
        builder.add_edge(here, there)
    end = finals[0] if finals else END
    builder.add_conditional_edges(
        "reporter", route_after_reporter, {"verifier": "verifier", END: end}
    )
    builder.add_conditional_edges(
        "verifier",
        route_after_verifier(config),
        {"planner": "planner", "orchestrator": "orchestrator", "escalate": "escalate", END: end},
    )
    settings = built_settings(
        model,
        config,
        tools=tools,
        prompts=prompts,
        mcp_servers=mcp_servers,
        middleware=parts.middleware,
        guardrails=guardrails,
        models=models,
        objects={
            "agents": agents,
            "knowledge": knowledge,
            "response_format": response_format,
            "factory": factory,
        },
    )
    graph = AimeGraph.of(
        builder.compile(
            checkpointer=checkpointer,
            store=store,
            name=name,
            # PIIMiddleware's redaction of streamed text, for stream_events(version="v3")
            transformers=parts.middleware["actor"].transformers or None,
        ),
        run_settings=settings,
        serde_types=allowed_types(answer_class),
    )
    # In strict mode LangGraph's compile() runs the graph on a copy of the saver that
    # also allows the context schema's classes: it takes its leases where the saver does.
    share_leases(graph.checkpointer, checkpointer)
    # LangGraph's sync thread pool defaults to min(32, cores + 4) workers, which on
    # small machines would serialise a batch wider than that.
    return graph.with_config(max_concurrency=max(config.max_parallel + 4, 8))


def _checked_plan(plan: PlanLike | str | Path, parts: GraphParts, checks: PlanChecks) -> PlanUpdate:
    """The predefined plan, read and checked as a first plan (raises ``PlanError``)."""
    given = load_plan(plan)
    checks.apply({}, given, max_tasks=parts.config.max_tasks)
    return given


def _graph_parts(
    model: ModelSpec,
    *,
    models: Mapping[str, ModelSpec] | None,
    config: AimeConfig,
    tools: ToolRegistry | list[ToolLike] | None,
    knowledge: KnowledgeBase | None,
    prompts: PromptsArg,
    mcp_servers: McpServersArg,
    agents: Sequence[AgentUnit] | None,
    middleware: RoleMiddleware,
    guardrails: GuardrailsArg,
) -> GraphParts:
    """The parts every builder of the graph shares, each made once: one model per
    role (with the config's timeout and retries), the tools (the built-in bundles with
    ``tools`` added, or the given registry; MCP servers' bundles added), the prompt
    source and the agent units."""
    source = open_prompt_source(prompts)  # first: a bad override is the likeliest mistake
    role_models = resolve_models(
        model,
        # models["reflection"] is the online prompt optimiser's, not a workflow role's.
        {role: m for role, m in (models or {}).items() if role != "reflection"},
        timeout=config.model_timeout_s,
        max_retries=config.model_retries,
        rate_limit=config.rate_limit,
        cache=config.model_cache,
    )
    registry = (
        tools
        if isinstance(tools, ToolRegistry)
        else registry_for(config, knowledge=knowledge, extra_tools=tools or ())
    )
    servers = {**config.mcp_servers, **load_mcp_servers(mcp_servers)}
    if servers:
        from aimegraph.tools.mcp import add_mcp_bundles  # the [mcp] extra: only when asked for

        owned = registry.copy() if registry is tools else registry
        registry = add_mcp_bundles(owned, servers)
    units = None
    if agents:
        from aimegraph.teams import AgentRegistry  # wave-2 subpackage: only when asked for

        units = AgentRegistry(agents, tools=registry)
    return GraphParts(
        config=config,
        registry=registry,
        prompts=source,
        models=role_models,
        knowledge=knowledge,
        units=units,
        middleware=middleware,
        guards=as_guards(guardrails, config.guardrails),
    )


def route_after_planner(state: AimeState) -> str:
    """screen when the input guardrails ran beside the planner, then approve_plan when
    the planner left a plan awaiting approval, else the orchestrator."""
    if state.get("screening"):
        return SCREEN
    return "approve_plan" if state.get("proposal") is not None else "orchestrator"


def route_after_verifier(config: AimeConfig) -> Callable[[AimeState, Runtime[Any]], str]:
    """Back to the planner after a rejection with replans left, else the end (or with
    ``escalate``, a rejection with none left goes to a human). When the run's budget
    is spent, the orchestrator (which stops it cleanly) instead."""

    def route(state: AimeState, runtime: Runtime[Any]) -> str:
        status = state.get("status")
        if status == "rejected" and config.for_run(runtime).escalate != "off":
            return "escalate"
        if status != "running":
            return END
        spent = config.for_run(runtime).budget_spent(
            state.get("usage") or Usage(),
            state.get("steps", 0),
            started_at=state.get("run_started_at"),
        )
        return "orchestrator" if spent else "planner"

    return route


# Annotation only: assigned on first access by __getattr__.
graph: AimeGraph


def __getattr__(name: str) -> AimeGraph:
    """``aimegraph.graphs.aime:graph``, the graph ``langgraph.json`` serves.

    Built on first access (not at import) from ``AIMEGRAPH_MODEL`` (default
    ``scripted:demo``), ``AIMEGRAPH_WORKSPACE`` (default
    ``.aimegraph/workspace/server``) and ``AIMEGRAPH_MCP`` (an MCP servers file, none by
    default). No checkpointer: LangGraph Server brings its own.
    """
    if name != "graph":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import os

    global graph
    workspace = Path(os.environ.get("AIMEGRAPH_WORKSPACE", ".aimegraph/workspace/server"))
    workspace.mkdir(parents=True, exist_ok=True)
    graph = build_aime_graph(
        os.environ.get("AIMEGRAPH_MODEL", "scripted:demo"),
        config=AimeConfig(workspace=workspace),
        mcp_servers=os.environ.get("AIMEGRAPH_MCP") or None,
    )
    return graph


async def make_graph() -> AimeGraph:
    """The module-level ``graph`` as a zero-argument factory, for ``langgraph.json``.

    LangGraph Server reads ``module.__dict__[name]``, which never reaches the lazy
    ``__getattr__`` above, so ``langgraph.json`` names this factory instead. The
    server awaits it per run on its event loop; the first call builds the graph in a
    worker thread (it touches the filesystem), later calls return the same graph.
    """
    import asyncio

    built: AimeGraph | None = globals().get("graph")
    if built is None:
        built = await asyncio.to_thread(__getattr__, "graph")
    return built
