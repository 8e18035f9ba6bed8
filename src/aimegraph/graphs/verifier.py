"""The verifier subgraph: one ``judge`` node that sees the goal and the answer (and the
files the run wrote), never the plan."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from aimegraph.config import AimeConfig
from aimegraph.graphs.parts import GraphParts
from aimegraph.middleware.calls import call_wrapper
from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.nodes.verifier import make_judge_node
from aimegraph.prompts.source import PromptsArg
from aimegraph.state import VerifierInput, VerifierOutput, VerifierState


def build_verifier_graph(
    model: BaseChatModel | str,
    *,
    config: AimeConfig | None = None,
    checkpointer: Checkpointer = None,
    prompts: PromptsArg = None,
    tools: Sequence[BaseTool] | None = None,
    parts: GraphParts | None = None,
) -> CompiledStateGraph[VerifierState, AimeConfig, VerifierInput, VerifierOutput]:
    """Build the verifier: judges a final answer against the goal, without the plan;
    when the run wrote files in the workspace (``config.verifier_inspects``), a
    small agent that inspects them first and cites them in its verdict.

    Args:
        model: The verifier model (or a spec, resolved with the config's ``model_timeout_s``
            and ``model_retries``).
        config: ``max_replans`` and the budgets decide whether a rejection
            leads to a replan (``status="running"``) or ends the run
            (``status="rejected"``).
        checkpointer: Only when used on its own; as a node it inherits the parent's.
        prompts: The ``verifier`` prompt: overrides, a prompt store or any
            ``PromptSource`` (see ``build_aime_graph``); the built-in one by default.
        tools: What the inspecting verifier may use; by default ``list_dir``,
            ``read_lines`` and ``python`` over ``config.workspace``
            (:func:`aimegraph.tools.inspection.make_inspection_tools`).
        parts: The parts shared with the other builders of a graph (``build_aime_graph``
            passes its own); instead of ``config`` and ``prompts``.

    Returns:
        A compiled graph. Input: ``goal`` and ``final_answer`` (plus ``replans``
        for the replan decision, and ``run_started_at``: files changed since then
        are the run's, all files without it). Output: ``verdict`` (with its
        ``evidence``),
        ``status``, ``reason``, ``replans``, ``replan_reason`` and ``usage``.
    """
    parts = GraphParts.given(parts, config=config, prompts=prompts)
    builder = StateGraph(
        VerifierState,
        context_schema=AimeConfig,
        input_schema=VerifierInput,
        output_schema=VerifierOutput,
    )
    judge = make_judge_node(
        parts.config.chat_model(model),
        config=parts.config,
        prompt_source=parts.prompts,
        tools=tools,
        wrap=call_wrapper(parts.middleware["verifier"]),
    )
    builder.add_node("judge", judge, retry_policy=LLM_RETRY_POLICY)
    builder.add_edge(START, "judge")
    builder.add_edge("judge", END)
    return builder.compile(checkpointer=checkpointer, name="verifier")
