"""Scripted "oracle" models that solve suite tasks with the real tools, offline.

A task's ``oracle`` (:class:`~aimegraph.eval.suite.Oracle`) is written once, as
stages of tool calls and an answer; this module plays it for each kind of system:

- :class:`ReactOracle` for a ReAct loop (``create_agent``): the stages' calls one
  after the other, one per reply, then the answer (or, for a typed answer, a call
  of the answer's tool, as ``create_agent``'s ``ToolStrategy`` binds it);
- :class:`AimeOracle` for aimegraph: a plan with one task per stage (dependencies
  from ``after``): a tool step for a stage that is one call with arguments known in
  advance, else an actor making its stage's calls and ending its task as a real model
  could (:func:`stage_steps`); then the reporter's answer (the scripted model of
  :mod:`aimegraph.models.offline.scripted`). An actor's task names the bundles a planner
  could name from the suite task's own text (:func:`planned_bundles`), or every
  bundle the ReAct loop's tools come from (``every_bundle``).

Both make the same tool calls; every figure in an answer is the output of a tool
run at rollout time. Both count tokens the same way: LangChain's
``count_tokens_approximately`` over the prompt (with the bound tool schemas, as
providers count them) and the reply, or a fixed count per call (``usage=``) so
tests can check token and cost figures exactly. ``solve=False`` makes the same
calls and then answers that it could not solve the task.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult

from aimegraph.eval.suite import OracleStage, OracleTurn, Task
from aimegraph.models.offline.scripted import Scenario, ScriptedChatModel, ToolSchemaChatModel

__all__ = [
    "ORACLE_MODEL_NAME",
    "AimeOracle",
    "OracleError",
    "OracleModels",
    "ReactOracle",
    "UNSOLVED_ANSWER",
    "aime_scenario",
    "planned_bundles",
    "reply_usage",
    "tool_call_message",
    "typed_calls",
]

ORACLE_MODEL_NAME = "oracle"
"""The model name oracle replies carry (the key of a price table)."""

UNSOLVED_ANSWER = "I could not solve this task."

_STAGE = re.compile(r"\{stage:([\w.-]+)\}")
_LAST = "{last_tool_output}"

_BUNDLE_OF_TOOL = {
    "read_file": "files",
    "write_file": "files",
    "append_file": "files",
    "list_dir": "files",
    "calculator": "compute",
    "python": "compute",
}
"""The built-in bundle of each built-in tool; any other tool is the application's
(the ``custom`` bundle)."""

_WRITES = frozenset({"write_file", "append_file"})
"""Tools whose caller knows what they did before they answer: it chose what to write."""


class OracleError(ValueError):
    """A task has no oracle replies, or they do not fit the conversation."""


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

    The turn is the number of human messages so far; the step within it, the number
    of replies since the last one, so replies are a function of the conversation.
    """

    turns: list[OracleTurn]
    answer_tool: str | None = None
    solve: bool = True
    usage: UsageMetadata | None = None

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
        turn = self.turns[min(len(humans), len(self.turns)) - 1]
        since = messages[humans[-1] + 1 :]
        step = sum(isinstance(m, AIMessage) for m in since)
        outputs = [_text(m) for m in since if isinstance(m, ToolMessage)]
        calls = [(stage, call) for stage in turn.stages for call in stage.calls]
        results = _stage_results(turn, outputs)
        if step < len(calls):
            stage, call = calls[step]
            mine = [i for i, (s, _) in enumerate(calls[:step]) if s.id == stage.id]
            last = outputs[mine[-1]] if mine and mine[-1] < len(outputs) else ""
            args = _fill(call.get("args") or {}, last, results)
            message = tool_call_message(str(call["tool"]), args)
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
            return tool_call_message(self.answer_tool, _fill(turn.structured, "", results))
        return AIMessage(content=_fill(turn.answer or "", "", results))


def _stage_results(turn: OracleTurn, outputs: list[str]) -> dict[str, str]:
    """Each finished stage's result, from the tool outputs of the turn so far (the
    i-th output answers the i-th call)."""
    results: dict[str, str] = {}
    position = 0
    for stage in turn.stages:
        end = position + len(stage.calls)
        if end > len(outputs):
            break
        last = outputs[end - 1] if stage.calls else ""
        results[stage.id] = _fill(stage.result, last, results).strip()
        position = end
    return results


