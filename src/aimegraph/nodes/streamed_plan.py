"""The streaming planner node (``AimeConfig.stream_plans``): the planner and the
eager runner in one node, so tasks start while the plan's reply still streams in.

LangGraph applies a node's writes only when the node returns, so a planner node
cannot hand tasks to the executor node before its reply has ended. The eager
runner (:mod:`aimegraph.nodes.executor`) already starts each actor as a
functional-API ``@task`` inside its own node; this node does the same, with the
planner subgraph as one more ``@task`` (``plan``) whose draft node streams its reply
into a :class:`~aimegraph.nodes.plan_feed.PlanFeed`. The runner starts each task
the feed accepts as soon as its dependencies are done (at most ``max_parallel`` in
flight), and once the planner subgraph has returned, runs the rest of the plan as
the executor would, until nothing more can start.

Invalid at its end. The planner subgraph checks the whole reply when it ends, as
without streaming, and sends an invalid one back for repair; the repaired reply
streams too. Tasks already started are **kept**: they run on, and when the planner
returns its accepted plan, a started task the plan keeps unchanged (same id, same
spec) keeps its progress and result and is not run again. One the plan changes or
leaves out is discarded: its result is never written, an actor still running is
not cancelled but its output is dropped when it ends (its usage counts), and a
changed task starts afresh from the plan. When the planner gives up (or the run's
budget ends it), nothing more starts and every streamed result is discarded.

Durability, as in the executor: each actor's result is saved as a pending write
the moment it ends, and each round's outcome (the actors that finished, the tasks
that arrived from the stream, whether the planner returned) is recorded as a
``round`` ``@task``, so a replay after a crash starts the same tasks in the same
order and every finished task returns its saved result. A planner that had not
returned at the crash runs again (its model call with it); tasks it had already
handed over come from the recorded rounds, and its repeated ones are not started
twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from langchain_core.runnables import Runnable
from langgraph.func import task
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.nodes.dual import dual_node
from aimegraph.nodes.executor import Discarded, Finisher, Stop, actor_tasks
from aimegraph.nodes.plan_feed import PLAN_FEED, PlanFeed
from aimegraph.nodes.scheduler import Schedule
from aimegraph.state import ActorInput, ActorOutput, AimeState, Task, Usage

_SPEC_FIELDS: set[str] = {
    "id", "title", "description", "parent_id", "dependencies", "completion_criteria",
    "tool_bundles", "persona", "skills", "agent", "team", "call",
}  # fmt: skip
"""What the planner wrote of a task: two tasks with these equal are the same task."""


class Round(TypedDict):
    """One round of the runner, as recorded: the actors that finished, the tasks that
    arrived from the stream (as JSON), whether the planner has returned, and the model
    calls it had made (counted in the budgets before it returns)."""

    finished: list[str]
    arrived: list[dict[str, Any]]
    planned: bool
    planner_calls: int


def streams_plans(cfg: AimeConfig) -> bool:
    """Whether this run streams its plans: ``stream_plans``, and no human approves the
    plan first, and the planner does not revise the plan after every batch."""
    return cfg.stream_plans and not cfg.approve_plan and cfg.replan != "every_step"


@dataclass
class StreamedRun:
    """The bookkeeping of one visit (no I/O): the executor's :class:`Schedule`, the
    tasks taken from the stream, and the planner's output once it has returned."""

    schedule: Schedule
    before: Mapping[str, Task]
    """The progress list the planner started from."""
    streamed: dict[str, Task] = field(default_factory=dict)
    discarded: Discarded = field(default_factory=Discarded)
    set_aside: dict[str, str] = field(default_factory=dict)
    """Running actors just discarded: task id -> the key their future moves to, so a
    changed task's new actor (same id) neither replaces nor is taken for the old one."""
    discards: int = 0
    planner: dict[str, Any] | None = None
    halted: bool = False  # the Finisher protocol: the planner stopped (Stop.collect)

    @property
    def planned(self) -> bool:
        return self.planner is not None

    def observe(self, running: Mapping[str, Any], plan_done: bool, feed: PlanFeed) -> Round:
        """What happened since the last round, live."""
        arrived = [] if self.planned else feed.new(self.streamed)
        return Round(
            finished=[i for i, f in running.items() if f.done()],
            arrived=[t.model_dump(mode="json") for t in arrived],
            planned=plan_done and not self.planned,
            planner_calls=feed.calls,
        )

    def uncertain(self, in_flight: int) -> bool:
        """Whether a round's outcome depends on timing (and so is recorded): while the
        planner runs, or with more than one actor in flight."""
        return not self.planned or in_flight > 1

    def finisher(self, task_id: str) -> Finisher:
        """Who takes the output of ``task_id``'s actor."""
        return self.discarded if task_id in self.discarded.running else self.schedule

    def arrive(self, tasks: list[dict[str, Any]]) -> None:
        """Take the streamed tasks: pending in the schedule, to start when ready."""
        for data in tasks:
            streamed = Task.model_validate(data)
            self.streamed[streamed.id] = streamed
            self.schedule.tasks[streamed.id] = streamed

    def next_batch(self) -> list[ActorInput]:
        """Before the planner returns, only streamed tasks start (an earlier plan's
        pending tasks may be revised or dropped), none under a token or cost budget (the
        reply's tokens are known when it ends), and each with a share of the calls left
        as if ``max_parallel`` ran; after, any ready task."""
        if self.planned:
            self.schedule.sharing_at_least = 0
            return self.schedule.next_batch()
        cfg = self.schedule.cfg
        if cfg.max_tokens is not None or cfg.max_cost_usd is not None:
            return []
        # More tasks may come: each shares the calls left as if max_parallel ran.
        self.schedule.sharing_at_least = cfg.max_parallel
        return self.schedule.next_batch(self.streamed)

    def count(self, planner_calls: int) -> None:
        """Count the planner's calls (its usage once it has returned) and the discarded
        actors' in the budgets."""
        planner = (self.planner or {}).get("usage") if self.planned else None
        made = planner if isinstance(planner, Usage) else Usage(llm_calls=planner_calls)
        self.schedule.beside = made + self.discarded.usage

    def finish(self, _: str, planner: dict[str, Any]) -> None:
        """The planner has returned ``planner`` (its output): keep the streamed tasks
        its accepted plan keeps unchanged, discard the others (see the module
        docstring); the progress list becomes the plan's."""
        self.planner = planner
        schedule = self.schedule
        accepted = planner.get("status", "running") == "running" and not planner.get("proposal")
        plan: Mapping[str, Task] = (
            (planner.get("tasks") or self.before) if accepted else self.before
        )
        kept = {}
        for task_id, streamed in self.streamed.items():
            if accepted and task_id in plan and _same(plan[task_id], streamed):
                kept[task_id] = schedule.tasks[task_id]
                continue
            schedule.changed.pop(task_id, None)
            schedule.launched = [i for i in schedule.launched if i != task_id]
            if task_id in schedule.running:
                schedule.running.remove(task_id)
                self.discards += 1
                key = f"{task_id} (discarded {self.discards})"
                self.set_aside[task_id] = key
                self.discarded.running.append(key)
        schedule.tasks = {**plan, **kept}
        schedule.halted = schedule.halted or not accepted

    def update(self) -> dict[str, Any]:
        """The node's update: the planner's, with what the runner did on top."""
        planner = dict(self.planner or {})
        ran = self.schedule.update()
        tasks = {**(planner.get("tasks") or {}), **ran.pop("tasks")}
        usage = (planner.get("usage") or Usage()) + ran.pop("usage") + self.discarded.usage
        return {**planner, **ran, "tasks": tasks, "usage": usage}


