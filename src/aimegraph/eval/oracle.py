"""Scripted "oracle" models that solve suite tasks with the real tools, offline.

A task's ``oracle`` (:class:`~aimegraph.eval.suite.Oracle`) is written once, as
stages of tool calls and an answer; :mod:`aimegraph.eval.oracle_plays` says how each
kind of system plays it, and this module holds the models that do:

- :class:`ReactOracle` for a ReAct loop (``create_agent``): each reply makes the next
  call of every stage whose dependencies are done (:func:`react_turns`), then the
  answer (or, for a typed answer, a call of the answer's tool, as ``create_agent``'s
  ``ToolStrategy`` binds it);
- :class:`AimeOracle` for aimegraph: the scripted model playing
  :func:`aime_scenario`'s plan, actors and answer.

Both obey the knowledge rule (:mod:`aimegraph.eval.knowledge`): a call whose literals
the prompt it answers does not show (and no ``derived`` note allows) is refused with
an :class:`OracleError`, so a figure never rests on what a real model could not know.
Both make the same tool calls; every figure in an answer is the output of a tool run
at rollout time. Both count tokens the same way: LangChain's
``count_tokens_approximately`` over the prompt (with the bound tool schemas, as
providers count them) and the reply, or a fixed count per call (``usage=``) so tests
can check token and cost figures exactly. ``solve=False`` makes the same calls and
then answers that it could not solve the task.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from aimegraph.eval.knowledge import unseen_literals
from aimegraph.eval.oracle_plays import (
    UNSOLVED_ANSWER,
    OracleError,
    aime_scenario,
    call_notes,
    fill,
    planned_bundles,
    react_turns,
    stage_steps,
)
from aimegraph.eval.suite import OracleTurn, Task
from aimegraph.models.offline.scripted import Scenario, ScriptedChatModel, ToolSchemaChatModel

__all__ = [
    "ORACLE_MODEL_NAME",
    "AimeOracle",
    "OracleError",
    "OracleModels",
    "ReactOracle",
    "UNSOLVED_ANSWER",
    "aime_scenario",
    "knowledge_breaches",
    "planned_bundles",
    "refuse_unseen",
    "reply_usage",
    "stage_steps",
    "tool_call_message",
    "typed_calls",
]

ORACLE_MODEL_NAME = "oracle"
"""The model name oracle replies carry (the key of a price table)."""


def reply_usage(
    messages: list[BaseMessage],
    reply: AIMessage,
    tools: list[dict[str, Any]],
    fixed: UsageMetadata | None,
) -> UsageMetadata:
    if fixed is not None:
        return fixed
    prompt = count_tokens_approximately(messages, tools=list(tools) or None)
    answer = count_tokens_approximately([reply])
    return UsageMetadata(input_tokens=prompt, output_tokens=answer, total_tokens=prompt + answer)


def _coerced(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` (filled in from text) as ``schema`` types it: numbers, booleans,
    lists and objects written as text are parsed."""
    kind = schema.get("type")
    if isinstance(value, str) and kind in ("number", "integer", "boolean", "array", "object"):
        try:
            value = json.loads(value.strip())
        except ValueError:
            return value
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties") or {}
        return {k: _coerced(v, props.get(k) or {}) for k, v in value.items()}
    if kind == "array" and isinstance(value, list):
        items = schema.get("items") or {}
        return [_coerced(v, items) for v in value]
    return value


def typed_calls(message: AIMessage, tools: list[dict[str, Any]]) -> AIMessage:
    """``message`` with each tool call's arguments typed by the bound tool's schema."""
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    if not message.tool_calls:
        return message
    calls = [
        {**call, "args": _coerced(call["args"], {"type": "object", **schemas[call["name"]]})}
        if call["name"] in schemas
        else call
        for call in message.tool_calls
    ]
    return message.model_copy(update={"tool_calls": calls})


