"""Planner nodes: draft a PlanUpdate, validate it against the progress list, repair or give up."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage, ToolCall
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.memory.sections import facts_section, past_runs_section
from aimegraph.models.calls import ToolsBeside
from aimegraph.models.reply_reading import RE_ASK
from aimegraph.models.steps import CallWrapper
from aimegraph.nodes.dual import Steps, ask_structured, blocking_call, model_node
from aimegraph.nodes.notes import run_notes
from aimegraph.nodes.plan_feed import PLAN_FEED
from aimegraph.nodes.types import Node
from aimegraph.prompts import planner as prompts
from aimegraph.prompts.source import PromptSource, prompt_text
from aimegraph.state import (
    ENDED_STATUSES,
    CallCheck,
    PlanChecks,
    PlanError,
    PlannerState,
    PlanUpdate,
    Task,
    Usage,
    plan_update_schema,
    render_checklist,
)
from aimegraph.state.timing import stamp_ready
from aimegraph.streaming import call_metadata

PlannerNode = Node[PlannerState]

FINISHED: tuple[str, ...] = ENDED_STATUSES
"""Run statuses after which new input starts a new run."""

RUN_START: Mapping[str, Any] = {
    "status": "running",
    "reason": None,
    "replans": 0,
    "steps": 0,
    "verdict": None,
    "final_answer": None,
    "replan_reason": None,
    "direct_answer": None,
}
"""The keys a new run starts afresh (its own counters and outcome). In the aime
graph the intake node resets them; the planner does so itself only when used on
its own (no intake before it) on a fresh or finished state."""


class GoalError(ValueError):
    """The goal given cannot be used; the message says what a goal must be."""


def resolve_goal(state: Mapping[str, Any], *, max_chars: int | None = None) -> str | None:
    """The goal: the ``goal`` key, or the last human message when the goal is
    absent or when a finished thread receives a new request.

    Raises:
        GoalError: the goal is not a string, or longer than ``max_chars``.
    """
    messages: list[AnyMessage] = state.get("messages") or []
    last = messages[-1] if messages else None
    asked = last.text.strip() if isinstance(last, HumanMessage) else ""
    given = state.get("goal")
    if given is not None and not isinstance(given, str):
        raise GoalError(
            "the goal must be a string: the request in plain words, e.g. "
            f"{{'goal': 'Summarise report.csv'}} (got {type(given).__name__} {given!r:.60})"
        )
    goal = (given or "").strip()
    if asked and (not goal or state.get("status") in FINISHED):
        goal = asked
    if max_chars is not None and len(goal) > max_chars:
        raise GoalError(
            f"the goal is {len(goal):,} characters, more than max_goal_chars ({max_chars:,}); "
            "it goes into every prompt. Shorten it and put long material in the workspace "
            "or a knowledge base, or raise max_goal_chars"
        )
    return goal or None


def make_draft_node(
    model: BaseChatModel,
    *,
    config: AimeConfig,
    bundles_description: str,
    teams: bool = False,
    skills: bool = False,
    prompt_source: PromptSource | None = None,
    tools: Sequence[BaseTool] = (),
    checks: PlanChecks | None = None,
    wrap: CallWrapper | None = None,
) -> Runnable[PlannerState, dict[str, Any]]:
    """The node that asks the planner model for a PlanUpdate (the model calls are
    awaited under ``ainvoke``, see :mod:`aimegraph.nodes.dual`). With ``teams``, its
    tasks may name agent units and teams, with ``skills`` Agent Skills
    (``bundles_description`` lists them). Its
    system prompt is the ``planner`` component of the run's prompt version in
    ``prompt_source`` (the built-in one without a source). With native tool calling
    the model is also bound ``tools``: each call of one in its reply is a tool step
    (a task of its own, no dependencies, so they run in parallel). With ``wrap``,
    each call runs inside the planner's ``wrap_model_call`` middleware. Run by the
    streaming planner node (``stream_plans``), it streams the reply and hands each task
    that passes ``checks`` to that node's runner as it completes
    (:mod:`aimegraph.nodes.plan_feed`)."""

    reading_notes: Runnable[PlannerState, list[str]] = blocking_call(_run_notes, name="notes")
    beside = ToolsBeside(list(tools), _with_tool_steps)

    def draft(state: PlannerState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg = config.for_run(runtime)
        new_run = state.get("status") in FINISHED or "status" not in state
        # The first draft finds the run's usage in ``usage`` and keeps it aside; from
        # then on ``usage`` is the planner's own (what the subgraph hands back).
        if new_run or "usage_before" not in state:
            usage_before = Usage() if new_run else state.get("usage") or Usage()
            own = Usage()
        else:
            usage_before, own = state["usage_before"], state.get("usage") or Usage()
        kept = {"usage_before": usage_before, "usage": own}
        goal = resolve_goal(state, max_chars=cfg.max_goal_chars)
        if goal is None:
            return {"draft": None, "plan_error": "no goal: pass 'goal' or a human message", **kept}
        calls_left = _calls_left(cfg, usage_before + own)
        if calls_left == 0:
            spent = cfg.budget_spent(usage_before + own, 0) or "the LLM-call budget is spent"
            return {"draft": None, "plan_error": None, **kept} | {
                "status": "budget_exhausted",
                "reason": f"{spent} while planning",
            }
        if calls_left is not None:  # the re-asks of this draft stay within the budget
            retries = min(cfg.max_output_retries, calls_left - 1)
            cfg = cfg.model_copy(update={"max_output_retries": retries})
        replans = 0 if new_run else state.get("replans", 0)
        if runtime.store is not None:  # notes sent to the thread's inbox count too
            state = cast(PlannerState, {**state, "notes": (yield reading_notes, state)})
        messages = [
            SystemMessage(
                prompt_text(prompt_source, "planner", state).format(
                    max_tasks=cfg.max_tasks, bundles=bundles_description
                )
            ),
            HumanMessage(
                prompts.CONTEXT.format(
                    goal=goal,
                    conversation=state.get("conversation", ""),
                    replans=replans,
                    max_replans=cfg.max_replans,
                    checklist=render_checklist(state.get("tasks") or {}, with_results=True),
                    sections=_feedback_sections(state, new_run) + _memory_sections(state),
                )
            ),
        ]
        if error := state.get("plan_error"):
            draft = state.get("draft")
            if draft is not None:  # a plan that could not be accepted: repaired
                repair = prompts.REPAIR.format(error=error, draft=json.dumps(draft, indent=1))
                messages.append(HumanMessage(repair))
            else:  # a reply that could not be used: asked again
                retry = prompts.RETRY.format(error=error)
                messages.append(HumanMessage(retry, response_metadata={RE_ASK: error}))
        feed = PLAN_FEED.get() if checks is not None else None
        tasks_now = state.get("tasks") or {}
        reply = yield from ask_structured(
            model,
            plan_update_schema(
                cfg.max_tasks, teams=teams, skills=skills, first=not state.get("tasks")
            ),
            messages,
            role="planner",
            config=cfg,
            runtime=runtime,
            beside=beside if cfg.planner_tools else None,
            stream=feed.reader(tasks_now, checks, cfg.max_tasks) if feed and checks else None,
            wrap=wrap,
        )
        update: dict[str, Any] = {
            "goal": goal,
            "draft": reply.value.model_dump() if reply.value else None,
            "plan_error": reply.error,
            "model_failed": reply.model_failed,
            "usage_before": usage_before,
            "usage": own + reply.usage,
        }
        if new_run:
            update |= RUN_START
        return update

    return model_node(
        draft, name="draft", metadata=lambda _: call_metadata("planner"), span="planner"
    )


def _with_tool_steps(plan: PlanUpdate | None, calls: list[ToolCall]) -> PlanUpdate:
    """The planner's reply: its plan (none when it only called tools) with a tool
    step for each tool it called."""
    return (plan or PlanUpdate()).with_tool_calls(calls)


def _calls_left(cfg: AimeConfig, used: Usage) -> int | None:
    """LLM calls the run may still make (None: no call budget)."""
    if cfg.max_llm_calls is None:
        return None
    return max(0, cfg.max_llm_calls - used.llm_calls)


def _run_notes(state: PlannerState, *, runtime: Runtime[Any]) -> list[str]:
    assert runtime.store is not None
    return run_notes(state, runtime.store)


def _feedback_sections(state: PlannerState, new_run: bool) -> str:
    sections = []
    if not new_run and (reason := state.get("replan_reason")):
        sections.append(prompts.REASON.format(reason=reason))
    verdict = state.get("verdict")
    if not new_run and verdict is not None and not verdict.passed:
        issues = "\n".join(f"- {i}" for i in verdict.issues) or "- (none listed)"
        sections.append(prompts.REVIEW.format(reasoning=verdict.reasoning, issues=issues))
    if notes := state.get("notes"):
        sections.append(prompts.NOTES.format(notes="\n".join(f"- {n}" for n in notes)))
    return "".join(sections)


def _memory_sections(state: PlannerState) -> str:
    """The run's whiteboard and the past runs recalled from the store."""
    return facts_section(state.get("facts")) + past_runs_section(state.get("memories") or [])