def _same(planned: Task, streamed: Task) -> bool:
    return planned.model_dump(include=_SPEC_FIELDS) == streamed.model_dump(include=_SPEC_FIELDS)


def make_streaming_planner_node(
    planner_graph: Pregel[Any, Any, Any, Any],
    actor_graph: Pregel[Any, Any, Any, Any],
    config: AimeConfig,
    *,
    checkpointed: bool = False,
) -> Runnable[AimeState, dict[str, Any]]:
    """The ``planner`` node of an eager graph built with ``stream_plans``: the planner
    subgraph (``planner_graph``) with the eager runner of ``actor_graph`` (see the
    module docstring). A run that does not stream its plans (:func:`streams_plans`)
    calls the planner subgraph alone, as the plain ``planner`` node would."""
    actor, aactor = actor_tasks(actor_graph, config, checkpointed=checkpointed)

    # The functions' names name the @tasks (and their checkpoint namespaces).
    @task
    def plan(state: AimeState) -> dict[str, Any]:
        return cast(dict[str, Any], planner_graph.invoke(state))

    @task
    def round(seen: Round) -> Round:  # noqa: A001 - the task's name
        # Live, what this round saw; replayed, the saved round.
        return seen

    async def _aplan(state: AimeState) -> dict[str, Any]:
        return cast(dict[str, Any], await planner_graph.ainvoke(state))

    async def _around(seen: Round) -> Round:
        return seen

    _aplan.__name__, _around.__name__ = "plan", "round"
    aplan, around = task(_aplan), task(_around)

    def begin(
        state: AimeState, runtime: Runtime[Any], call: Callable[[AimeState], Any]
    ) -> tuple[StreamedRun, PlanFeed, Any]:
        schedule = Schedule.begin(state, config.for_run(runtime), runtime.stream_writer)
        run = StreamedRun(schedule, before=dict(state.get("tasks") or {}))
        feed = PlanFeed()
        token = PLAN_FEED.set(feed)  # the plan @task runs in a copy of this context
        try:
            planning = call(state)
        finally:
            PLAN_FEED.reset(token)
        return run, feed, planning

    def take(
        run: StreamedRun, stopped: Stop, seen: Round, running: dict[str, Any], planning: Any
    ) -> None:
        """Apply a round (its futures done): merge the finished actors, take the
        arrived tasks, and the planner's output once it has returned."""
        for task_id in seen["finished"]:
            stopped.collect(run.finisher(task_id), task_id, running.pop(task_id))
        run.arrive(seen["arrived"])
        if seen["planned"]:
            stopped.collect(run, "plan", planning)
            for task_id, key in run.set_aside.items():
                running[key] = running.pop(task_id)
            run.set_aside.clear()
        run.count(seen["planner_calls"])

    def wind_up(
        run: StreamedRun, stopped: Stop, running: dict[str, Any], planning: Any
    ) -> dict[str, Any]:
        """Once everything has ended: collect it, raise what stopped the run, else the update."""
        for task_id in list(running):
            stopped.collect(run.finisher(task_id), task_id, running.pop(task_id))
        if not (run.planned or run.halted):  # halted: its failure is already collected
            stopped.collect(run, "plan", planning)
        stopped.raise_if_any()
        return run.update()

    def node(state: AimeState, runtime: Runtime[Any]) -> dict[str, Any]:
        # Naming the planner subgraph here makes it this node's to LangGraph (it reads
        # a node function's nonlocals), so get_graph(xray=...) draws the planner; the
        # actors draw under the executor.
        _ = planner_graph
        if not streams_plans(config.for_run(runtime)):
            return cast(dict[str, Any], planner_graph.invoke(state))
        run, feed, planning = begin(state, runtime, plan)
        running: dict[str, concurrent.futures.Future[ActorOutput]] = {}
        stopped = Stop(runtime)
        while not stopped and not run.halted and (not run.planned or running):
            waits: list[concurrent.futures.Future[Any]] = list(running.values())
            if not run.planned:
                waits += [planning, feed.news(run.streamed)]
            concurrent.futures.wait(waits, return_when=concurrent.futures.FIRST_COMPLETED)
            seen = run.observe(running, planning.done(), feed)
            if run.uncertain(len(running)):
                seen = round(seen).result()
            concurrent.futures.wait(
                [running[i] for i in seen["finished"]] + [planning] * seen["planned"]
            )
            take(run, stopped, seen, running, planning)
            if not stopped:
                for inp in run.next_batch():
                    running[inp["task"].id] = actor(inp)
            run.schedule.publish()
        # Stopped by an interrupt, an error or a drain: no more @task calls, only the wait.
        concurrent.futures.wait([*running.values(), planning])
        return wind_up(run, stopped, running, planning)

    async def anode(state: AimeState, runtime: Runtime[Any]) -> dict[str, Any]:
        _ = planner_graph
        if not streams_plans(config.for_run(runtime)):
            return cast(dict[str, Any], await planner_graph.ainvoke(state))
        run, feed, planning = begin(state, runtime, aplan)
        running: dict[str, asyncio.Future[ActorOutput]] = {}
        stopped = Stop(runtime)
        while not stopped and not run.halted and (not run.planned or running):
            waits: list[asyncio.Future[Any]] = list(running.values())
            if not run.planned:
                waits += [planning, asyncio.wrap_future(feed.news(run.streamed))]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            seen = run.observe(running, planning.done(), feed)
            if run.uncertain(len(running)):
                seen = await around(seen)
            if ended := [running[i] for i in seen["finished"]] + [planning] * seen["planned"]:
                await asyncio.wait(ended)
            take(run, stopped, seen, running, planning)
            if not stopped:
                for inp in run.next_batch():
                    running[inp["task"].id] = cast(asyncio.Future[ActorOutput], aactor(inp))
            run.schedule.publish()
        await asyncio.wait([*running.values(), planning])
        return wind_up(run, stopped, running, planning)

    return dual_node(node, anode, name="planner")