def _fill(value: Any, last_output: str, results: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        text = value.replace(_LAST, last_output)
        return _STAGE.sub(lambda m: results.get(m.group(1), m.group(0)), text)
    if isinstance(value, list):
        return [_fill(v, last_output, results) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, last_output, results) for k, v in value.items()}
    return value


def tool_call_message(name: str, args: dict[str, Any]) -> AIMessage:
    call = {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
    return AIMessage(content="", tool_calls=[call])


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.content, list) else str(message.content)


def _actor_text(value: Any) -> Any:
    """Oracle strings as the scripted actor fills them: a stage's result is the
    result of that dependency."""
    return _rename(value, "dep")


def _rename(value: Any, placeholder: str) -> Any:
    if isinstance(value, str):
        return _STAGE.sub(lambda m: f"{{{placeholder}:{m.group(1)}}}", value)
    if isinstance(value, list):
        return [_rename(v, placeholder) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, placeholder) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class _Planning:
    """How the oracle's planner writes its tasks."""

    tool_steps: bool = False
    """Split a multi-call stage into tool steps where every argument is known."""
    actors_only: bool = False
    """No tool steps at all: every stage is an actor's task."""
    every_bundle: bool = False
    """Every actor task names every bundle the ReAct loop's tools come from."""


def planned_bundles(task: Task) -> list[str]:
    """The bundles a planner names for the actors of ``task``: those the suite task
    needs as a whole, which its text says (the files to read or write, the figures to
    compute); the planner cannot know from the text alone which stage makes which
    call, so every actor of the task gets them all."""
    assert task.oracle is not None
    tools = {str(c["tool"]) for t in task.oracle.turns for s in t.stages for c in s.calls}
    return sorted({_BUNDLE_OF_TOOL.get(tool, "custom") for tool in tools})


def _task_spec(
    turn: OracleTurn, index: int, stage: OracleStage, bundles: list[str], planning: _Planning
) -> dict[str, Any]:
    """The planner's task for a stage: a tool step when a model could write it as
    one (:func:`_known_call`), else an actor's task with ``bundles`` (the stage's own
    ``bundles`` when the oracle names them)."""
    task = {
        "id": stage.id,
        "title": stage.title,
        "description": stage.title,
        "dependencies": turn.dependencies(stage, index),
    }
    known = None if planning.actors_only else _known_call(turn, stage)
    if known is not None:
        return task | {"call": known}
    return task | {"tool_bundles": bundles if planning.every_bundle else stage.bundles or bundles}


def _known_call(turn: OracleTurn, stage: OracleStage) -> dict[str, Any] | None:
    """The stage as a tool step (``TaskSpec.call``), when the planner knows it in
    advance: one call whose arguments use no tool output, whose output is the
    stage's result (or whose result nothing uses). A ``$`` in them is written ``$$``
    (a tool step's references)."""
    used = f"{{stage:{stage.id}}}" in json.dumps(turn.model_dump())
    if len(stage.calls) != 1 or (used and stage.result.strip() != _LAST):
        return None
    call = stage.calls[0]
    args = call.get("args") or {}
    if _LAST in json.dumps(args) or _STAGE.search(json.dumps(args)):
        return None
    return {"tool": call["tool"], "args": _dollars_escaped(args)}


