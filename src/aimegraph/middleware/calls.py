"""A role's model call through its middleware, as steps (:mod:`aimegraph.models.steps`):
the ``before_model`` hooks, the model call inside the ``wrap_model_call`` hooks, the
``after_model`` hooks. Each hook and the wrapped call is yielded like a model call, so
it runs with ``invoke`` under ``graph.invoke`` and is awaited under ``graph.ainvoke``.

Hooks see the role's state with ``messages`` as ``create_agent`` shows them: the
conversation without the system prompt, which is the request's ``system_message``.
What they return is applied as ``create_agent``'s graph applies it: ``messages``
through ``add_messages`` (``RemoveMessage`` included), the other keys set, and a
``jump_to`` ends the hooks there and is handed to the role to act on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import run_in_executor
from langgraph._internal._runnable import RunnableCallable
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime

from aimegraph.middleware.stack import MiddlewareStack
from aimegraph.models.steps import CallWrapper, ModelCall, Steps

__all__ = [
    "HookFailed",
    "HookOutcome",
    "ModelCallInput",
    "call_wrapper",
    "run_hooks",
    "split_system",
    "wrapped_model_call",
]


def split_system(messages: Sequence[AnyMessage]) -> tuple[SystemMessage | None, list[AnyMessage]]:
    """The system prompt (a conversation's first message) and the messages after it."""
    if messages and isinstance(messages[0], SystemMessage):
        return messages[0], list(messages[1:])
    return None, list(messages)


def with_system(request: ModelRequest[Any]) -> list[AnyMessage]:
    """A request's messages as the model gets them: its system message first."""
    system = [request.system_message] if request.system_message is not None else []
    return [*system, *request.messages]


@dataclass
class ModelCallInput:
    """What the wrapped model call runs: the request the hooks get, how to call a
    request's model with its tools, and how to read its reply."""

    request: ModelRequest[Any]
    prepare: Callable[[ModelRequest[Any]], tuple[Runnable[Any, AIMessage], Any]]
    """The runnable for the request's model and tools, and its input."""
    read: Callable[[ModelRequest[Any], AIMessage], list[BaseMessage]]
    """The reply as the response's messages."""
    replies: list[AIMessage] = field(default_factory=list)
    """Every reply a model gave in this call (a hook may call the handler more than
    once): the usage to count."""


def wrapped_model_call(stack: MiddlewareStack) -> Runnable[ModelCallInput, ModelResponse[Any]]:
    """The model call inside ``stack``'s ``wrap_model_call`` hooks, run on a
    :class:`ModelCallInput`. Under ``ainvoke`` the async hooks are awaited; a stack
    with a hook that has no async twin runs its sync hooks in a worker thread."""
    sync, asynchronous = stack.model_wrapper, stack.amodel_wrapper
    assert sync is not None and asynchronous is not None, "a stack with wrap_model_call hooks"
    all_async = stack.async_model_wrappers

    def call(step: ModelCallInput, config: RunnableConfig) -> ModelResponse[Any]:
        def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
            runnable, value = step.prepare(request)
            reply = runnable.invoke(value, config)
            step.replies.append(reply)
            return ModelResponse(result=step.read(request, reply))

        response: ModelResponse[Any] = sync(step.request, handler)
        return response

    async def acall(step: ModelCallInput, config: RunnableConfig) -> ModelResponse[Any]:
        if not all_async:
            return await run_in_executor(config, call, step, config)

        async def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
            runnable, value = step.prepare(request)
            reply = await runnable.ainvoke(value, config)
            step.replies.append(reply)
            return ModelResponse(result=step.read(request, reply))

        response: ModelResponse[Any] = await asynchronous(step.request, handler)
        return response

    runnable: Runnable[ModelCallInput, ModelResponse[Any]] = RunnableCallable(
        call, acall, name="model", trace=False
    )
    return runnable


class HookFailed(Exception):
    """A hook raised: its middleware and the exception (its ``__cause__``)."""

    def __init__(self, hook: str, error: Exception) -> None:
        super().__init__(f"middleware {hook} failed: {type(error).__name__}: {error}")
        self.hook = hook


def call_wrapper(stack: MiddlewareStack) -> CallWrapper | None:
    """The planner's, reporter's or verifier's model calls inside ``stack``'s
    ``wrap_model_call`` hooks (None without any): the request has the role's model,
    its messages and system message, no tools (a structured reply's schema is bound
    to whichever model a hook picks), and ``state`` holding only the messages."""
    if stack.model_wrapper is None:
        return None
    wrapped = wrapped_model_call(stack) | RunnableLambda(_last_message, name="reply")

    def wrap(
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        bind: Callable[[BaseChatModel], Runnable[Any, Any]],
        runtime: Runtime[Any] | None,
    ) -> tuple[ModelCall, Callable[[], BaseChatModel]]:
        answered = [model]

        def prepare(request: ModelRequest[Any]) -> tuple[Runnable[Any, AIMessage], Any]:
            answered[0] = request.model
            return bind(request.model), with_system(request)

        system, conversation = split_system(cast(list[AnyMessage], list(messages)))
        request = ModelRequest(
            model=model,
            messages=conversation,
            system_message=system,
            state={"messages": conversation},
            runtime=runtime,
        )
        step = ModelCallInput(request, prepare, read=lambda _, reply: [reply])
        return (wrapped, step), lambda: answered[0]

    return wrap


def _last_message(response: ModelResponse[Any]) -> Any:
    return response.result[-1]


@dataclass
class HookOutcome:
    """The state as a role's hooks left it."""

    state: dict[str, Any]
    """The state the hooks saw last, ``messages`` without the system prompt."""
    changes: dict[str, Any] = field(default_factory=dict)
    """The keys the hooks set, ``messages`` aside."""
    rewrote: bool = False
    """Whether a hook returned ``messages``."""
    jump: str | None = None
    """Where a hook jumped (``end``, ``model`` or ``tools``), if one did."""
    by: str = ""
    """The hook that jumped."""

    @property
    def messages(self) -> list[AnyMessage]:
        messages: list[AnyMessage] = self.state["messages"]
        return messages


def run_hooks(
    hooks: Sequence[Runnable[Any, dict[str, Any] | None]], outcome: HookOutcome
) -> Steps[HookOutcome]:
    """Run ``hooks`` in order on ``outcome``'s state, each seeing what the ones before
    it returned, until one jumps.

    Raises:
        HookFailed: a hook raised (a pause for a human, ``GraphBubbleUp``, passes as it is).
    """
    for hook in hooks:
        try:
            update = yield hook, outcome.state
        except GraphBubbleUp:
            raise
        except Exception as exc:
            raise HookFailed(hook.get_name(), exc) from exc
        if not update:
            continue
        changes = dict(update)
        jump = changes.pop("jump_to", None)
        state = {**outcome.state, **changes}
        if "messages" in changes:
            state["messages"] = add_messages(outcome.state["messages"], changes.pop("messages"))
        outcome = HookOutcome(
            state,
            {**outcome.changes, **changes},
            outcome.rewrote or "messages" in update,
        )
        if jump is not None:
            outcome.jump, outcome.by = str(jump), hook.get_name().split(".")[0]
            return outcome
    return outcome
