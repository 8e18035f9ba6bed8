"""Code that calls models, written once and run both ways.

Such code is a generator that yields each call it needs as ``(runnable, input)``
and receives the reply (or the call's exception, thrown in). :func:`run_steps`
drives it with ``invoke``, :func:`arun_steps` with ``await ainvoke``, so the same
logic (a repair loop, a node body) never blocks an event loop on a model and
works with models that only implement one of the two APIs. Steps compose with
``yield from``; :mod:`aimegraph.nodes.dual` turns them into graph nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl, Runtime

ModelCall = tuple[Runnable[Any, Any], Any]
"""A call the steps yield: the runnable and its input."""

R = TypeVar("R")
Steps = Generator[ModelCall, Any, R]


def run_steps(
    steps: Steps[R], config: RunnableConfig | None = None, control: RunControl | None = None
) -> R:
    """Run ``steps`` to their result, each call made with ``invoke`` (with ``config``:
    e.g. the ``metadata`` its model runs carry into callbacks and token streams). Once
    ``control`` (the run's) is asked to drain, no further call starts: the steps are
    closed and ``GraphDrained`` raised (the node runs again on resume)."""
    try:
        call = next(steps)
        while True:
            runnable, value = call
            try:
                reply = runnable.invoke(value, config)
            except Exception as exc:  # noqa: BLE001 - the steps decide what a failure means
                call = steps.throw(exc)
            else:
                call = steps.send(reply)
            _stop_if_drained(steps, control)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def arun_steps(
    steps: Steps[R], config: RunnableConfig | None = None, control: RunControl | None = None
) -> R:
    """Run ``steps`` to their result, each call awaited with ``ainvoke`` (with ``config``
    and ``control`` as for :func:`run_steps`)."""
    try:
        call = next(steps)
        while True:
            runnable, value = call
            try:
                reply = await runnable.ainvoke(value, config)
            except Exception as exc:  # noqa: BLE001 - the steps decide what a failure means
                call = steps.throw(exc)
            else:
                call = steps.send(reply)
            _stop_if_drained(steps, control)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _stop_if_drained(steps: Steps[Any], control: RunControl | None) -> None:
    """Between two calls: raise ``GraphDrained`` if the run is asked to stop."""
    if control is not None and control.drain_requested:
        steps.close()
        raise GraphDrained(control.drain_reason or "shutdown")


class CallWrapper(Protocol):
    """Runs a role's model call inside its middleware's ``wrap_model_call`` hooks
    (:func:`aimegraph.middleware.calls.call_wrapper`): given the role's model, the
    messages and how to make the runnable for a model (a hook may pick another), the
    call to yield, and which model answered it."""

    def __call__(
        self,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        bind: Callable[[BaseChatModel], Runnable[Any, Any]],
        runtime: Runtime[Any] | None,
    ) -> tuple[ModelCall, Callable[[], BaseChatModel]]: ...


def model_call(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    bind: Callable[[BaseChatModel], Runnable[Any, Any]],
    *,
    wrap: CallWrapper | None,
    runtime: Runtime[Any] | None = None,
) -> tuple[ModelCall, Callable[[], BaseChatModel]]:
    """The call to yield for ``bind(model)`` on ``messages`` (inside ``wrap``'s hooks
    when there are some), and which model answered it once it has."""
    if wrap is None:
        return (bind(model), messages), lambda: model
    return wrap(model, messages, bind, runtime)