def _dollars_escaped(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [_dollars_escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: _dollars_escaped(v) for k, v in value.items()}
    return value


def stage_steps(stage: OracleStage) -> list[dict[str, Any]]:
    """An actor's replies for ``stage``: its calls, one per reply, the task ending in
    the reply that does the last work where a real model could end it there. A result
    that is the last output itself is ``submit_result`` beside the last call with an
    empty summary (the output is handed back); one the caller knows before the call
    answers (what a file write did) is submitted beside it; one that needs the output
    (a summary of what was read or run) is a plain answer once the output is in."""
    calls = [
        {"tool": call["tool"], "args": _actor_text(call.get("args") or {})} for call in stage.calls
    ]
    result = _actor_text(stage.result)
    if not calls:
        return [_submit(result)]
    *work, last = calls
    if result == _LAST:
        return [*work, {"calls": [last, _submit("")]}]
    if _LAST not in result and last["tool"] in _WRITES:
        return [*work, {"calls": [last, _submit(result)]}]
    return [*calls, {"text": result}]


def _submit(summary: str) -> dict[str, Any]:
    return {"tool": "submit_result", "args": {"status": "completed", "summary": summary}}


def _tool_steps(turn: OracleTurn, index: int, stage: OracleStage) -> list[dict[str, Any]] | None:
    """``stage`` as tool steps: one planned task per call, its arguments fixed in the
    plan, so no actor reads a tool's output. ``None`` when that cannot play the stage:
    no calls, a call that reads earlier outputs, a result other than the last output."""
    uses_outputs = any(_LAST in t or _STAGE.search(t) for t in _strings_in(stage.calls))
    if not stage.calls or uses_outputs or stage.result != _LAST:
        return None
    # The last call's task carries the stage's id: later stages and the answer read it.
    ids = [f"{stage.id}-call{n}" for n in range(1, len(stage.calls))] + [stage.id]
    return [
        {
            "id": task_id,
            "title": f"{stage.title}: {call['tool']}",
            "description": stage.title,
            "dependencies": turn.dependencies(stage, index) if n == 0 else [ids[n - 1]],
            "call": {"tool": call["tool"], "args": _dollars_escaped(call.get("args") or {})},
        }
        for n, (task_id, call) in enumerate(zip(ids, stage.calls, strict=True))
    ]


def _strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _strings_in(v)]
    if isinstance(value, list):
        return [t for v in value for t in _strings_in(v)]
    return []


def aime_scenario(
    task: Task,
    *,
    solve: bool = True,
    tool_steps: bool = False,
    actors_only: bool = False,
    every_bundle: bool = False,
) -> dict[str, Any]:
    """The scripted-model scenario that plays ``task``'s oracle in aimegraph: per
    turn a plan (a task per stage), the actors' calls and results, the reporter's
    answer (the typed object for a typed answer). With ``tool_steps`` the plan fixes
    every call whose arguments the oracle gives outright as a tool step (no actor);
    with ``actors_only`` no stage is a tool step; with ``every_bundle`` every actor
    task names the bundles of every tool the ReAct loop is bound."""
    if task.oracle is None:
        raise OracleError(f"task {task.id!r} has no oracle replies")
    planning = _Planning(tool_steps and not actors_only, actors_only, every_bundle)
    bundles = planned_bundles(task)
    if every_bundle:  # the loop's tools: the built-in work tools and the application's
        bundles = sorted({*_BUNDLE_OF_TOOL.values(), *bundles})
    planner, actors, reporter = [], {}, []
    for turn in task.oracle.turns:
        specs: list[dict[str, Any]] = []
        for index, stage in enumerate(turn.stages):
            steps = _tool_steps(turn, index, stage) if planning.tool_steps else None
            if steps is not None:
                specs += steps
                continue
            specs.append(_task_spec(turn, index, stage, bundles, planning))
            actors[stage.id] = stage_steps(stage)
        planner.append({"rationale": "One task per stage of the work.", "tasks": specs})
        if not solve:
            reporter.append({"text": UNSOLVED_ANSWER})
        elif turn.structured is not None and task.answer_schema is not None:
            # A call of the answer's tool, as native structured output binds it: an
            # entry that is the object itself would be read as a step when a field
            # is named like one (error, text, tool).
            answer = _rename(turn.structured, "result")
            reporter.append({"tool": task.answer_schema["title"], "args": answer})
        else:
            reporter.append({"text": _rename(turn.answer or "", "result")})
    return {
        "name": f"oracle-{task.id}",
        "goal": task.goals[0],
        # Its turns are played in order in one process, whatever the later goals say.
        "any_goal": True,
        "planner": planner,
        "actors": actors,
        "reporter": reporter,
    }


class AimeOracle(ScriptedChatModel):
    """The scripted model playing an oracle in aimegraph, counting tokens as
    :class:`ReactOracle` does and typing structured replies by their schema."""

    usage: UsageMetadata | None = None

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
        message = typed_calls(message, tools)
        message.usage_metadata = reply_usage(messages, message, tools, self.usage)
        message.response_metadata = {"model_name": ORACLE_MODEL_NAME}
        return ChatResult(generations=[ChatGeneration(message=message)])


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
            return AimeOracle(scenario=scenario, usage=self.usage)
        if kind == "create_agent":
            schema = task.answer_schema
            return ReactOracle(
                turns=list(task.oracle.turns),
                answer_tool=str(schema["title"]) if schema is not None else None,
                solve=solve,
                usage=self.usage,
            )
        raise OracleError(f"no oracle replies for {kind} systems (only aimegraph, create_agent)")
