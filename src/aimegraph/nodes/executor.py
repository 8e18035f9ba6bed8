"""The ``executor`` node: runs the actor subgraph for each task the eager scheduler
(:class:`aimegraph.nodes.scheduler.Schedule`, ``AimeConfig.scheduler="eager"``)
starts, each the moment its dependencies complete.

LangGraph runs the nodes of a super-step together and starts the next step only
when all of them are done, so a batch of ``Send``s waits for its slowest member
(the maintainers keep that barrier by design). Here the ``executor`` node is a
runner instead: it calls the actor subgraph for each task as a functional-API
``@task`` (which returns a future at once), waits for the first to finish,
starts whatever that made ready, and goes on until nothing more can start, with
at most ``max_parallel`` tasks in flight.

Durability. Each ``@task``'s result is saved as a pending write of the step the
moment it finishes, so a crash loses only the tasks in flight: on resume the
node runs again and every finished task returns its saved result at once.
LangGraph matches a saved result to its call by the order of the node's
``@task`` calls (a per-node call counter), not by the call's input, and the
order in which tasks finish depends on timing. So each round's outcome (which
tasks finished) is itself recorded as a tiny ``@task`` whose result is that
list: live, it returns its input; replayed, it returns the original round, and
the runner waits for exactly those tasks and starts the same ones in the same
order, so every later call lines up with its saved result (a round with one task
in flight has only one outcome and is not recorded). Once an interrupt or
an error stops the run, the runner makes no more calls (it only waits for the
tasks in flight), because a resumed task may end differently the next time.

A run that saves no checkpoints (no checkpointer, compiled in or inherited) has
nothing to replay, and a ``@task`` call costs about half a millisecond of LangGraph's
scheduling: there the runner calls the actor subgraph itself, in the node's thread
when it is the only actor to run (a chain of tasks), else in a thread pool of the
run's ``max_concurrency`` (an asyncio task each under ``ainvoke``), and records no
rounds.

Stopping. Once the run is asked to drain (LangGraph's ``RunControl.request_drain()``:
Ctrl-C, SIGTERM, a cancel), the runner starts nothing more either: the actors in
flight stop at their own next step (they share the run's control), and when all
of them have finished it hands back what they did, so the run stops at the next
step boundary with no finished task lost. An actor that stopped mid-way raises
``GraphDrained`` out of the node, as an interrupt would: the step's finished
tasks are saved, and on resume the node replays them and the actor carries on
from its own checkpoint.

What stays as in the batch scheduler: the orchestrator decides the first batch,
retries, replans, budgets and routing; the runner hands back to it when a task
has failed for good (a replan point), when a budget is spent, or when nothing
more can start. With ``replan="every_step"`` the runner runs only the batch it
was given, so the planner still revises the plan after every batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from langchain_core.runnables import Runnable
from langchain_core.runnables.config import get_executor_for_config
from langgraph.errors import GraphDrained, GraphInterrupt
from langgraph.func import task
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Interrupt

from aimegraph.config import AimeConfig
from aimegraph.lazy import moved
from aimegraph.nodes.dual import dual_node
from aimegraph.nodes.scheduler import Schedule
from aimegraph.running.scope import saves_checkpoints
from aimegraph.state import ActorInput, ActorOutput, AimeState, Usage

# The actor's ReAct nodes were in this module's place (now aimegraph.nodes.actor);
# their old import path is kept for a release.
__getattr__ = moved(
    __name__,
    dict.fromkeys(
        [
            "ActorNode",
            "make_assemble_node",
            "make_conclude_node",
            "make_hand_back_node",
            "make_react_node",
            "reply_messages",
            "task_message",
            "transcript",
        ],
        "aimegraph.nodes.actor",
    ),
)


def actor_calls(
    actor_graph: Pregel[Any, Any, Any, Any], config: AimeConfig, *, checkpointed: bool
) -> tuple[Callable[[ActorInput], ActorOutput], Callable[[ActorInput], Awaitable[ActorOutput]]]:
    """``actor_graph`` run on one task, for ``invoke`` and for ``ainvoke``, both named
    ``actor``; with ``checkpointed`` and ``actor_durability="exit"``, each actor runs
    with LangGraph's ``durability="exit"``."""

    def durability() -> dict[str, Any]:
        cfg = config.for_run(get_runtime())
        # Without a checkpointer LangGraph warns that durability has no effect.
        return {"durability": "exit"} if checkpointed and cfg.actor_durability == "exit" else {}

    # The functions' names name the @tasks made of them (and their checkpoint namespaces).
    def actor(inp: ActorInput) -> ActorOutput:
        return cast(ActorOutput, actor_graph.invoke(inp, **durability()))

    async def aactor(inp: ActorInput) -> ActorOutput:
        return cast(ActorOutput, await actor_graph.ainvoke(inp, **durability()))

    aactor.__name__ = "actor"
    return actor, aactor


