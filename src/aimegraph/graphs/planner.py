"""The planner subgraph: draft -> validate -> (repair | give_up | accept)."""

from __future__ import annotations

from collections.abc import Mapping

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from aimegraph.config import AimeConfig
from aimegraph.graphs.parts import GraphParts
from aimegraph.middleware.calls import call_wrapper
from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.nodes.given_plan import GIVEN, make_given_plan_node, route_planner_start
from aimegraph.nodes.human import make_approve_plan_node, route_after_approval
from aimegraph.nodes.memory import make_planner_recall_node
from aimegraph.nodes.planner import (
    make_commit_node,
    make_draft_node,
    make_give_up_node,
    make_validate_node,
    route_after_validate,
)
from aimegraph.prompts import planner as planner_prompts
from aimegraph.prompts.source import PromptsArg
from aimegraph.state import PlannerInput, PlannerOutput, PlannerState
from aimegraph.tools.registry import ToolRegistry
from aimegraph.tools.steps import planner_tools


def build_planner_graph(
    model: BaseChatModel | str,
    *,
    registry: ToolRegistry | None = None,
    config: AimeConfig | None = None,
    checkpointer: Checkpointer = None,
    memory: bool = False,
    ask_approval: bool = True,
    agents: Mapping[str, str] | None = None,
    prompts: PromptsArg = None,
    parts: GraphParts | None = None,
) -> CompiledStateGraph[PlannerState, AimeConfig, PlannerInput, PlannerOutput]:
    """Build the planner: it turns the goal and the progress list into a task DAG.

    ``draft -> validate -> commit``; an invalid draft goes back to ``draft`` with
    the error (at most ``max_plan_repairs`` times) and then to ``give_up``. A plan
    given in the state (``plan``) is the draft instead (``given``: no model call),
    and ends in ``give_up`` when it is invalid. When the
    run's config sets ``approve_plan``, an ``approve_plan`` interrupt replaces
    ``commit`` (see ``ask_approval``).

    Args:
        model: The planner model (or a spec, resolved with the config's ``model_timeout_s``
            and ``model_retries``).
        registry: Tool bundles the plan may assign; without one, tasks get none.
        config: Budgets and policies (``max_tasks``, ``max_plan_repairs``, ...).
        checkpointer: Only when used on its own; as a node it inherits the parent's.
        memory: Start with a ``recall`` node that puts past runs on similar goals
            from the run's store (``runtime.store``) into the planner's prompt.
        ask_approval: Pause for the human's approval in this graph. With False, a
            plan that needs approval leaves the planner uncommitted, as ``proposal``
            and ``draft``, for the caller's own step (``build_aime_graph`` has an
            ``approve_plan`` node after the planner): the pause then comes after
            the subgraph has returned, so the caller's ``usage`` and budgets
            already count the planner's calls.
        agents: Agent units (name -> description) the plan may assign to tasks, alone
            (``agent``) or as a team (``team``); listed in the prompt, and a plan
            naming any other unit is sent back to the model.
        prompts: The ``planner`` prompt: overrides (a mapping of component name to
            text, or a prompt-set file), a prompt store, or any ``PromptSource``
            (see ``build_aime_graph``); the built-in prompt by default.
        parts: The parts shared with the other builders of a graph (``build_aime_graph``
            passes its own); instead of ``config``, ``registry``, ``prompts``.

    Returns:
        A compiled graph. Input: ``goal`` (or ``messages``), ``tasks`` and the
        feedback keys of ``AimeState``. Output: ``tasks`` (the changed tasks,
        merged by id), ``plan_rationale``, ``usage``, a plan awaiting the caller's
        approval (``proposal``, ``draft``), and on failure ``status="failed"`` with
        ``reason``.
    """
    parts = GraphParts.given(parts, config=config, registry=registry, prompts=prompts)
    config, registry = parts.config, parts.registry
    chat = config.chat_model(model)

    builder = StateGraph(
        PlannerState,
        context_schema=AimeConfig,
        input_schema=PlannerInput,
        output_schema=PlannerOutput,
    )
    units = dict(agents or {})
    described = registry.describe()
    if units:
        described += planner_prompts.AGENTS.format(
            agents="\n".join(f"- {name}: {text}" for name, text in units.items())
        )
    checks = parts.plan_checks(units)
    builder.add_node(
        "draft",
        make_draft_node(
            chat,
            config=config,
            bundles_description=described,
            teams=bool(units),
            skills=bool(parts.skill_names),
            prompt_source=parts.prompts,
            tools=planner_tools(registry),
            checks=checks,
            wrap=call_wrapper(parts.middleware["planner"]),
        ),
        retry_policy=LLM_RETRY_POLICY,
    )
    builder.add_node("validate", make_validate_node(config=config, checks=checks))
    builder.add_node(GIVEN, make_given_plan_node(config))
    builder.add_edge(GIVEN, "validate")
    builder.add_node("give_up", make_give_up_node(config))
    builder.add_node("commit", make_commit_node())
    if ask_approval:
        builder.add_node(
            "approve_plan",
            make_approve_plan_node(config=config, checks=checks),
        )
        builder.add_conditional_edges(
            "approve_plan", route_after_approval(END), ["approve_plan", END]
        )

    # A plan given in the state is the draft: no recall, no model call.
    first = "recall" if memory else "draft"
    builder.add_conditional_edges(START, route_planner_start(first), [GIVEN, first])
    if memory:
        builder.add_node("recall", make_planner_recall_node(config))
        builder.add_edge("recall", "draft")
    builder.add_edge("draft", "validate")
    builder.add_conditional_edges(
        "validate",
        route_after_validate(config),
        {
            "approve": "approve_plan" if ask_approval else END,
            "accept": "commit",
            "repair": "draft",
            "give_up": "give_up",
        },
    )
    builder.add_edge("commit", END)
    builder.add_edge("give_up", END)
    return builder.compile(checkpointer=checkpointer, name="planner")