class ReactOracle(ToolSchemaChatModel):
    """Plays a task's oracle in a ReAct loop (see the module docstring).

    The turn is the number of human messages so far; the reply within it, the number
    of replies since the last one, so replies are a function of the conversation.
    """

    turns: list[OracleTurn]
    answer_tool: str | None = None
    solve: bool = True
    usage: UsageMetadata | None = None
    knowledge_breaches: list[str] = Field(default_factory=list)
    refuse_breaches: bool = True

    @property
    def _llm_type(self) -> str:
        return "aimegraph-react-oracle"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = list(kwargs.get("tools") or [])
        humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        if not humans:
            raise OracleError("the conversation has no request")
        number = min(len(humans), len(self.turns)) - 1
        turn = self.turns[number]
        since = messages[humans[-1] + 1 :]
        step = sum(isinstance(m, AIMessage) for m in since)
        replies = react_turns(self.turns)[number]
        made = [(stage.id, n) for reply in replies[:step] for stage, n in reply]
        # One output per call made; a loop stopped mid-reply may have fewer.
        said = (_text(m) for m in since if isinstance(m, ToolMessage))
        outputs = dict(zip(made, said, strict=False))
        results = _stage_results(turn, outputs)
        if step < len(replies):
            calls = []
            for stage, index in replies[step]:
                call = stage.calls[index]
                last = outputs.get((stage.id, index - 1), "") if index else ""
                args = fill(call.get("args") or {}, last, results)
                refuse_unseen(self, str(call["tool"]), args, messages, call_notes(call))
                calls.append((str(call["tool"]), args))
            message = tool_calls_message(calls)
        else:
            message = self._answer(turn, results)
        message = typed_calls(message, tools)
        message.usage_metadata = reply_usage(messages, message, tools, self.usage)
        message.response_metadata = {"model_name": ORACLE_MODEL_NAME}
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _answer(self, turn: OracleTurn, results: Mapping[str, str]) -> AIMessage:
        if not self.solve:
            return AIMessage(content=UNSOLVED_ANSWER)
        if turn.structured is not None and self.answer_tool is not None:
            return tool_call_message(self.answer_tool, fill(turn.structured, "", results))
        return AIMessage(content=fill(turn.answer or "", "", results))


def _stage_results(turn: OracleTurn, outputs: Mapping[tuple[str, int], str]) -> dict[str, str]:
    """Each finished stage's result, from the outputs of its calls so far (by stage id
    and the index of the call in the stage)."""
    results: dict[str, str] = {}
    for stage in turn.stages:
        if any((stage.id, n) not in outputs for n in range(len(stage.calls))):
            continue
        last = outputs[(stage.id, len(stage.calls) - 1)] if stage.calls else ""
        results[stage.id] = fill(stage.result, last, results).strip()
    return results


def refuse_unseen(
    model: BaseChatModel,
    tool: str,
    args: Mapping[str, Any],
    messages: Sequence[BaseMessage],
    derived: Mapping[str, str],
) -> None:
    """The run-time check of the knowledge rule: an :class:`OracleError` naming the
    literals of the call that its prompt ``messages`` does not show. The breach is
    also kept on ``model`` (:func:`knowledge_breach`): a system that turns a model's
    error into data, and asks again with the error in the prompt, must not pass it."""
    missing = unseen_literals(tool, args, messages, derived)
    if missing:
        shown = "; ".join(literal.describe() for literal in missing)
        breach = (
            f"knowledge rule: the oracle's {tool} call uses what its prompt does not show: "
            f"{shown}. Add the read that would show it before this call, or note how the "
            "caller derives it (derived: {LITERAL: HOW} on the call)"
        )
        breaches = getattr(model, "knowledge_breaches", None)
        if isinstance(breaches, list):
            breaches.append(breach)
        if getattr(model, "refuse_breaches", True):
            raise OracleError(breach)


def knowledge_breaches(model: BaseChatModel) -> tuple[list[str], bool]:
    """The knowledge-rule breaches of an oracle ``model`` in its rollout, and whether
    they fail it (else they are only counted); none for any other model."""
    breaches = getattr(model, "knowledge_breaches", None)
    return list(breaches or ()), bool(getattr(model, "refuse_breaches", True))


def tool_call_message(name: str, args: dict[str, Any]) -> AIMessage:
    return tool_calls_message([(name, args)])