def actor_tasks(
    actor_graph: Pregel[Any, Any, Any, Any], config: AimeConfig, *, checkpointed: bool
) -> tuple[Callable[[ActorInput], Any], Callable[[ActorInput], Any]]:
    """:func:`actor_calls` as ``@task``s named ``actor`` (a call returns a future at once)."""
    call, acall = actor_calls(actor_graph, config, checkpointed=checkpointed)
    return task(call), task(acall)


def make_executor_node(
    actor_graph: Pregel[Any, Any, Any, Any], config: AimeConfig, *, checkpointed: bool = False
) -> Runnable[AimeState, dict[str, Any]]:
    """The eager ``executor`` node: runs ``actor_graph`` (the compiled actor subgraph) once
    per task, each as a ``@task`` started the moment the task is ready.

    Sync under ``graph.invoke``, awaited under ``graph.ainvoke``. Interrupts raised
    inside actors (tool approval, ``ask_human``) are collected from all actors in
    flight and raised together; resuming answers them by id and the actors go on
    from their own checkpoints. With ``checkpointed`` (the graph is compiled with a
    checkpointer) and ``actor_durability="exit"``, each actor runs with LangGraph's
    ``durability="exit"``: no checkpoint per ReAct step, one when it pauses.
    """

    # Where the run saves nothing, the actors are called without @task.
    call, acall = actor_calls(actor_graph, config, checkpointed=checkpointed)
    actor, aactor = task(call), task(acall)

    # The functions' names name the @tasks (and their checkpoint namespaces).
    @task
    def round(finished: list[str]) -> list[str]:  # noqa: A001 - the task's name
        # Live, the ids of the tasks that finished this round; replayed, the saved ones.
        return finished

    async def _around(finished: list[str]) -> list[str]:
        return finished

    _around.__name__ = "round"
    around = task(_around)

    def executor(state: AimeState, runtime: Runtime[Any]) -> dict[str, Any]:
        # Naming the actor graph here makes it this node's subgraph to LangGraph (it
        # reads a node function's nonlocals), so get_graph(xray=...) draws the actors.
        _ = actor_graph
        schedule = Schedule.begin(state, config.for_run(runtime), runtime.stream_writer)
        running: dict[str, concurrent.futures.Future[ActorOutput]] = {}
        saved = saves_checkpoints()
        with get_executor_for_config(None) as pool:

            def launch(batch: list[ActorInput]) -> None:
                for inp in batch:
                    if saved:
                        running[inp["task"].id] = actor(inp)
                    elif running or len(batch) > 1:
                        running[inp["task"].id] = pool.submit(call, inp)
                    else:  # the only actor to run: no thread to hand it to
                        running[inp["task"].id] = _called(call, inp)

            launch(schedule.first_batch())
            stopped = Stop(runtime)
            while running and not stopped:
                concurrent.futures.wait(
                    running.values(), return_when=concurrent.futures.FIRST_COMPLETED
                )
                finished = [i for i, f in running.items() if f.done()]
                if saved and len(running) > 1:  # else the round's outcome is certain
                    finished = round(finished).result()
                for task_id in finished:
                    stopped.collect(schedule, task_id, running.pop(task_id))
                if not stopped:
                    launch(schedule.next_batch())
                schedule.publish()
            # Stopped by an interrupt, an error or a drain: no more calls, only the wait.
            concurrent.futures.wait(running.values())
        for task_id in list(running):
            stopped.collect(schedule, task_id, running.pop(task_id))
        stopped.raise_if_any()
        return schedule.update()

    async def aexecutor(state: AimeState, runtime: Runtime[Any]) -> dict[str, Any]:
        schedule = Schedule.begin(state, config.for_run(runtime), runtime.stream_writer)
        running: dict[str, asyncio.Future[ActorOutput]] = {}
        saved = saves_checkpoints()

        def launch(batch: list[ActorInput]) -> None:
            for inp in batch:
                # Under ainvoke a @task call returns an asyncio future.
                running[inp["task"].id] = (
                    cast(asyncio.Future[ActorOutput], aactor(inp))
                    if saved
                    else asyncio.ensure_future(acall(inp))
                )

        launch(schedule.first_batch())
        stopped = Stop(runtime)
        while running and not stopped:
            await asyncio.wait(running.values(), return_when=asyncio.FIRST_COMPLETED)
            finished = [i for i, f in running.items() if f.done()]
            if saved and len(running) > 1:
                finished = await around(finished)
            for task_id in finished:
                fut = running.pop(task_id)
                await asyncio.wait([fut])
                stopped.collect(schedule, task_id, fut)
            if not stopped:
                launch(schedule.next_batch())
            schedule.publish()
        if running:
            await asyncio.wait(running.values())
        for task_id in list(running):
            stopped.collect(schedule, task_id, running.pop(task_id))
        stopped.raise_if_any()
        return schedule.update()

    return dual_node(executor, aexecutor, name="executor")


