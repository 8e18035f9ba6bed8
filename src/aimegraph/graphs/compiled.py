"""The compiled aime graph: LangGraph's ``CompiledStateGraph`` with what a run of the
top-level graph needs besides.

- Each run holds a run scope (:class:`~aimegraph.running.scoped_graph.RunScopedGraph`: its
  MCP sessions and async tool calls, released when it ends).
- The run's settings go into every checkpoint's metadata, so any entry point that
  resumes the thread keeps its approvals, budgets and workspace.
- Ctrl-C in the main thread drains the run (LangGraph's ``RunControl``).
- An ``update_state`` never drops actors waiting on a human. Such an update makes a
  new super-step; while actors wait on an ``interrupt()`` (``ask_human``, tool
  approval), their tasks are pending ``Send`` packets of the current step, and
  LangGraph's new step does not carry them over: the actors would be dropped and the
  run left ``running`` with nothing next. So an update that leaves LangGraph to infer
  the writing node (no ``as_node``) is refused there, with the two ways that do what
  was meant.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from dataclasses import replace
from typing import Any, Self, cast

from langchain_core.runnables import RunnableConfig, ensure_config
from langgraph._internal._constants import CONFIG_KEY_TASK_ID
from langgraph.errors import InvalidUpdateError
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import RunControl
from langgraph.types import StateSnapshot, StateUpdate

from aimegraph.checkpoints.runs import SETTINGS_KEY, RunSettings
from aimegraph.config import AimeConfig
from aimegraph.running.drain import interrupted_by_ctrl_c
from aimegraph.running.scoped_graph import RunScopedGraph
from aimegraph.state import AimeInput, AimeOutput, AimeState

__all__ = ["AimeGraph", "WaitingTasksError"]

WAITING_HINT = (
    "update_state would drop the {n} task(s) waiting on a human ({names}): LangGraph starts "
    "a new step without them. To keep them waiting, send the update with the answer, "
    "graph.invoke(Command(resume=..., update={{...}}), config), or alone, "
    "graph.invoke(Command(update={{...}}), config); to replace the step and drop them, "
    "pass as_node explicitly."
)


class WaitingTasksError(InvalidUpdateError):
    """An ``update_state`` without ``as_node`` while tasks wait on an interrupt."""


class AimeGraph(RunScopedGraph[AimeState, AimeConfig, AimeInput, AimeOutput]):
    """What :func:`aimegraph.build_aime_graph` returns. Its ``stream`` and ``astream``
    (and so ``invoke`` and ``ainvoke``) do more when it is the top-level graph of a
    run (not a node or subgraph of another graph):

    - the run's settings (``run_settings``: the model spec, the ``AimeConfig`` with
      the run's ``context`` overrides applied, the tools' ``module:attr`` specs) go
      into every checkpoint's metadata, unless the caller's config carries its own
      (the CLI's and the dashboard's do), so any entry point that resumes the thread
      keeps its approvals, budgets and workspace;
    - driven from the main thread, Ctrl-C drains the run (LangGraph's
      ``RunControl.request_drain()``): the steps in flight finish and are saved,
      nothing new starts, and ``KeyboardInterrupt`` is raised once the run has
      stopped (or ended: a Ctrl-C in its last step is not lost); a second Ctrl-C
      raises it at once. The thread resumes from there
      (``graph.invoke(None, config)``). A program that handles SIGINT itself keeps
      its handler; pass ``control=RunControl()`` and call its ``request_drain()``
      from any thread to stop a run the same way (``GraphDrained`` is raised).

    Every run holds a run scope (see :class:`RunScopedGraph`), and ``update_state``
    refuses to drop actors that wait on an interrupt (module docstring).
    """

    def __init__(self, *, run_settings: RunSettings | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_settings = run_settings

    @classmethod
    def of(
        cls,
        graph: CompiledStateGraph[AimeState, AimeConfig, AimeInput, AimeOutput],
        *,
        run_settings: RunSettings | None = None,
        serde_types: Collection[tuple[str, ...]] = (),
    ) -> AimeGraph:
        """``graph`` (as ``StateGraph.compile`` made it) as an aime graph, whose
        checkpoint allow-list (applied in strict mode to a checkpointer lent at run
        time, as LangGraph Server's) has ``serde_types`` besides what ``compile()``
        found in the state schema."""
        # As Pregel.copy builds its copies: the constructor takes the attributes.
        attrs = {k: v for k, v in vars(graph).items() if k != "__orig_class__"}
        made = cls(run_settings=run_settings, **attrs)
        made._serde_allowlist = (graph._serde_allowlist or set()) | set(serde_types)
        return made

    def copy(self, update: dict[str, Any] | None = None) -> Self:
        made = super().copy(update)
        # The constructor Pregel.copy calls leaves the allow-list out (a copy would
        # then revive no record from a lent checkpointer in strict mode).
        made._serde_allowlist = self._serde_allowlist
        return made

    def stream(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        if _is_nested(config):
            yield from super().stream(input, config, **kwargs)
            return
        kwargs = self._resolved_context(kwargs)
        config = self._with_settings(config, kwargs.get("context"))
        control = kwargs.pop("control", None) or RunControl()
        with interrupted_by_ctrl_c(control):
            yield from super().stream(input, config, control=control, **kwargs)

    async def astream(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        if _is_nested(config):
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk
            return
        kwargs = self._resolved_context(kwargs)
        config = self._with_settings(config, kwargs.get("context"))
        control = kwargs.pop("control", None) or RunControl()
        with interrupted_by_ctrl_c(control):
            async for chunk in super().astream(input, config, control=control, **kwargs):
                yield chunk

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

    def _resolved_context(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with the run's ``context`` overrides replaced by the whole config
        they make, validated once here: nodes, subgraphs and tools all receive that
        object as ``runtime.context``, and ``AimeConfig.for_run`` returns it as is. A
        run without overrides gets the graph's own config, so a tool reads the run's
        settings (``ask_human``'s deadline) the same way in every run."""
        context = kwargs.get("context")
        if self.run_settings is None:
            return kwargs
        if context is None:
            return kwargs | {"context": self.run_settings.config}
        try:
            return kwargs | {"context": self.run_settings.config.override(context)}
        except ValueError:  # a bad override is the intake node's to report, as the run starts
            return kwargs

    def _with_settings(self, config: RunnableConfig | None, context: Any) -> RunnableConfig:
        """``config`` with the run's settings in its metadata (unless it has some)."""
        given: dict[str, Any] = dict(config or {})
        metadata = dict(given.get("metadata") or {})
        if self.run_settings is None or SETTINGS_KEY in metadata:
            return cast(RunnableConfig, given)
        settings = self.run_settings
        # A bad override is the intake node's to report, as the run starts.
        with contextlib.suppress(ValueError):
            settings = replace(settings, config=settings.config.override(context))
        return cast(RunnableConfig, given | {"metadata": metadata | settings.as_metadata()})


def _is_nested(config: RunnableConfig | None) -> bool:
    """Whether the call runs inside another graph's step (as its node or subgraph)."""
    return CONFIG_KEY_TASK_ID in ensure_config(config).get("configurable", {})


def _infers_node(supersteps: Sequence[Sequence[StateUpdate]]) -> bool:
    return any(update[1] is None for step in supersteps for update in step)


def _refuse_while_waiting(snapshot: StateSnapshot) -> None:
    waiting = [task.name for task in snapshot.tasks if task.interrupts]
    if waiting:
        names = ", ".join(sorted(set(waiting)))
        raise WaitingTasksError(WAITING_HINT.format(n=len(waiting), names=names))
