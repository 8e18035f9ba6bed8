"""The orchestrator: pure coordination, no LLM call.

Each visit it retries or escalates failed tasks, checks the budgets, and then
either fans the ready tasks out to executors (one ``Send`` each), or hands the
run to the planner (failure, stall, or the AIME every-step loop), or to the
reporter (all tasks settled, budget spent, or the run failed), or, with
``AimeConfig.escalate``, to a human where the run would end for want of plan
repairs or replans (``escalate``, :mod:`aimegraph.nodes.escalation`).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from aimegraph.config import AimeConfig
from aimegraph.nodes.scheduler import actor_inputs, in_flight_at_most, start_tasks
from aimegraph.nodes.types import Node
from aimegraph.state import (
    AimeState,
    Escalation,
    EscalationTrigger,
    RunStatus,
    Task,
    Usage,
    ready_tasks,
    render_checklist,
)

PLANNER, EXECUTOR, REPORTER, ESCALATE = "planner", "executor", "reporter", "escalate"


def make_orchestrator_node(config: AimeConfig) -> Node[AimeState]:
    """The orchestrator node; routes with ``Command(goto=...)``."""

    def orchestrator(state: AimeState, runtime: Runtime[Any]) -> Command:
        cfg = config.for_run(runtime)
        status = state.get("status", "running")
        if status == "failed" and cfg.escalate != "off" and state.get("goal"):
            # Only the planner ends a run "failed" before the orchestrator: it gave up.
            reason = state.get("reason") or "the planner gave up"
            return _escalate(
                runtime, Escalation(trigger="plan", reason=reason, failed=[], status=status)
            )
        if status != "running":
            return Command(goto=REPORTER)
        tasks = dict(state.get("tasks") or {})
        # A tool guardrail that tripped stopped its task: the run ends, nothing is retried.
        if tripwires := [
            f"task {t.id}: {t.result.tripwire}"
            for t in tasks.values()
            if t.result is not None and t.result.tripwire
        ]:
            return Command(
                goto=REPORTER, update={"status": "blocked", "reason": "; ".join(tripwires)}
            )
        steps, replans = state.get("steps", 0), state.get("replans", 0)

        # Failed tasks with retries left go back to pending; the rest need a replan.
        retried, exhausted = {}, []
        for task in tasks.values():
            if task.status != "failed":
                continue
            if task.attempts <= cfg.task_retries:
                retried[task.id] = task.retried()
            else:
                exhausted.append(task)
        tasks |= retried

        def stop(reason: str) -> Command:
            return Command(
                goto=REPORTER,
                update={"tasks": retried, "status": "budget_exhausted", "reason": reason},
            )

        def escalate(trigger: EscalationTrigger, reason: str, status: RunStatus) -> Command:
            failed = [t.id for t in exhausted]
            pending = Escalation(trigger=trigger, reason=reason, failed=failed, status=status)
            return _escalate(runtime, pending, retried)

        def replan(reason: str, *, counts: bool = True) -> Command:
            if counts and replans >= cfg.max_replans:
                why = f"{reason}; no replans left (max_replans={cfg.max_replans})"
                if cfg.escalate != "off":
                    return escalate("replans", why, "budget_exhausted")
                return stop(why)
            runtime.stream_writer({"type": "replan", "reason": reason})
            return Command(
                goto=PLANNER,
                update={
                    "tasks": retried,
                    "replan_reason": reason,
                    "replans": replans + 1 if counts else replans,
                    "dispatched": [],
                },
            )

        started_at = state.get("run_started_at")
        if spent := cfg.budget_spent(state.get("usage") or Usage(), steps, started_at=started_at):
            return stop(spent)
        if exhausted:
            failures = "These tasks failed after their retries:\n" + "\n".join(
                f"- {t.id} ({t.title}): {t.result.summary if t.result else 'no result'}"
                for t in exhausted
            )
            if cfg.escalate == "failures":
                return escalate("task_failed", failures, "failed")
            return replan(failures)
        pending = [t for t in tasks.values() if t.status == "pending"]
        if cfg.replan == "every_step" and state.get("dispatched") and pending:
            return replan(
                "A batch of tasks finished. Review the results and revise the remaining plan.",
                counts=False,
            )
        ready = ready_tasks(tasks)
        if ready:
            used = (state.get("usage") or Usage()).llm_calls
            started = start_tasks(ready[: in_flight_at_most(cfg, used)], tasks)
            runtime.stream_writer(
                {"type": "checklist", "checklist": render_checklist(tasks | started)}
            )
            return _dispatch(started, tasks, retried, state, cfg)
        if pending:
            blocked = ", ".join(f"{t.id} (after {', '.join(t.dependencies)})" for t in pending)
            return replan(f"Stalled: no task can start. Waiting: {blocked}")
        runtime.stream_writer({"type": "checklist", "checklist": render_checklist(tasks)})
        return Command(goto=REPORTER, update={"tasks": retried, "dispatched": []})

    return orchestrator


def _escalate(
    runtime: Runtime[Any], pending: Escalation, retried: dict[str, Task] | None = None
) -> Command:
    """To the human, with why the run would otherwise end."""
    runtime.stream_writer({"type": "escalation", "reason": pending["reason"]})
    update: dict[str, Any] = {"escalation": pending, "status": "running", "reason": None}
    return Command(goto=ESCALATE, update=update | {"tasks": retried or {}})


def _dispatch(
    started: dict[str, Task],
    tasks: dict[str, Task],
    retried: dict[str, Task],
    state: AimeState,
    cfg: AimeConfig,
) -> Command:
    """One Send per started task, each with its dependencies' results; under the
    eager scheduler, the executor node starts them (and what they make ready)."""
    update = {
        "tasks": retried | started,
        "steps": state.get("steps", 0) + 1,
        "dispatched": list(started),
    }
    if cfg.scheduler == "eager":
        return Command(goto=EXECUTOR, update=update)
    inputs = actor_inputs(
        list(started.values()),
        tasks,
        goal=state.get("goal", ""),
        facts=state.get("facts") or {},
        used_calls=(state.get("usage") or Usage()).llm_calls,
        cfg=cfg,
        prompt_version=state.get("prompt_version"),
        conversation=state.get("recent_turns", ""),
        run_started_at=state.get("run_started_at"),
    )
    return Command(goto=[Send(EXECUTOR, inp) for inp in inputs], update=update)
