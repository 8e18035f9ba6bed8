"""The memory nodes: recall before the planner and each actor, record after each.

They reach the store through LangGraph's ``Runtime`` (``runtime.store``), never
through the state, and do nothing when the run has no store or runs with
``memory="off"``. Memory is best effort: a store that cannot be reached costs
the run its memories (with a ``memory`` stream event saying why), never its work.
Each node is written once as a generator (:mod:`aimegraph.nodes.dual`), so store
calls and the lesson call are awaited under ``ainvoke``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, Op, SearchItem

from aimegraph.config import AimeConfig
from aimegraph.memory.episodes import (
    EPISODES,
    LESSONS,
    RUN_TASK_ID,
    Episode,
    episode_key,
    episode_ops,
    memory_scope,
    rank_items,
    run_attempt,
    search_ops,
    store_runnable,
    thread_id,
)
from aimegraph.memory.render import experience, past_runs
from aimegraph.memory.sections import clip
from aimegraph.models.calls import usage_of
from aimegraph.nodes.dual import Steps, model_node
from aimegraph.nodes.planner import resolve_goal
from aimegraph.prompts import memory as prompts
from aimegraph.state import (
    ActorState,
    AimeState,
    PlannerState,
    Prices,
    Task,
    TaskResult,
    Usage,
)
from aimegraph.streaming import call_metadata

__all__ = [
    "make_actor_recall_node",
    "make_planner_recall_node",
    "make_run_record_node",
    "make_task_record_node",
]

log = logging.getLogger(__name__)

_LESSON_CHARS = 600
_SUMMARY_CHARS = 1_000
# Tools every actor has: not worth remembering as "tools used".
_BOOKKEEPING = frozenset({"update_progress", "submit_result"})


def _active_store(config: AimeConfig, runtime: Runtime[Any]) -> tuple[AimeConfig, BaseStore | None]:
    cfg = config.for_run(runtime)
    if runtime.store is None or cfg.memory == "off":
        return cfg, None
    return cfg, runtime.store


def _search(
    store: BaseStore,
    scope: str,
    query: str,
    k: int,
    episode_filter: Mapping[str, Any],
) -> Steps[list[SearchItem]]:
    """The ``k`` episodes and lessons of ``scope`` nearest ``query``."""
    ops: list[Op] = [
        *search_ops(store, scope, [EPISODES], query, k, filter=episode_filter),
        *search_ops(store, scope, [LESSONS], query, k),
    ]
    results = yield store_runnable(store), ops
    return rank_items(store, results, query, k)


def _unavailable(runtime: Runtime[Any], doing: str, exc: Exception) -> None:
    log.warning("memory store unavailable while %s: %s", doing, exc)
    runtime.stream_writer({"type": "memory", "event": "unavailable", "reason": f"{doing}: {exc}"})


def make_planner_recall_node(config: AimeConfig) -> Runnable[PlannerState, dict[str, Any]]:
    """Past runs on similar goals (run episodes and lessons) for the planner's prompt."""

    def recall(state: PlannerState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg, store = _active_store(config, runtime)
        goal = resolve_goal(state)
        if store is None or not goal or cfg.memory_k == 0:
            return {"memories": []}
        try:
            items = yield from _search(
                store,
                memory_scope(runtime, cfg.user_id),
                goal,
                cfg.memory_k,
                {"task_id": RUN_TASK_ID},
            )
        except Exception as exc:  # noqa: BLE001 - memory is best effort
            _unavailable(runtime, "recalling past runs", exc)
            return {"memories": []}
        lines = past_runs(items, cfg.memory_chars)
        if lines:
            runtime.stream_writer(
                {"type": "memory", "event": "recalled", "for": "planner", "items": lines}
            )
        return {"memories": lines}

    return model_node(recall, name="recall")


def make_actor_recall_node(config: AimeConfig) -> Runnable[ActorState, dict[str, Any]]:
    """Past episodes of similar tasks (and their lessons) for the actor's knowledge."""

    def recall(state: ActorState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg, store = _active_store(config, runtime)
        if store is None or cfg.memory_k == 0:
            return {"experience": []}
        task = state["task"]
        query = f"{task.title}. {task.description}"
        try:
            # This run's own tasks reach the actor as dependency results instead.
            items = yield from _search(
                store,
                memory_scope(runtime, cfg.user_id),
                query,
                cfg.memory_k,
                {"task_id": {"$ne": RUN_TASK_ID}, "thread_id": {"$ne": thread_id(runtime)}},
            )
        except Exception as exc:  # noqa: BLE001 - memory is best effort
            _unavailable(runtime, f"recalling episodes for {task.id}", exc)
            return {"experience": []}
        return {"experience": experience(items, cfg.memory_chars)}

    return model_node(recall, name="recall")


def _lesson(
    model: BaseChatModel,
    *,
    title: str,
    goal: str,
    failure: str,
    success: str,
    prices: Prices,
) -> Steps[tuple[str, Usage]]:
    """One model call: what went wrong, what worked. No lesson if the call fails."""
    request = [
        SystemMessage(prompts.LESSON_SYSTEM),
        HumanMessage(
            prompts.LESSON.format(
                title=title, goal=goal, failure=clip(failure, 1500), success=clip(success, 1500)
            )
        ),
    ]
    try:
        reply = yield model, request
    except Exception as exc:  # noqa: BLE001 - a lesson is optional, the episode is not
        log.warning("no lesson written: the model call failed: %s", exc)
        return "", Usage()
    return clip(reply.text, _LESSON_CHARS), usage_of(reply, "memory", prices)


def tools_used(messages: Sequence[AnyMessage]) -> dict[str, int]:
    counts = Counter(
        call["name"]
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] not in _BOOKKEEPING
    )
    return dict(sorted(counts.items()))


def _settled(task: Task, result: TaskResult, cfg: AimeConfig) -> bool:
    """Completed, or failed with no retry left (a retry's episode comes later)."""
    return result.status == "completed" or task.attempts > cfg.task_retries


def make_task_record_node(
    model: BaseChatModel, config: AimeConfig
) -> Runnable[ActorState, dict[str, Any]]:
    """Writes the task's episode once it settles; after a failed attempt that a
    retry fixed, the model first writes the lesson (one call, within the budget)."""

    def record(state: ActorState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg, store = _active_store(config, runtime)
        task = state["task"]
        final = (state.get("tasks") or {}).get(task.id)
        result = final.result if final is not None and final.result else state.get("result")
        if store is None or result is None or not _settled(task, result, cfg):
            return {}
        lesson, usage = "", Usage()
        previous = task.result
        budget = state.get("llm_call_budget")
        has_budget = budget is None or state.get("steps", 0) < budget
        recovered = previous is not None and previous.status == "failed"
        if result.status == "completed" and previous is not None and recovered and has_budget:
            lesson, usage = yield from _lesson(
                model,
                title=task.title,
                goal=state["goal"],
                failure=previous.summary,
                success=_worked(result, state.get("messages") or []),
                prices=cfg.prices,
            )
        thread, scope = thread_id(runtime), memory_scope(runtime, cfg.user_id)
        key = episode_key(thread, task.id, max(task.attempts, 1))
        episode = Episode(
            goal=state["goal"],
            task_id=task.id,
            title=task.title,
            description=task.description,
            persona=task.persona,
            bundles=list(task.tool_bundles),
            tools_used=tools_used(state.get("messages") or []),
            outcome=result.status,
            summary=clip(result.summary, _SUMMARY_CHARS),
            issues=[] if result.status == "completed" else [clip(result.summary)],
            lesson=lesson,
            thread_id=thread,
            attempt=max(task.attempts, 1),
            usage=(state.get("usage") or Usage()).model_dump(mode="json"),
        )
        try:
            yield store_runnable(store), episode_ops(scope, key, episode)
        except Exception as exc:  # noqa: BLE001 - memory is best effort
            _unavailable(runtime, f"recording {task.id}", exc)
        return {"usage": usage.for_task(task.id)} if usage.llm_calls else {}

    return model_node(record, name="record", metadata=lambda state: call_metadata("memory", state))


def _worked(result: TaskResult, messages: Sequence[AnyMessage]) -> str:
    calls = [
        f"{call['name']}({clip(str(call['args']), 200)})"
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] not in _BOOKKEEPING
    ]
    steps = "; ".join(calls) or "(no tool calls)"
    return f"Tool calls: {steps}\nResult: {result.summary}"


def make_run_record_node(
    model: BaseChatModel, config: AimeConfig
) -> Runnable[AimeState, dict[str, Any]]:
    """Writes the run's episode (goal, plan, outcome, answer, verifier issues,
    usage) when it ends; after a recovery (a failed task, a replan or a
    rejection, then success) the model first writes the run's lesson."""

    def record(state: AimeState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg, store = _active_store(config, runtime)
        goal = state.get("goal") or ""
        if store is None or not goal:
            return {}
        tasks = list((state.get("tasks") or {}).values())
        status = state.get("status") or "failed"
        verdict = state.get("verdict")
        usage = state.get("usage") or Usage()
        recovered = status == "succeeded" and (
            state.get("replans", 0) > 0 or any(t.attempts > 1 for t in tasks)
        )
        lesson, lesson_usage = "", Usage()
        if recovered and cfg.budget_spent(usage, state.get("steps", 0)) is None:
            lesson, lesson_usage = yield from _lesson(
                model,
                title=goal,
                goal=goal,
                failure=_run_failures(state),
                success=_run_plan_text(tasks),
                prices=cfg.prices,
            )
        thread, scope = thread_id(runtime), memory_scope(runtime, cfg.user_id)
        key = episode_key(thread, RUN_TASK_ID, run_attempt(goal))
        episode = Episode(
            goal=goal,
            task_id=RUN_TASK_ID,
            title=clip(goal, 120),
            outcome="completed" if status == "succeeded" else "failed",
            summary=clip(state.get("final_answer") or state.get("reason") or "", _SUMMARY_CHARS),
            issues=list(verdict.issues) if verdict is not None and not verdict.passed else [],
            lesson=lesson,
            thread_id=thread,
            plan=[f"{t.title} [{t.status}]" for t in tasks],
            tools_used=dict(Counter(b for t in tasks for b in t.tool_bundles)),
            usage=(usage + lesson_usage).model_dump(mode="json"),
        )
        try:
            yield store_runnable(store), episode_ops(scope, key, episode)
        except Exception as exc:  # noqa: BLE001 - memory is best effort
            _unavailable(runtime, "recording the run", exc)
        return {"usage": lesson_usage} if lesson_usage.llm_calls else {}

    return model_node(record, name="record_run")


def _run_failures(state: AimeState) -> str:
    """Every failed attempt the run recorded (tasks may since be revised or dropped)."""
    tasks = state.get("tasks") or {}
    lines = [
        f"- {tasks[u.task_id].title if u.task_id in tasks else u.task_id}: {clip(u.message)}"
        for u in state.get("updates") or []
        if u.status == "failed"
    ]
    if replans := state.get("replans", 0):
        lines.append(f"- the plan had to be revised {replans} time(s)")
    return "\n".join(lines)


def _run_plan_text(tasks: Sequence[Task]) -> str:
    return "\n".join(
        f"- {t.title} [{t.status}]: {clip(t.result.summary if t.result else '', 200)}"
        for t in tasks
        if t.status == "completed"
    )
