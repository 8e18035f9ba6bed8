"""The orchestrator: pure coordination, no LLM call.

Each visit it retries or escalates failed tasks, checks the budgets, and then
either fans the ready tasks out to executors (one ``Send`` each), or hands the
run to the planner (failure, stall, or the AIME every-step loop), or to the
reporter (all tasks settled, budget spent, or the run failed).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from aimegraph.config import AimeConfig
from aimegraph.nodes.scheduler import actor_inputs, start_tasks
from aimegraph.nodes.types import Node
from aimegraph.state import AimeState, Task, Usage, ready_tasks, render_checklist

PLANNER, EXECUTOR, REPORTER = "planner", "executor", "reporter"


def make_orchestrator_node(config: AimeConfig) -> Node[AimeState]:
    """The orchestrator node; routes with ``Command(goto=...)``."""

    def orchestrator(state: AimeState, runtime: Runtime[Any]) -> Command:
        cfg = config.for_run(runtime)
        if state.get("status", "running") != "running":
            return Command(goto=REPORTER)
        tasks = dict(state.get("tasks") or {})
        steps, replans = state.get("steps", 0), state.get("replans", 0)

        # Failed tasks with retries left go back to pending; the rest need a replan.
        retried, exhausted = {}, []
        for task in tasks.values():
            if task.status != "failed":
                continue
            if task.attempts <= cfg.task_retries:
                retried[task.id] = task.model_copy(update={"status": "pending"})
            else:
                exhausted.append(task)
        tasks |= retried

        def stop(reason: str) -> Command:
            return Command(
                goto=REPORTER,
                update={"tasks": retried, "status": "budget_exhausted", "reason": reason},
            )

        def replan(reason: str, *, counts: bool = True) -> Command:
            if counts and replans >= cfg.max_replans:
                return stop(f"{reason}; no replans left (max_replans={cfg.max_replans})")
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
            return replan(
                "These tasks failed after their retries:\n"
                + "\n".join(
                    f"- {t.id} ({t.title}): {t.result.summary if t.result else 'no result'}"
                    for t in exhausted
                )
            )
        pending = [t for t in tasks.values() if t.status == "pending"]
        if cfg.replan == "every_step" and state.get("dispatched") and pending:
            return replan(
                "A batch of tasks finished. Review the results and revise the remaining plan.",
                counts=False,
            )
        ready = ready_tasks(tasks)
        if ready:
            started = start_tasks(ready[: cfg.max_parallel])
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
        run_started_at=state.get("run_started_at"),
    )
    return Command(goto=[Send(EXECUTOR, inp) for inp in inputs], update=update)