def make_validate_node(
    *,
    config: AimeConfig,
    bundles: Collection[str] | None = None,
    agents: Collection[str] = (),
    skills: Collection[str] = (),
    check_call: CallCheck | None = None,
    checks: PlanChecks | None = None,
) -> PlannerNode:
    """Checks the draft against the progress list: a ``proposal`` of changed tasks,
    or the ``plan_error`` that goes back to the model (also for tool bundles not in
    ``bundles``, agent unit names not in ``agents``, skill names not in ``skills``,
    and tool steps ``check_call`` refuses). ``checks`` gives all four at once, as
    the graph builders do (then leave the others out)."""
    if checks is None:
        checks = PlanChecks(bundles=bundles, agents=agents, skills=skills, check_call=check_call)

    def validate(state: PlannerState, runtime: Runtime[Any]) -> dict[str, Any]:
        cfg = config.for_run(runtime)
        draft = state.get("draft")
        if draft is None:
            return {"repairs": state.get("repairs", 0) + 1}
        try:
            plan = PlanUpdate.model_validate(draft)
            changed = checks.apply(state.get("tasks") or {}, plan, max_tasks=cfg.max_tasks)
        except PlanError as exc:
            return {"plan_error": str(exc), "repairs": state.get("repairs", 0) + 1}
        return {"proposal": changed, "plan_error": None}

    return validate


