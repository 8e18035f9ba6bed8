"""The executor: the nodes of one task's ReAct loop.

The actor factory (:mod:`aimegraph.nodes.actor_factory`) assembles an ``ActorSpec`` for a
task from five parts (persona, tools, knowledge, environment, output format); the
loop then runs the actor
(``react`` <-> ``tools``) until it submits a result, answers without a tool
call, or hits its step cap. The step where that happens settles the task: the
``react`` step that got the result, the answer, the model failure or no steps
left. A reply that only reports (``update_progress``, ``submit_result``) is run
in its react step; only other tools take a tools step, each call a task of its
own (``Send``). A ``submit_result`` beside them waits for them: the next
``react`` runs it, with their outputs (see :mod:`aimegraph.tools.progress`), and
ends the loop without a model call. The tools step runs the calls as LangChain's
``create_agent`` runs them: a call paused for a human (tool approval,
``ask_human``) is resumed alone, and the reply's other calls, already run and
saved, never run again.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from aimegraph.config import AimeConfig
from aimegraph.models.calls import (
    Mode,
    reraise_if_retryable,
    resolve_mode,
    usage_of,
    with_json_instructions,
)
from aimegraph.models.json_tools import (
    describe_tools,
    json_step_model,
    parse_tool_calls,
    plain_conversation,
    tool_calls_in_text,
)
from aimegraph.models.jsonparse import JsonReplyError, check_degenerate
from aimegraph.models.reasoning import visible_text, without_think_text
from aimegraph.nodes.actor_factory import (  # noqa: F401 - the factory's names lived here: kept a release
    ALWAYS_BOUND,
    ActorFactory,
    ActorSpec,
    DefaultActorFactory,
    artifact_lines,
    task_message,
)
from aimegraph.nodes.context import within_budget
from aimegraph.nodes.dual import Steps, blocking_call, model_node
from aimegraph.nodes.notes import unseen_notes
from aimegraph.nodes.types import Node
from aimegraph.prompts import actor as prompts
from aimegraph.prompts import guardrails as guardrail_prompts
from aimegraph.prompts import json_mode
from aimegraph.prompts.source import PromptSource, prompt_text
from aimegraph.state import ActorState, MemberResult, TaskResult, Usage
from aimegraph.streaming import call_metadata
from aimegraph.tools.execution import ToolOutcome, run_in_step
from aimegraph.tools.progress import (
    REPORT_NAMES,
    SUBMIT_RESULT,
    member_keys,
    settled,
)
from aimegraph.tools.screening import tripwire_in

ActorNode = Node[ActorState]

REPORTS: Mapping[str, BaseTool] = {t.name: t for t in ALWAYS_BOUND}

_APPENDED = ("messages", "updates")
"""The keys, among those one react step writes, whose channels append."""

_RE_ASK = "re_ask"
"""Key in a re-ask's ``response_metadata`` (never sent to the model) holding the problem."""


def make_assemble_node(
    factory: ActorFactory, *, prompt_source: PromptSource | None = None
) -> ActorNode:
    """The actor factory as a node: builds the spec and opens the conversation.
    The spec is written with the ``actor`` and ``persona_habits`` components of
    the run's prompt version in ``prompt_source`` (the built-in ones without)."""

    def assemble(state: ActorState, runtime: Runtime[Any]) -> dict[str, Any]:
        task = state["task"]
        spec = replace(
            factory.build(task, state["goal"], state.get("dependency_results", {})),
            experience=tuple(state.get("experience") or ()),
            facts=tuple(sorted((state.get("known_facts") or {}).items())),
            template=prompt_text(prompt_source, "actor", state),
            habits=prompt_text(prompt_source, "persona_habits", state).format(),
        )
        runtime.stream_writer(
            {
                "type": "actor",
                "event": "started",
                "task_id": task.id,
                "tools": spec.tool_names,
                "experience": list(spec.experience),
                **member_keys(state),
                **({"unit": spec.unit} if spec.unit else {}),
            }
        )
        return {
            "messages": [SystemMessage(spec.system_prompt()), task_message(state)],
            "tool_names": spec.tool_names,
            "steps": 0,
            "result": None,
            "error": None,
        }

    return assemble


