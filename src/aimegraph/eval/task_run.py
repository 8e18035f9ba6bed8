"""Running one task on one system: the turns of its conversation, within its budget.

Each runner builds the system over the rollout's own workspace and model, runs
every turn on one thread, and returns an :class:`Outcome`: the last turn's answer
and typed answer, a status and the output state. Model calls are counted by the
rollout's :class:`~aimegraph.eval.usage.UsageCounter`, passed in ``callbacks``.

No system is offered the ``human`` bundle: no one answers ``ask_human`` during an
eval. An aimegraph system that configures ``approve_plan``, ``approve_tools`` or
``escalate`` still pauses there, and its rollout ends ``paused``.

Budgets are the task's, the same for every system: aimegraph enforces them with
its own run budgets (``max_llm_calls``, ``max_tokens``, ``max_wall_s``); the
ReAct baselines (:mod:`aimegraph.eval.baselines`) with a middleware that reads the
same counter before each model call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from aimegraph.checkpoints import make_serializer
from aimegraph.config import AimeConfig
from aimegraph.eval.checkers import structured_json
from aimegraph.eval.rollout_io import Outcome, RolloutSetup, thread_config, unattended_registry
from aimegraph.eval.systems import SystemSpec, system_guardrails

__all__ = ["run_system"]


def run_system(
    spec: SystemSpec, setup: RolloutSetup, *, prompts: Mapping[str, str] | None = None
) -> Outcome:
    """Run ``setup.task`` on the system ``spec`` describes (an aimegraph system with
    ``prompts``, a full prompt set, instead of its own: the prompt optimiser's)."""
    if spec.kind == "aimegraph":
        return _run_aimegraph(spec, setup, prompts)
    from aimegraph.eval.baselines import run_baseline  # LangChain v1: the [eval] extra

    return run_baseline(spec, setup)


# --- aimegraph


def _run_aimegraph(
    spec: SystemSpec, setup: RolloutSetup, prompts: Mapping[str, str] | None
) -> Outcome:
    from aimegraph.graphs.aime import build_aime_graph
    from aimegraph.tools.skills import load_skills

    budget = setup.budget
    limits = {
        "max_llm_calls": budget.max_llm_calls,
        "max_tokens": budget.max_tokens,
        "max_wall_s": budget.timeout_s,
    }
    config = AimeConfig.model_validate(
        {
            **spec.config,
            **{k: v for k, v in limits.items() if v is not None},
            "workspace": setup.workspace,
        }
    )
    extra: dict[str, Any] = {}
    if setup.task.answer_schema is not None:
        # The typed answer: the reporter fills it in, the state's
        # ``structured_response`` holds it, as with create_agent.
        extra["response_format"] = setup.task.answer_schema
    graph = build_aime_graph(
        setup.model,
        tools=unattended_registry(setup, load_skills(config.skills)),
        config=config,
        models=dict(spec.models) or None,
        prompts=dict(prompts) if prompts is not None else _prompts(spec),
        agents=_agents(spec),
        guardrails=system_guardrails(spec),
        checkpointer=InMemorySaver(serde=make_serializer()),
        **extra,
    )
    state: Mapping[str, Any] = {}
    for index, goal in enumerate(setup.task.goals):
        setup.begin_turn(index)
        state = graph.invoke({"goal": goal}, thread_config(setup), control=setup.control)
        if graph.get_state(thread_config(setup)).interrupts:
            return Outcome(
                answer=str(state.get("final_answer") or ""),
                structured_response=None,
                status="paused",
                reason="the run paused for a human (the system's approve_plan, "
                "approve_tools or escalate); evals are unattended",
                state=state,
            )
    return Outcome(
        answer=str(state.get("final_answer") or ""),
        structured_response=structured_json(state.get("structured_response")),
        status=str(state.get("status") or "failed"),
        reason=state.get("reason"),
        state=state,
    )


def _prompts(spec: SystemSpec) -> Any:
    if spec.prompts is None or spec.prompt_version is None:
        return spec.prompts
    from aimegraph.optimizer.store import PromptStore

    return dict(PromptStore(spec.prompts).get(spec.prompt_version).texts)


def _agents(spec: SystemSpec) -> Any:
    if spec.agents is None:
        return None
    from aimegraph.teams import load_agents

    return load_agents(spec.agents)
