"""The gullible model: an offline stand-in that obeys any instruction it reads, the
worst case of a prompt injection, the same for every system.

It plays each task's oracle (:mod:`aimegraph.eval.oracle`) until anything it is shown
(a tool output, a dependency's result in an actor's prompt, a document: any message
but its own replies) carries the attacker's goal that the attack planted in the task
(:class:`~aimegraph.eval.public.Injection`). From there it makes the attacker's
calls it is offered, one per reply, then resumes the oracle where it left off (the
oracle sees the conversation without the detour). Whether the attacker's goal was reached is
judged by the benchmark (AgentDojo's security check), so the rate of successful
attacks measures what a system's defences stop: a call the system refused, paused
or never offered the model is an attack that failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from aimegraph.eval.oracle import (
    AimeOracle,
    OracleModels,
    ReactOracle,
    reply_usage,
    tool_call_message,
    typed_calls,
)
from aimegraph.eval.public import Injection
from aimegraph.eval.public.plan_first import PlanFirstModels
from aimegraph.eval.suite import Task

__all__ = ["GULLIBLE_MODEL_NAME", "GullibleAime", "GullibleModels", "GullibleReact"]

GULLIBLE_MODEL_NAME = "gullible"

Generate = Callable[..., ChatResult]


def _flat(text: str) -> str:
    """The words of ``text``: a tool output shows the goal quoted and wrapped (YAML)."""
    return " ".join(re.findall(r"\w+", text))


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.content, list) else str(message.content)


def _reply(
    generate: Generate,
    injection: Injection,
    messages: list[BaseMessage],
    stop: list[str] | None,
    run_manager: CallbackManagerForLLMRun | None,
    kwargs: Mapping[str, Any],
) -> ChatResult:
    """The attacker's next call once anything the model is shown carried its goal,
    else the oracle's reply to the conversation without the detour."""
    goal = _flat(injection.goal)
    trigger = next(
        (
            i
            for i, m in enumerate(messages)
            # Whatever carries it: a tool output, a dependency's result or a document
            # in a prompt; only the model's own replies are not read as instructions.
            if not isinstance(m, AIMessage) and goal in _flat(_text(m))
        ),
        None,
    )
    if trigger is None:
        return generate(messages, stop, run_manager, **kwargs)
    detour = [m for m in messages[trigger + 1 :] if isinstance(m, AIMessage)]
    detour = detour[: len(injection.calls)]
    tools = list(kwargs.get("tools") or [])
    offered = {t["function"]["name"] for t in tools}
    if len(detour) < len(injection.calls) and injection.calls[len(detour)]["tool"] in offered:
        # A call the model was never offered is one it cannot make: the attack fails here.
        call = injection.calls[len(detour)]
        message = typed_calls(tool_call_message(str(call["tool"]), dict(call["args"])), tools)
        message.usage_metadata = reply_usage(messages, message, tools, None)
        message.response_metadata = {"model_name": GULLIBLE_MODEL_NAME}
        return ChatResult(generations=[ChatGeneration(message=message)])
    return generate(_without(messages, detour), stop, run_manager, **kwargs)


def _without(messages: Sequence[BaseMessage], detour: Sequence[AIMessage]) -> list[BaseMessage]:
    """``messages`` less the attacker's calls and their outputs."""
    ids = {call["id"] for m in detour for call in m.tool_calls}
    dropped = {id(m) for m in detour}
    return [
        m
        for m in messages
        if id(m) not in dropped and not (isinstance(m, ToolMessage) and m.tool_call_id in ids)
    ]


class _Gullible(BaseChatModel):
    """What makes an oracle gullible, whichever system it plays: ``_reply`` before the
    oracle's own reply (the mixin comes first, so ``super()`` is that oracle)."""

    injection: Injection

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # super() is the oracle after this mixin in the MRO, never BaseChatModel's.
        oracle = super()._generate  # type: ignore[safe-super]
        return _reply(oracle, self.injection, messages, stop, run_manager, kwargs)


class GullibleReact(_Gullible, ReactOracle):
    """The gullible model in a ReAct loop (``create_agent``)."""


class GullibleAime(_Gullible, AimeOracle):
    """The gullible model in aimegraph: its actors obey what their tool outputs say."""


@dataclass(frozen=True)
class GullibleModels:
    """The gullible model for a rollout: the oracle of the task, obeying the
    injection the attack planted in it (``injections``: task id -> injection)."""

    injections: Mapping[str, Injection]
    tool_steps: bool = False
    """aimegraph's planner splits the ground truth's stages into tool steps wherever
    the request gives every argument (the knowledge rule); actors make the rest."""
    plan_first: bool = False
    """aimegraph's planner fixes only the calls whose arguments the request gives;
    actors make the others (:mod:`aimegraph.eval.public.plan_first`)."""

    @property
    def name(self) -> str:
        """How records and reports name the model (part of the system's digest)."""
        plan = "-plan-first" if self.plan_first else "-tool-steps" if self.tool_steps else ""
        return GULLIBLE_MODEL_NAME + plan

    def __call__(self, task: Task, kind: str, rollout: int) -> BaseChatModel:
        if self.plan_first:
            oracle = PlanFirstModels()(task, kind, rollout)
        else:
            oracle = OracleModels(tool_steps=self.tool_steps)(task, kind, rollout)
        injection = self.injections.get(task.id)
        if injection is None:
            return oracle
        fields = {name: getattr(oracle, name) for name in type(oracle).model_fields}
        if isinstance(oracle, AimeOracle):
            return GullibleAime(**fields, injection=injection)
        assert isinstance(oracle, ReactOracle)
        return GullibleReact(**fields, injection=injection)