def make_react_node(
    model: BaseChatModel,
    *,
    tools: Mapping[str, BaseTool],
    config: AimeConfig,
    done: str = END,
    assemble: ActorNode | None = None,
) -> Runnable[ActorState, Command[str]]:
    """One ReAct step: the model picks the next tool call (or answers). The model
    call is awaited under ``ainvoke`` (see :mod:`aimegraph.nodes.dual`).

    Routes with ``Command``: to ``tools`` for the reply's tool calls, one
    ``Send`` per call (see the module docstring), back to ``react`` to ask again
    after an unusable reply, and to ``done`` once the task is settled (a final
    answer, a failed model call, no steps left, or ``submit_result`` run in the
    tools step before).

    With ``assemble`` (:func:`make_assemble_node`), the first step, finding no
    conversation yet, runs it to open one: the actor's first super-step is its
    first model call, as in a hand-written ReAct loop.
    """
    # Converting tool schemas costs more than a fast model's reply: once per tool set.
    bound_models: dict[tuple[str, ...], Runnable[LanguageModelInput, AIMessage]] = {}
    json_models: dict[tuple[tuple[str, ...], str], Runnable[LanguageModelInput, AIMessage]] = {}

    def react(state: ActorState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg = config.for_run(runtime)
        names = tuple(n for n in state.get("tool_names", []) if n in tools)
        bound = [tools[n] for n in names] + list(ALWAYS_BOUND)
        steps = state.get("steps", 0) + 1
        mode = resolve_mode(cfg.tool_calling, model)
        try:
            if mode == "native":
                if names not in bound_models:
                    bound_models[names] = model.bind_tools(bound)
                reply = yield bound_models[names], state["messages"]
            else:
                key = (names, cfg.server_schema)
                if key not in json_models:
                    json_models[key] = json_step_model(model, bound, cfg.server_schema)
                prompt = with_json_instructions(
                    state["messages"], json_mode.TOOLS.format(tools=describe_tools(bound))
                )
                reply = yield json_models[key], plain_conversation(prompt)
        except Exception as exc:  # noqa: BLE001 - a model failure fails the task, as data
            reraise_if_retryable(exc, runtime)
            error = f"model call failed: {type(exc).__name__}: {exc}"
            failed = TaskResult(status="failed", summary=error)
            return {"steps": steps, "error": error, **settled(state, failed, runtime.stream_writer)}
        messages = reply_messages(reply, [t.name for t in bound], mode)
        calls = sum(len(m.tool_calls) for m in messages if isinstance(m, AIMessage))
        usage = usage_of(reply, "actor", cfg.prices, tool_calls=calls)
        update = {"messages": messages, "steps": steps, "usage": usage}
        last = messages[-1]
        # The state as of this step, for the reports run in it and the settled
        # task's event (which carries the attempt's usage so far).
        seen = cast(
            ActorState,
            {
                **state,
                "messages": [*state["messages"], *messages],
                "steps": steps,
                "usage": (state.get("usage") or Usage()) + usage,
            },
        )
        if isinstance(last, AIMessage) and last.tool_calls:
            if all(c["name"] in REPORTS for c in last.tool_calls):
                reports = run_in_step(
                    last, REPORTS, state=seen, runtime=runtime, once_per_reply=[SUBMIT_RESULT]
                )
                return _with_outcomes(update, reports)
            return update
        if isinstance(last, HumanMessage) and _steps_left(seen, cfg):
            return update
        return update | settled(seen, _unsubmitted_result(seen, cfg), runtime.stream_writer)

    budgeted = within_budget(model, config, react)
    # A factory may block (the default one lists the workspace): under ainvoke it runs
    # in a worker thread, as the sync node it was would.
    opening: Runnable[ActorState, dict[str, Any]] | None = (
        blocking_call(assemble, name="assemble") if assemble else None
    )
    reading_notes: Runnable[ActorState, dict[str, Any]] = blocking_call(_new_notes, name="notes")

    def step_or_settle(state: ActorState, runtime: Runtime[Any]) -> Steps[Command[str]]:
        if state.get("result") is not None:  # settled by submit_result in a graph of your own
            return Command(goto=done)
        if (why := tripwire_in(state.get("messages", []))) is not None:  # a tool guardrail
            summary = guardrail_prompts.TASK_STOPPED.format(reason=why)
            stopped = TaskResult(status="failed", summary=summary, tripwire=why)
            return Command(update=settled(state, stopped, runtime.stream_writer), goto=done)
        cfg = config.for_run(runtime)
        submitted = _deferred_submits(state, runtime)
        if submitted.get("result") is not None:  # the work beside it done, the task settled
            return Command(update=submitted, goto=done)
        opened = (yield opening, state) if opening and not state.get("messages") else submitted
        # A refused submission is heard in this step's call; the opening starts the talk.
        heard = [*state.get("messages", []), *opened.get("messages", [])]
        state = cast(ActorState, {**state, **opened, "messages": heard})
        if runtime.store is not None:  # a human's notes sent since the last step
            noted = yield reading_notes, state
            if noted["messages"]:
                opened = _merged(opened, noted)
                heard = [*state["messages"], *noted["messages"]]
                state = cast(ActorState, {**state, "messages": heard})
        if _steps_left(state, cfg):
            update = yield from budgeted(state, runtime)
        else:  # the tools step used the last one
            update = settled(state, _unsubmitted_result(state, cfg), runtime.stream_writer)
        update = _merged(opened, update)
        if "usage" in update:  # the step's calls, the summary's included
            update["usage"] = update["usage"].for_task(state["task"].id, state.get("member"))
        return Command(update=update, goto=_next_after_react(update, done))

    return model_node(
        step_or_settle, name="react", metadata=lambda state: call_metadata("actor", state)
    )


def _new_notes(state: ActorState, *, runtime: Runtime[Any]) -> dict[str, Any]:
    """The human's notes the actor has not had yet (see :mod:`aimegraph.nodes.notes`)."""
    assert runtime.store is not None
    return {"messages": unseen_notes(state, runtime.store)}


def _deferred_submits(state: ActorState, runtime: Runtime[Any]) -> dict[str, Any]:
    """The update of running the ``submit_result`` calls the last reply made beside
    work calls, now that those have run (nothing when there are none): the settled
    result, or the observation refusing it."""
    messages = state.get("messages", [])
    replies = [m for m in messages if isinstance(m, AIMessage)]
    if not replies or not _has_work(replies[-1]):
        return {}
    last = replies[-1]
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    waiting = [c for c in last.tool_calls if c["name"] == SUBMIT_RESULT]
    waiting = [c for c in waiting if c["id"] not in answered]
    if not waiting:
        return {}
    submits = last.model_copy(update={"tool_calls": waiting})
    outcomes = run_in_step(
        submits, REPORTS, state=state, runtime=runtime, once_per_reply=[SUBMIT_RESULT]
    )
    return _with_outcomes({}, outcomes)


def _has_work(reply: AIMessage) -> bool:
    """Whether ``reply`` calls a tool other than the reports."""
    return any(c["name"] not in REPORT_NAMES for c in reply.tool_calls)


def _with_outcomes(update: dict[str, Any], outcomes: Sequence[ToolOutcome]) -> dict[str, Any]:
    """``update`` with the outcomes of the calls run in the step: their observations
    and progress records appended, the rest (a submitted result, its task) set."""
    for outcome in outcomes:
        changes = outcome.update if isinstance(outcome, Command) else {"messages": [outcome]}
        update = _merged(update, dict(changes or {}))
    return update


def _merged(first: Mapping[str, Any], then: Mapping[str, Any]) -> dict[str, Any]:
    """Two updates of one step as one: appending channels get both lists, in order;
    ``then`` sets the others. One write per channel, so that the step streams as a
    single update (a node returning several writes to a channel streams each alone)."""
    merged = {**first, **then}
    for key in _APPENDED:
        if key in first and key in then:
            merged[key] = [*first[key], *then[key]]
    return merged


def _next_after_react(update: Mapping[str, Any], done: str) -> str | list[Send]:
    """Where a react step's update leads: ``done`` once it settled the task, one
    ``tools`` task per tool call (but ``submit_result``, which waits for them), else
    ``react`` (after a re-ask, or reports run in the step)."""
    if update.get("result") is not None:
        return done
    last = update["messages"][-1]
    if isinstance(last, AIMessage) and last.tool_calls:
        calls = [c for c in last.tool_calls if c["name"] != SUBMIT_RESULT]
        return [Send("tools", [call]) for call in calls]
    return "react"


def reply_messages(reply: AIMessage, tool_names: list[str], mode: Mode) -> list[AnyMessage]:
    """A tool loop's model reply as the messages it adds to the conversation: the
    tool calls it makes (native, written into its text, or in ``json`` mode its
    JSON), else its text, or a re-ask saying why it could not be used."""
    return (_json_step if mode == "json" else _native_step)(reply, tool_names)


def _native_step(reply: AIMessage, tool_names: list[str]) -> list[AnyMessage]:
    """A native reply as the next message: its tool calls, else the calls of bound tools
    written into its text, else its text as the final summary; an empty reply is asked
    again. ``<think>`` text is left out."""
    message = without_think_text(reply)
    if not message.tool_calls and (calls := tool_calls_in_text(message.text, tool_names)):
        message = message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []})
    if message.tool_calls or (message.text.strip() and not message.invalid_tool_calls):
        return [message]
    # A call with broken arguments is not an answer, whatever text comes with it. Neither it
    # nor an empty assistant turn is sent back (providers refuse both): only the text.
    said = message.model_copy(update={"invalid_tool_calls": []})
    problem = _why_unusable(reply) or "empty reply"
    return [*([said] if said.text.strip() else []), _re_ask(prompts.UNUSABLE_REPLY, problem)]


