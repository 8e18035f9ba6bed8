"""The compiled aime graph: a run-scoped ``CompiledStateGraph`` with one guard.

An ``update_state`` makes a new super-step. While actors wait on an ``interrupt()``
(``ask_human``, tool approval), their tasks are pending ``Send`` packets of the current
step, and LangGraph's new step does not carry them over: the actors would be dropped
and the run left ``running`` with nothing next. So an update that leaves LangGraph to
infer the writing node (no ``as_node``) is refused there, with the two ways that do
what was meant.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.runnables import RunnableConfig
from langgraph.errors import InvalidUpdateError
from langgraph.types import StateSnapshot, StateUpdate

from aimegraph.config import AimeConfig
from aimegraph.graphs.scoped import RunScopedGraph
from aimegraph.state import AimeInput, AimeOutput, AimeState

WAITING_HINT = (
    "update_state would drop the {n} task(s) waiting on a human ({names}): LangGraph starts "
    "a new step without them. To keep them waiting, send the update with the answer, "
    "graph.invoke(Command(resume=..., update={{...}}), config), or alone, "
    "graph.invoke(Command(update={{...}}), config); to replace the step and drop them, "
    "pass as_node explicitly."
)


class WaitingTasksError(InvalidUpdateError):
    """An ``update_state`` without ``as_node`` while tasks wait on an interrupt."""


class AimeCompiledGraph(RunScopedGraph[AimeState, AimeConfig, AimeInput, AimeOutput]):
    """What :func:`aimegraph.build_aime_graph` returns (``AimeCompiledGraph.of(compiled)``):
    each run holds its run scope (:class:`RunScopedGraph`), and state updates refuse to
    drop actors that wait on an interrupt (module docstring)."""

    def bulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        if _infers_node(supersteps):
            _refuse_while_waiting(self.get_state(config))
        return super().bulk_update_state(config, supersteps)

    async def abulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        if _infers_node(supersteps):
            _refuse_while_waiting(await self.aget_state(config))
        return await super().abulk_update_state(config, supersteps)


def _infers_node(supersteps: Sequence[Sequence[StateUpdate]]) -> bool:
    return any(update[1] is None for step in supersteps for update in step)


def _refuse_while_waiting(snapshot: StateSnapshot) -> None:
    waiting = [task.name for task in snapshot.tasks if task.interrupts]
    if waiting:
        names = ", ".join(sorted(set(waiting)))
        raise WaitingTasksError(WAITING_HINT.format(n=len(waiting), names=names))
