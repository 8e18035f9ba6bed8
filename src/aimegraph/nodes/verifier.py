"""Verifier nodes (BMW Agents' independent verifier).

``judge`` sees only the goal and the final answer, never the plan, and sets the
run's status. ``make_task_check_node`` checks one task's result against its
completion criteria inside the actor graph (``verify="tasks"`` or ``"both"``).
Either one, when the run left files in the workspace (``verifier_inspects``),
inspects them with read-only tools before its verdict
(:mod:`aimegraph.nodes.inspection`), and its verdict cites them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.models.steps import CallWrapper
from aimegraph.nodes.actor_factory import artifact_lines
from aimegraph.nodes.dual import Steps, ask_structured, model_node
from aimegraph.nodes.inspection import inspect, inspects, run_files, with_evidence
from aimegraph.prompts import verifier as prompts
from aimegraph.prompts.source import PromptSource, prompt_text
from aimegraph.state import ActorState, TaskResult, Usage, Verdict, VerifierState
from aimegraph.streaming import call_metadata
from aimegraph.tools.inspection import make_inspection_tools
from aimegraph.tools.progress import settled


def _ask_verdict(
    model: BaseChatModel,
    system: str,
    prompt: str,
    cfg: AimeConfig,
    runtime: Runtime[Any],
    inspection: tuple[Sequence[BaseTool], str] | None = None,
    wrap: CallWrapper | None = None,
) -> Steps[tuple[Verdict | None, str | None, Usage]]:
    """The verdict on ``prompt``: one structured call, or with ``inspection`` (the
    tools and the prompt asking to inspect the files) the inspecting agent's; each
    call inside the verifier's ``wrap_model_call`` middleware (``wrap``)."""
    if inspection is not None:
        tools, request = inspection
        opening: list[AnyMessage] = [SystemMessage(system.format()), HumanMessage(request)]
        looked = yield from inspect(model, tools, opening, config=cfg, runtime=runtime, wrap=wrap)
        return with_evidence(looked), looked.error, looked.usage
    reply = yield from ask_structured(
        model,
        Verdict,
        [SystemMessage(system.format()), HumanMessage(prompt)],
        role="verifier",
        config=cfg,
        runtime=runtime,
        wrap=wrap,
    )
    return reply.value, reply.error, reply.usage


def _files_list(files: Sequence[str]) -> str:
    return "\n".join(f"- {name}" for name in files) or "(none)"


def make_judge_node(
    model: BaseChatModel,
    *,
    config: AimeConfig,
    prompt_source: PromptSource | None = None,
    tools: Sequence[BaseTool] | None = None,
    wrap: CallWrapper | None = None,
) -> Runnable[VerifierState, dict[str, Any]]:
    """Judges the final answer against the goal and settles the run's status:
    ``succeeded``; ``running`` with a replan reason when rejected and replans
    are left; ``rejected`` otherwise; ``failed`` when no verdict could be had.
    When the run wrote files (see ``verifier_inspects``) it first inspects them
    with ``tools`` (default: :func:`make_inspection_tools` over the workspace).
    The model calls are awaited under ``ainvoke`` (see :mod:`aimegraph.nodes.dual`).
    The system prompt is the run's ``verifier`` component from ``prompt_source``;
    ``wrap`` runs each model call inside the verifier's middleware."""
    looking = list(tools) if tools is not None else make_inspection_tools(config.workspace)
    listing = run_files(config)

    def judge(state: VerifierState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg = config.for_run(runtime)
        answer = state.get("final_answer") or "(no answer was produced)"
        goal = state.get("goal", "")
        conversation = state.get("conversation", "")
        files = yield listing, state
        request = prompts.INSPECT.format(
            goal=goal,
            conversation=conversation,
            answer=answer,
            files=_files_list(files),
            steps=cfg.verifier_max_steps,
        )
        verdict, error, usage = yield from _ask_verdict(
            model,
            prompt_text(prompt_source, "verifier", state),
            prompts.FINAL.format(goal=goal, conversation=conversation, answer=answer),
            cfg,
            runtime,
            (looking, request) if inspects(cfg, files) else None,
            wrap,
        )
        runtime.stream_writer({"type": "verdict", "verdict": verdict, "error": error})
        if verdict is None:
            return {
                "verdict": None,
                "usage": usage,
                "status": "failed",
                "reason": f"the verifier gave no verdict: {error}",
            }
        if verdict.passed:
            return {
                "verdict": verdict,
                "usage": usage,
                "status": "succeeded",
                "reason": None,
            }
        replans = state.get("replans", 0)
        if replans < cfg.max_replans:
            return {
                "verdict": verdict,
                "usage": usage,
                "status": "running",
                "replans": replans + 1,
                "replan_reason": "The reviewer rejected the final answer (issues below).",
            }
        return {
            "verdict": verdict,
            "usage": usage,
            "status": "rejected",
            "reason": f"the verifier rejected the answer; no replans left "
            f"(max_replans={cfg.max_replans})",
        }

    return model_node(
        judge, name="judge", metadata=lambda _: call_metadata("verifier"), span="verifier"
    )


def make_task_check_node(
    model: BaseChatModel,
    *,
    config: AimeConfig,
    prompt_source: PromptSource | None = None,
    tools: Sequence[BaseTool] | None = None,
    wrap: CallWrapper | None = None,
) -> Runnable[ActorState, dict[str, Any]]:
    """Checks a completed task's result against its completion criteria; a failed
    check fails the task with the verifier's issues as the reason. As the judge, it
    inspects the files the run wrote with ``tools`` (see ``verifier_inspects``).
    The model calls are awaited under ``ainvoke``. The system prompt is the run's
    ``verifier`` component from ``prompt_source``; ``wrap`` runs each model call
    inside the verifier's middleware."""
    looking = list(tools) if tools is not None else make_inspection_tools(config.workspace)
    listing = run_files(config)

    def check(state: ActorState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg = config.for_run(runtime)
        task, result = state["task"], state.get("result")
        if result is None or result.status != "completed":
            return {}
        fields = {
            "task_id": task.id,
            "title": task.title,
            "description": task.description or task.title,
            "criteria": task.completion_criteria or "the task is done",
            "summary": result.summary,
            "artifacts": artifact_lines(result.artifacts),
        }
        files = yield listing, state
        request = prompts.INSPECT_TASK.format(
            **fields, files=_files_list(files), steps=cfg.verifier_max_steps
        )
        system = prompt_text(prompt_source, "verifier", state)
        verdict, error, usage = yield from _ask_verdict(
            model,
            system,
            prompts.TASK.format(**fields),
            cfg,
            runtime,
            (looking, request) if inspects(cfg, files) else None,
            wrap,
        )
        usage = usage.for_task(task.id, state.get("member"))
        if verdict is not None and verdict.passed:
            return {"usage": usage}
        reason = (
            f"{verdict.reasoning} Issues: {'; '.join(verdict.issues)}"
            + (f" Evidence: {'; '.join(verdict.evidence)}" if verdict.evidence else "")
            if verdict is not None
            else f"no verdict: {error}"
        )
        failed = TaskResult(
            status="failed",
            summary=f"Did not pass the check of its completion criteria: {reason}\n"
            f"The result was: {result.summary}",
            artifacts=result.artifacts,
        )
        return settled(state, failed, runtime.stream_writer) | {"usage": usage}

    return model_node(check, name="check", metadata=lambda state: call_metadata("verifier", state))