def _json_step(reply: AIMessage, tool_names: list[str]) -> list[AnyMessage]:
    """Turn a JSON-mode reply into tool calls, or into a re-ask with the parse error."""
    text = visible_text(reply)
    try:
        calls = parse_tool_calls(reply.text, tool_names)
    except JsonReplyError as exc:
        problem = _why_unusable(reply) or str(exc)
    else:
        return [AIMessage(content=text, tool_calls=calls, id=reply.id)]
    said: list[AnyMessage] = [AIMessage(content=text, id=reply.id)] if text else []
    return [*said, _re_ask(json_mode.PARSE_ERROR, problem)]


def _why_unusable(reply: AIMessage) -> str | None:
    """Why a reply is unusable as a whole, if it is: tool calls whose arguments were not
    valid JSON, or an empty, looping or cut-off reply."""
    if reply.invalid_tool_calls:
        bad = reply.invalid_tool_calls[0]
        return f"the arguments of your {bad.get('name') or 'tool'} call were not valid JSON"
    finish = reply.response_metadata.get("finish_reason")
    return check_degenerate(reply.text, finish_reason=finish)


def _re_ask(template: str, problem: str) -> HumanMessage:
    """The turn asking the model again, saying what was wrong with its reply."""
    return HumanMessage(template.format(error=problem), response_metadata={_RE_ASK: problem})