def tool_calls_message(calls: Sequence[tuple[str, dict[str, Any]]]) -> AIMessage:
    """A reply making ``calls`` (name, arguments) together."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
            for name, args in calls
        ],
    )


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.content, list) else str(message.content)


class AimeOracle(ScriptedChatModel):
    """The scripted model playing an oracle in aimegraph, counting tokens as
    :class:`ReactOracle` does and typing structured replies by their schema.

    Each call of one of ``checked_tools`` it makes, as an actor or as a tool step of
    its plan, obeys the knowledge rule against the prompt it answers; ``derived``
    holds the notes of every call of the task (a scripted reply does not say which
    oracle call it plays)."""

    usage: UsageMetadata | None = None
    checked_tools: frozenset[str] = frozenset()
    derived: dict[str, str] = Field(default_factory=dict)
    knowledge_breaches: list[str] = Field(default_factory=list)
    refuse_breaches: bool = True

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        tools = list(kwargs.get("tools") or [])
        message = result.generations[0].message
        assert isinstance(message, AIMessage)
        for tool, args in self._work_calls(message):
            refuse_unseen(self, tool, args, messages, self.derived)
        message = typed_calls(message, tools)
        message.usage_metadata = reply_usage(messages, message, tools, self.usage)
        message.response_metadata = {"model_name": ORACLE_MODEL_NAME}
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _work_calls(self, message: AIMessage) -> list[tuple[str, dict[str, Any]]]:
        """The reply's calls of the task's tools: an actor's, or its plan's tool steps
        (their ``$$`` written back as the ``$`` the tool is given)."""
        found: list[tuple[str, dict[str, Any]]] = []
        for call in message.tool_calls:
            if call["name"] in self.checked_tools:
                found.append((call["name"], call["args"]))
            for task in call["args"].get("tasks") or ():
                step = task.get("call") if isinstance(task, Mapping) else None
                if step and step.get("tool") in self.checked_tools:
                    args = json.loads(json.dumps(step.get("args") or {}).replace("$$", "$"))
                    found.append((str(step["tool"]), args))
        return found


def _task_notes(task: Task) -> dict[str, str]:
    assert task.oracle is not None
    calls = [c for turn in task.oracle.turns for stage in turn.stages for c in stage.calls]
    return {k: v for call in calls for k, v in call_notes(call).items()}


def _task_tools(task: Task) -> frozenset[str]:
    assert task.oracle is not None
    turns = task.oracle.turns
    return frozenset(str(c["tool"]) for t in turns for s in t.stages for c in s.calls)


@dataclass(frozen=True)
class OracleModels:
    """The oracle model for a rollout: ``OracleModels()(task, kind, rollout)``.

    ``solve(task_id, rollout)`` says which rollouts answer right (default: all), so
    a test knows the expected pass rates; ``usage`` fixes the tokens of every call.
    """

    solve: Callable[[str, int], bool] = lambda task_id, rollout: True
    usage: UsageMetadata | None = None
    tool_steps: bool = False
    """aimegraph's planner fixes every call it can as a tool step (no actor)."""
    actors_only: bool = False
    """Tool steps off: aimegraph's planner gives every stage to an actor."""
    every_bundle: bool = False
    """Every aimegraph actor is bound the bundles of all the ReAct loop's tools."""
    name: str = ORACLE_MODEL_NAME
    """How records and reports name the model (part of the system's digest)."""

    def __call__(self, task: Task, kind: str, rollout: int) -> BaseChatModel:
        if task.oracle is None:
            raise OracleError(f"task {task.id!r} has no oracle replies")
        solve = self.solve(task.id, rollout)
        if kind == "aimegraph":
            played = aime_scenario(
                task,
                solve=solve,
                tool_steps=self.tool_steps,
                actors_only=self.actors_only,
                every_bundle=self.every_bundle,
            )
            scenario = Scenario.model_validate(played)
            return AimeOracle(
                scenario=scenario,
                usage=self.usage,
                checked_tools=_task_tools(task),
                derived=_task_notes(task),
                refuse_breaches=task.oracle.refuses_breaches,
            )
        if kind == "create_agent":
            schema = task.answer_schema
            return ReactOracle(
                turns=list(task.oracle.turns),
                answer_tool=str(schema["title"]) if schema is not None else None,
                solve=solve,
                usage=self.usage,
                refuse_breaches=task.oracle.refuses_breaches,
            )
        raise OracleError(f"no oracle replies for {kind} systems (only aimegraph, create_agent)")