def _called(
    call: Callable[[ActorInput], ActorOutput], inp: ActorInput
) -> concurrent.futures.Future[ActorOutput]:
    """``call(inp)`` made now, its outcome as a done future (as a pool's would be)."""
    fut: concurrent.futures.Future[ActorOutput] = concurrent.futures.Future()
    try:
        fut.set_result(call(inp))
    except Exception as exc:  # noqa: BLE001 - the runner collects it as any actor's
        fut.set_exception(exc)
    return fut


class Finisher(Protocol):
    """What takes a finished ``@task``'s output (:meth:`Stop.collect`)."""

    halted: bool

    def finish(self, task_id: str, output: Any) -> None: ...


@dataclass
class Discarded:
    """Where the outputs of actors whose tasks were dropped while they ran go: only
    their usage is kept (the calls were made)."""

    running: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    halted: bool = False

    def finish(self, task_id: str, output: ActorOutput) -> None:
        self.running.remove(task_id)
        self.usage = self.usage + (output.get("usage") or Usage())


class Stop:
    """Interrupts, drains and errors of finished actors; truthy once there is one,
    or once the run is asked to drain."""

    def __init__(self, runtime: Runtime[Any]) -> None:
        self.control = runtime.control
        self.interrupts: list[Interrupt] = []
        self.drained: GraphDrained | None = None
        self.error: BaseException | None = None

    def __bool__(self) -> bool:
        draining = self.control is not None and self.control.drain_requested
        return draining or bool(self.interrupts) or self.error is not None

    def collect(
        self,
        schedule: Finisher,
        task_id: str,
        fut: concurrent.futures.Future[Any] | asyncio.Future[Any],
    ) -> None:
        """Merge a finished actor's result into ``schedule``, or keep why it stopped."""
        try:
            output = fut.result()
        except GraphInterrupt as exc:
            self.interrupts += list(exc.args[0]) if exc.args else []
            schedule.halted = True
        except GraphDrained as exc:  # the actor stopped mid-way; it resumes from there
            self.drained = exc
            schedule.halted = True
        except BaseException as exc:  # noqa: BLE001 - re-raised once the others are done
            self.error = self.error or exc
            schedule.halted = True
        else:
            schedule.finish(task_id, output)

    def raise_if_any(self) -> None:
        if self.error is not None:
            raise self.error
        if self.interrupts:
            raise GraphInterrupt(tuple(self.interrupts))
        if self.drained is not None:
            raise self.drained