def _steps_left(state: ActorState, cfg: AimeConfig) -> bool:
    steps = state.get("steps", 0)
    budget = state.get("llm_call_budget")
    return steps < cfg.max_actor_steps and (budget is None or steps < budget)


def make_conclude_node(config: AimeConfig) -> ActorNode:
    """Deprecated: the actor graph settles each task in the step where its loop ends
    (``react``, or the tools step that ran ``submit_result``), so it has no
    ``conclude`` node any more. This node settles a task nothing settled yet (a
    step cap reached in a graph of your own), else it does nothing."""
    warnings.warn(
        "make_conclude_node is deprecated: the react node and submit_result settle the "
        "task (see build_actor_graph); it will be removed in aimegraph 0.3",
        DeprecationWarning,
        stacklevel=2,
    )

    def conclude(state: ActorState, runtime: Runtime[Any]) -> dict[str, Any]:
        if state.get("result") is not None:
            return {}
        result = _unsubmitted_result(state, config.for_run(runtime))
        return settled(state, result, runtime.stream_writer)

    return conclude


def make_hand_back_node() -> ActorNode:
    """A team member's end: its turn as a :class:`MemberResult` for the team."""

    def hand_back(state: ActorState, runtime: Runtime[Any]) -> dict[str, Any]:
        result = state.get("result") or TaskResult(status="failed", summary="no result")
        turn = MemberResult(
            member=state.get("member", "actor"),
            turn=state.get("turn", 1),
            role=state.get("member_role", "member"),
            status=result.status,
            summary=result.summary,
            artifacts=result.artifacts,
            transcript=transcript(state.get("messages", [])),
            steps=state.get("steps", 0),
            tripwire=result.tripwire,
        )
        return {"members": [turn]}

    return hand_back


def _unsubmitted_result(state: ActorState, cfg: AimeConfig) -> TaskResult:
    messages: Sequence[AnyMessage] = state.get("messages", [])
    last = messages[-1] if messages else None
    if error := state.get("error"):
        return TaskResult(status="failed", summary=error)
    if isinstance(last, AIMessage) and not last.tool_calls and visible_text(last):
        # An answer without a tool call is the actor's final summary.
        return TaskResult(status="completed", summary=visible_text(last))
    steps = state.get("steps", 0)
    budget = state.get("llm_call_budget")
    why = (
        "its share of the LLM-call budget"
        if budget is not None and steps >= budget
        else (f"max_actor_steps={cfg.max_actor_steps}")
    )
    if isinstance(last, HumanMessage) and (problem := last.response_metadata.get(_RE_ASK)):
        why += f"; the model's last reply could not be used: {problem}"
    return TaskResult(
        status="failed",
        summary=prompts.STEP_CAP_SUMMARY.format(
            steps=steps, why=why, transcript=transcript(messages)
        ),
    )


def transcript(messages: Sequence[AnyMessage], limit: int = 3000) -> str:
    """The tool calls and observations so far, newest last, cut to ``limit`` characters."""
    lines = []
    for message in messages:
        if isinstance(message, AIMessage):
            lines += [f"> {c['name']}({json.dumps(c['args'])[:300]})" for c in message.tool_calls]
        elif isinstance(message, ToolMessage):
            lines.append("  " + " ".join(message.text.split())[:500])
    text = "\n".join(lines) or "(no tool calls)"
    return text if len(text) <= limit else "..." + text[-limit:]
