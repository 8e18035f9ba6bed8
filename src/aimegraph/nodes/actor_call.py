"""The actor's model call: its conversation sent to its model with its tools bound
(natively, or described for JSON replies), through the ``wrap_model_call`` hooks of
its middleware when it has some, its reply read as messages (:mod:`aimegraph.nodes.replies`)
and counted as usage."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from langchain.agents.middleware import ModelRequest
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.middleware import MiddlewareStack
from aimegraph.middleware.calls import (
    ModelCallInput,
    split_system,
    with_system,
    wrapped_model_call,
)
from aimegraph.models.calls import (
    reraise_if_retryable,
    resolve_mode,
    usage_of,
    with_json_instructions,
)
from aimegraph.models.json_tools import describe_tools, json_step_model, plain_conversation
from aimegraph.models.steps import ModelCall, Steps
from aimegraph.nodes.actor_factory import ALWAYS_BOUND
from aimegraph.nodes.replies import reply_messages
from aimegraph.prompts import json_mode
from aimegraph.state import ActorState, Usage
from aimegraph.tools.progress import REPORT_NAMES

__all__ = ["make_actor_call"]


def make_actor_call(
    model: BaseChatModel,
    tools: Mapping[str, BaseTool],
    config: AimeConfig,
    middleware: MiddlewareStack,
) -> Callable[[ActorState, Runtime[Any]], Steps[dict[str, Any]]]:
    """The steps of one model call of an actor: ``{"messages", "usage"}`` (the reply
    as messages, and every reply's usage: a hook may call the model more than once),
    or ``{"error"}`` when the call failed (a retryable failure is raised for the
    node's retry policy). The ``wrap_model_call`` hooks get the task's tools as the
    request's ``tools``; the actor's reports are bound after whatever they choose."""
    # Converting tool schemas costs more than a fast model's reply: once per model and
    # tool set (a middleware may pick another model, or fewer tools).
    bound_models: dict[tuple[int, tuple[str, ...]], Runnable[LanguageModelInput, AIMessage]] = {}
    json_models: dict[
        tuple[int, tuple[str, ...], str], Runnable[LanguageModelInput, AIMessage]
    ] = {}
    wrapped = wrapped_model_call(middleware) if middleware.model_wrapper else None

    def prepared(
        chat: BaseChatModel, bound: Sequence[Any], messages: Sequence[AnyMessage], cfg: AimeConfig
    ) -> ModelCall:
        names = tuple(t.name for t in bound)
        if resolve_mode(cfg.tool_calling, chat) == "native":
            if (id(chat), names) not in bound_models:
                bound_models[id(chat), names] = chat.bind_tools(bound)
            return bound_models[id(chat), names], messages
        key = (id(chat), names, cfg.server_schema)
        if key not in json_models:
            json_models[key] = json_step_model(chat, bound, cfg.server_schema)
        prompt = with_json_instructions(
            messages, json_mode.TOOLS.format(tools=describe_tools(bound))
        )
        return json_models[key], plain_conversation(prompt)

    def ask(state: ActorState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        """The model's reply as messages and usage (``error`` when the call failed)."""
        cfg = config.for_run(runtime)
        given = [tools[n] for n in state.get("tool_names", []) if n in tools]
        bound = [*given, *ALWAYS_BOUND]

        def read(chat: BaseChatModel, tools_given: Sequence[Any], reply: AIMessage) -> list[Any]:
            mode = resolve_mode(cfg.tool_calling, chat)
            return reply_messages(reply, [t.name for t in tools_given], mode)

        try:
            if wrapped is None:
                reply = yield prepared(model, bound, state["messages"], cfg)
                replies, messages = [reply], read(model, bound, reply)
            else:
                system, conversation = split_system(state["messages"])
                call = ModelCallInput(
                    ModelRequest(
                        model=model,
                        messages=conversation,
                        system_message=system,
                        tools=list(given),
                        state=cast(Any, state),
                        runtime=runtime,
                    ),
                    prepare=lambda r: prepared(
                        r.model, _with_reports(r.tools), with_system(r), cfg
                    ),
                    read=lambda r, reply: read(r.model, _with_reports(r.tools), reply),
                )
                response = yield wrapped, call
                replies, messages = call.replies, list(response.result)
        except Exception as exc:  # noqa: BLE001 - a model failure fails the task, as data
            reraise_if_retryable(exc, runtime)
            return {"error": f"model call failed: {type(exc).__name__}: {exc}"}
        calls = sum(
            c["name"] not in REPORT_NAMES
            for m in messages
            if isinstance(m, AIMessage)
            for c in m.tool_calls
        )
        usage = sum(
            (
                usage_of(r, "actor", cfg.prices, tool_calls=calls if r is replies[-1] else 0)
                for r in replies
            ),
            Usage(),
        )
        return {"messages": messages, "usage": usage}

    return ask


def _with_reports(tools: Sequence[Any]) -> list[Any]:
    """A request's tools as they are bound: the actor's reports (``update_progress``,
    ``submit_result``) after them, always, whatever the hooks chose."""
    return [*tools, *(t for t in ALWAYS_BOUND if t not in tools)]