def commit_plan(
    state: Mapping[str, Any],
    runtime: Runtime[Any],
    changed: Mapping[str, Task],
    draft: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The update that writes the ``changed`` tasks of an accepted plan (``draft``)
    into the progress list, announced as a ``plan`` stream event."""
    rationale = str((draft or {}).get("rationale", ""))
    tasks = state.get("tasks") or {}
    changed = stamp_ready(changed, tasks, at=time.time())
    merged = {**tasks, **changed}
    runtime.stream_writer(
        {"type": "plan", "rationale": rationale, "checklist": render_checklist(merged)}
    )
    return {
        "tasks": changed,
        "plan_rationale": rationale,
        "proposal": None,
        "draft": None,
        "replan_reason": None,
        "direct_answer": direct_answer(state, draft),
    }


def direct_answer(state: Mapping[str, Any], draft: Mapping[str, Any] | None) -> str | None:
    """The answer of a plan that answers the goal instead of planning work: only a
    first plan (the progress list is empty) may; a replan's answer is left alone."""
    if draft is None or state.get("tasks"):
        return None
    return PlanUpdate.model_validate(draft).direct_answer


def make_commit_node() -> PlannerNode:
    """Writes the accepted proposal into the progress list."""

    def commit(state: PlannerState, runtime: Runtime[Any]) -> dict[str, Any]:
        return commit_plan(state, runtime, state.get("proposal") or {}, state.get("draft"))

    return commit


def make_give_up_node(config: AimeConfig) -> PlannerNode:
    """Ends the run when no acceptable plan came out of the repairs."""

    def give_up(state: PlannerState, runtime: Runtime[Any]) -> dict[str, Any]:
        cfg = config.for_run(runtime)
        if state.get("status") == "budget_exhausted":
            return {}  # the draft said which budget, and when
        error = state.get("plan_error") or "unknown error"
        if state.get("plan_given"):
            reason = f"the given plan is invalid: {error}"
        elif not state.get("goal"):
            reason = f"the planner cannot start: {error}"
        elif state.get("model_failed"):
            reason = f"the planner stopped: {error}"
        else:
            drafts = state.get("repairs", 0)
            reason = (
                f"the planner produced no valid plan in {drafts} draft(s): "
                f"max_plan_repairs ({cfg.max_plan_repairs}) used up. Last problem: {error}"
            )
        return {"status": "failed", "reason": reason}

    return give_up


def route_after_validate(config: AimeConfig) -> Callable[[PlannerState, Runtime[Any]], str]:
    """approve (a human must approve first: ``approve_plan``) / accept / repair / give_up."""

    def route(state: PlannerState, runtime: Runtime[Any]) -> str:
        cfg = config.for_run(runtime)
        if state.get("status") == "budget_exhausted":
            return "give_up"
        if state.get("plan_error") is None:
            return "approve" if cfg.approve_plan else "accept"
        # An unusable reply (after its max_output_retries re-asks) and an invalid
        # plan both cost one repair; a missing goal, a model that cannot be called
        # (after its retries) or an invalid given plan ends the planner at once.
        repairable = (
            state.get("goal") and not state.get("model_failed") and not state.get("plan_given")
        )
        if repairable and state.get("repairs", 0) <= cfg.max_plan_repairs:
            return "repair"
        return "give_up"

    return route
