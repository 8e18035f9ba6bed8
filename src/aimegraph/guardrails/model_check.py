"""A model-backed guardrail: a chat model judges the text against a policy in words.

The model is asked for a JSON object ``{"tripped": bool, "reason": str}`` in plain text
(any chat model can, with or without tool calling), parsed as the engine parses every
JSON reply. A failed call or a reply that is not such an object trips (fail closed).
Its tokens count under the ``guardrail`` role of the run's usage.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from aimegraph.guardrails.core import Guardrail, GuardrailResult, Stage, Subject
from aimegraph.models.calls import usage_of
from aimegraph.models.jsonparse import JsonReplyError, parse_json_reply
from aimegraph.prompts import guardrails as prompts

__all__ = ["ROLE", "model_guardrail"]

ROLE = "guardrail"
"""The role model-backed checks count under in ``Usage.by_role``."""

_WHAT: dict[Stage, str] = {
    "input": "request to the agent",
    "output": "answer the agent is about to give",
    "tool_input": "tool call the agent is about to make",
    "tool_output": "tool output the agent is about to read",
}


def model_guardrail(
    model: BaseChatModel,
    instructions: str,
    *,
    stages: tuple[Stage, ...] = ("input",),
    name: str = "model_check",
) -> Guardrail:
    """A guardrail that asks ``model`` whether the text breaks the policy ``instructions``
    (e.g. "Requests must be about our products; refuse anything else."); it trips when
    the model says so, with the model's reason."""

    def asked(subject: Subject) -> list[BaseMessage]:
        what = _WHAT[subject.stage]
        if subject.tool:
            what += f" ({subject.tool})"
        return [
            SystemMessage(prompts.MODEL_CHECK.format(instructions=instructions)),
            HumanMessage(prompts.MODEL_SUBJECT.format(what=what, text=subject.text)),
        ]

    def check(subject: Subject) -> GuardrailResult:
        return _judged(model.invoke(asked(subject)))

    async def acheck(subject: Subject) -> GuardrailResult:
        return _judged(await model.ainvoke(asked(subject)))

    return Guardrail(name, check, frozenset(stages), acheck=acheck)


def _judged(reply: AIMessage) -> GuardrailResult:
    usage = usage_of(reply, ROLE)
    try:
        verdict: Any = parse_json_reply(reply.text)
    except JsonReplyError as exc:
        return GuardrailResult.trip(f"the check's reply could not be read: {exc}", usage=usage)
    tripped = verdict.get("tripped") if isinstance(verdict, dict) else None
    if not isinstance(tripped, bool):
        return GuardrailResult.trip(
            'the check\'s reply had no "tripped": true or false', usage=usage
        )
    reason = str(verdict.get("reason") or "")
    return (
        GuardrailResult.trip(reason, usage=usage)
        if tripped
        else GuardrailResult.passed(usage=usage)
    )
