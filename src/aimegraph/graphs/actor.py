"""The actor subgraph: [recall ->] react <-> tools (one task per call) [-> check]
[-> record | hand_back]; a tool step (``Task.call``): react (the call, no model)
-> tools -> react (settled) [-> hand_back]."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from aimegraph.config import AimeConfig
from aimegraph.graphs.parts import GraphParts
from aimegraph.knowledge import KnowledgeBase
from aimegraph.middleware import Middleware
from aimegraph.middleware.approval import approval_reviews, approval_rules
from aimegraph.middleware.calls import call_wrapper
from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.nodes.actor import make_assemble_node, make_hand_back_node, make_react_node
from aimegraph.nodes.actor_factory import ALWAYS_BOUND, ActorFactory, DefaultActorFactory
from aimegraph.nodes.memory import make_actor_recall_node, make_task_record_node
from aimegraph.nodes.tool_approval import make_tool_approval
from aimegraph.nodes.tool_step import make_tool_step, route_start
from aimegraph.nodes.verifier import make_task_check_node
from aimegraph.prompts.source import PromptsArg
from aimegraph.state import ActorInput, ActorOutput, ActorState, MemberOutput
from aimegraph.tools.execution import make_tool_node
from aimegraph.tools.progress import SUBMIT_RESULT
from aimegraph.tools.registry import ToolRegistry


def build_actor_graph(
    model: BaseChatModel | str,
    *,
    registry: ToolRegistry | None = None,
    factory: ActorFactory | None = None,
    knowledge: KnowledgeBase | None = None,
    config: AimeConfig | None = None,
    verifier_model: BaseChatModel | str | None = None,
    checkpointer: Checkpointer = None,
    memory: bool = False,
    member: bool = False,
    name: str = "executor",
    prompts: PromptsArg = None,
    middleware: Sequence[Middleware] | None = None,
    parts: GraphParts | None = None,
) -> CompiledStateGraph[ActorState, AimeConfig, ActorInput, Any]:
    """Build the executor: one specialised ReAct actor working on one task.

    Args:
        model: The actor model (or a spec, resolved with the config's ``model_timeout_s``
            and ``model_retries``).
        registry: The tools actors may be given, in bundles.
        factory: Assembles the actor for a task; defaults to
            :class:`DefaultActorFactory` over ``registry`` and ``knowledge``.
        knowledge: Passages nearest each task go into its actor's prompt (with
            the default factory).
        config: Budgets and policies (``max_actor_steps``, ``tool_calling``,
            ``tool_timeout_s``, ``verify``, ...).
        verifier_model: Checks results against completion criteria when
            ``config.verify`` is ``"tasks"`` or ``"both"``; defaults to ``model``.
        checkpointer: Only when used on its own; as a node it inherits the parent's.
        memory: Add ``recall`` (past episodes of similar tasks into the actor's
            knowledge) before ``assemble`` and ``record`` (the task's episode, and
            a lesson after a retry succeeded) at the end, over ``runtime.store``.
        member: Build a team member's turn (see :mod:`aimegraph.teams`): the graph
            ends with ``hand_back`` and outputs its turn as a ``MemberResult`` in
            ``members`` (:class:`MemberOutput`) instead of the task; no ``check``
            (the team's result is what gets checked) and no memory.
        name: The compiled graph's name.
        prompts: The ``actor`` and ``persona_habits`` prompts (and ``verifier`` for
            the task check): overrides, a prompt store or any ``PromptSource`` (see
            ``build_aime_graph``); the built-in ones by default. They are applied
            to the spec any factory builds.
        middleware: LangChain ``AgentMiddleware`` for the actor's model and tool calls
            (see ``build_aime_graph``); what it cannot honour raises
            :class:`aimegraph.middleware.MiddlewareError`.
        parts: The parts shared with the other builders of a graph (``build_aime_graph``
            passes its own); instead of ``config``, ``registry``, ``knowledge``,
            ``prompts`` and ``middleware``.

    Returns:
        A compiled graph. Input: :class:`ActorInput` (``goal``, ``task``,
        ``dependency_results``). Output: ``tasks`` (the task with its result),
        ``updates`` and ``usage``, ready to merge into ``AimeState``.
    """
    memory = memory and not member
    parts = GraphParts.given(
        parts,
        config=config,
        registry=registry,
        knowledge=knowledge,
        prompts=prompts,
        middleware=middleware,
    )
    stack = parts.middleware["actor"]
    config, registry, source = parts.config, parts.registry, parts.prompts
    factory = factory or DefaultActorFactory(
        registry, workspace=parts.workspace, knowledge=parts.knowledge, skills=parts.skills
    )
    chat = config.chat_model(model)
    always = [t.name for t in ALWAYS_BOUND]
    tools = {**registry.tools, **{t.name: t for t in ALWAYS_BOUND}}

    builder = StateGraph(
        stack.extend(ActorState),  # with the keys the middleware's state_schema adds
        context_schema=AimeConfig,
        input_schema=ActorInput,
        output_schema=MemberOutput if member else ActorOutput,
    )
    # The task is settled where the loop ends (react or tools); `done` is what follows.
    check = config.verify in ("tasks", "both") and not member
    last = "hand_back" if member else "record" if memory else END
    done = "check" if check else last

    # A tool step (the plan gives its call) is played by react with no model call,
    # through the same tools step; it needs no recall, check or record (no model to inform).
    after_call = "hand_back" if member else END
    # The factory's assembly opens the first react step (no super-step of its own).
    assemble = make_assemble_node(factory, prompt_source=source)
    builder.add_node(
        "react",
        make_react_node(
            chat,
            tools=tools,
            config=config,
            done=done,
            assemble=assemble,
            middleware=stack,
            tool_step=make_tool_step(after_call),
        ),
        retry_policy=LLM_RETRY_POLICY,
        destinations=tuple(dict.fromkeys(("tools", "react", done, after_call))),
    )
    builder.add_node(
        "tools",
        make_tool_node(
            list(tools.values()),
            timeout_s=config.tool_timeout_s,
            max_observation_chars=config.max_observation_chars,
            available=lambda state: [*state.get("tool_names", []), *always],
            before_call=make_tool_approval(
                config,
                exempt=always,
                rules=approval_rules(stack),
                reviews=approval_reviews(stack),
            ),
            untimed=always,
            once_per_reply=[SUBMIT_RESULT],
            # Where the file tools read: they resolve the workspace when built, too.
            workspace=parts.workspace,
            wrap=stack.tool_wrapper,
            awrap=stack.atool_wrapper,
            guards=parts.guards,
        ),
    )
    if memory:
        builder.add_node("recall", make_actor_recall_node(config))
        builder.add_conditional_edges(START, route_start("recall"), ["react", "recall"])
        builder.add_edge("recall", "react")
        builder.add_node("record", make_task_record_node(chat, config))
        builder.add_edge("record", END)
    else:
        builder.add_edge(START, "react")
    if member:
        builder.add_node("hand_back", make_hand_back_node())
        builder.add_edge("hand_back", END)
    # Every tools task (one per call) of an actor hands back to react, which ends the
    # loop when a call settled the task: a route by outcome could send one call's task
    # to `done` and its sibling's to `react` in the same step.
    builder.add_edge("tools", "react")
    if check:
        checker = config.chat_model(verifier_model) if verifier_model is not None else chat
        builder.add_node(
            "check",
            make_task_check_node(
                checker,
                config=config,
                prompt_source=source,
                wrap=call_wrapper(parts.middleware["verifier"]),
            ),
            retry_policy=LLM_RETRY_POLICY,
        )
        builder.add_edge("check", last)
    return builder.compile(
        checkpointer=checkpointer, name=name, transformers=stack.transformers or None
    )
