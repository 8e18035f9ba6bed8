"""The eager scheduler (``AimeConfig.scheduler="eager"``, the default): which tasks
start, and when. :class:`Schedule` is one executor visit's bookkeeping, with no I/O:
it starts each task the moment its dependencies complete, at most ``max_parallel``
(and no more than the LLM calls left) at a time, merges what finished, sends a failed
task with retries left back to pending, and stops starting once a task failed for
good, a budget is spent or ``replan="every_step"`` asks for one batch only. The
``executor`` node (:mod:`aimegraph.nodes.executor`) runs the actors it starts; the
orchestrator uses the same helpers for the first batch and for the batch scheduler
(``scheduler="batch"``, one ``Send`` per ready task)."""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aimegraph.config import AimeConfig
from aimegraph.lazy import moved
from aimegraph.state import (
    ActorInput,
    ActorOutput,
    AimeState,
    ProgressUpdate,
    RoleUsage,
    Task,
    Usage,
    dependency_results,
    merge_tasks,
    ready_tasks,
    render_checklist,
)
from aimegraph.state.reducers import merge_facts
from aimegraph.state.timing import start_attempt


def actor_inputs(
    started: Sequence[Task],
    tasks: dict[str, Task],
    *,
    goal: str,
    facts: dict[str, str],
    used_calls: int,
    cfg: AimeConfig,
    sharing: int | None = None,
    prompt_version: str | None = None,
    conversation: str = "",
    run_started_at: float | None = None,
) -> list[ActorInput]:
    """What each started task's actor gets: its dependencies' results, the run's
    facts, the newest earlier turns of the conversation, and its share of the LLM
    calls left (``sharing`` tasks split them; by default the started ones)."""
    call_budget = None
    if cfg.max_llm_calls is not None:
        call_budget = max(1, (cfg.max_llm_calls - used_calls) // max(1, sharing or len(started)))
    return [
        ActorInput(
            goal=goal,
            task=t,
            dependency_results=dependency_results(tasks, t),
            llm_call_budget=call_budget,
            known_facts=facts,
            prompt_version=prompt_version,
            conversation=conversation,
            run_started_at=run_started_at,
        )
        for t in started
    ]


def in_flight_at_most(cfg: AimeConfig, used_calls: int) -> int:
    """How many actors may run at once: ``max_parallel``, and no more than the LLM
    calls left, since each actor makes one at least (a share is never below one)."""
    if cfg.max_llm_calls is None:
        return cfg.max_parallel
    return min(cfg.max_parallel, max(0, cfg.max_llm_calls - used_calls))


def start_tasks(ready: Sequence[Task], tasks: Mapping[str, Task]) -> dict[str, Task]:
    """``ready`` (tasks of ``tasks``) marked in progress now, one attempt more."""
    now = time.time()
    return {t.id: start_attempt(t, tasks, at=now) for t in ready}


@dataclass
class Schedule:
    """One executor visit's bookkeeping (no I/O): the task map as it evolves, what
    finished, what may start next, and the update handed back to the graph."""

    cfg: AimeConfig
    state: AimeState
    writer: Callable[[Any], None]
    tasks: dict[str, Task] = field(default_factory=dict)
    running: list[str] = field(default_factory=list)
    changed: dict[str, Task] = field(default_factory=dict)
    updates: list[ProgressUpdate] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    facts: dict[str, str] = field(default_factory=dict)
    steps: int = 0
    launched: list[str] = field(default_factory=list)
    halted: bool = False
    sharing_at_least: int = 0
    """How many actors at least split the LLM calls left: while a plan still streams in,
    more tasks may start beside those in flight."""
    beside: Usage = field(default_factory=Usage)
    """Usage the run made beside this schedule's actors, not yet in the state (the
    streaming planner's calls): counted in the budgets, not in the update."""

    @classmethod
    def begin(cls, state: AimeState, cfg: AimeConfig, writer: Callable[[Any], None]) -> Schedule:
        return cls(
            cfg=cfg,
            state=state,
            writer=writer,
            tasks=dict(state.get("tasks") or {}),
            steps=state.get("steps", 0),
        )

    def first_batch(self) -> list[ActorInput]:
        """The batch the orchestrator started (``dispatched``, in progress)."""
        batch = [
            self.tasks[i]
            for i in self.state.get("dispatched") or []
            if i in self.tasks and self.tasks[i].status == "in_progress"
        ]
        return self._launch(batch)

    def next_batch(self, among: Container[str] | None = None) -> list[ActorInput]:
        """Ready tasks (of ``among`` only, when given) to start now, within
        ``max_parallel`` and the budgets."""
        if self.halted or self.cfg.replan == "every_step":
            return []
        usage = self._used()
        free = in_flight_at_most(self.cfg, usage.llm_calls) - len(self.running)
        ready = [
            t
            for t in ready_tasks(self.tasks)
            if t.id not in self.running and (among is None or t.id in among)
        ][: max(0, free)]
        if not ready:
            return []
        started_at = self.state.get("run_started_at")
        if self.cfg.budget_spent(usage, self.steps, started_at=started_at):
            # The orchestrator reports the spent budget when the runner hands back.
            self.halted = True
            return []
        started = start_tasks(ready, self.tasks)
        self.steps += 1
        self.tasks |= started
        self.changed |= started
        return self._launch(list(started.values()))

    def _launch(self, batch: list[Task]) -> list[ActorInput]:
        self.running += [t.id for t in batch]
        self.launched += [t.id for t in batch if t.id not in self.launched]
        usage = self._used()
        return actor_inputs(
            batch,
            self.tasks,
            goal=self.state.get("goal", ""),
            facts=merge_facts(self.state.get("facts") or {}, self.facts),
            used_calls=usage.llm_calls,
            cfg=self.cfg,
            sharing=max(len(self.running), self.sharing_at_least),
            prompt_version=self.state.get("prompt_version"),
            conversation=self.state.get("recent_turns", ""),
            run_started_at=self.state.get("run_started_at"),
        )

    def _used(self) -> RoleUsage:
        """The run's counts so far: totals only (budgets read no breakdown), as adding
        whole ``Usage`` records copies their breakdowns by task on every start."""
        run = self.state.get("usage") or Usage()
        return run.totals() + self.beside.totals() + self.usage.totals()

    def finish(self, task_id: str, output: ActorOutput) -> None:
        """Merge a finished actor's output. A failure with retries left goes back to
        pending (it starts again at once); one without stops further starts."""
        self.running.remove(task_id)
        done = output.get("tasks") or {}
        self.tasks = merge_tasks(self.tasks, done)
        self.changed = merge_tasks(self.changed, done)
        self.updates += output.get("updates") or []
        self.usage = self.usage + (output.get("usage") or Usage())
        self.facts = merge_facts(self.facts, output.get("facts") or {})
        settled = self.tasks[task_id]
        if settled.status == "failed":
            if settled.result is not None and settled.result.tripwire:
                self.halted = True  # a guardrail tripped: the orchestrator ends the run
            elif settled.attempts <= self.cfg.task_retries:
                retried = {task_id: settled.retried()}
                self.tasks |= retried
                self.changed |= retried
            else:
                self.halted = True

    def publish(self) -> None:
        """Stream the progress list, once per round (rendering it is linear in the plan)."""
        self.writer({"type": "checklist", "checklist": render_checklist(self.tasks)})

    def update(self) -> dict[str, Any]:
        """The node's update: every task it changed, the actors' records and usage."""
        out: dict[str, Any] = {
            "tasks": self.changed,
            "updates": self.updates,
            "usage": self.usage,
            "steps": self.steps,
            "dispatched": self.launched,
        }
        if self.facts:
            out["facts"] = self.facts
        return out


# Moved to the executor node's own module, kept importable from here for a release.
__getattr__ = moved(__name__, {"make_executor_node": "aimegraph.nodes.executor"})
