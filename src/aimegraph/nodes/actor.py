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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
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
from aimegraph.middleware import MiddlewareStack
from aimegraph.middleware.calls import HookFailed, run_hooks
from aimegraph.models.calls import reraise_if_retryable
from aimegraph.models.reasoning import visible_text
from aimegraph.models.reply_reading import RE_ASK
from aimegraph.nodes.actor_call import make_actor_call
from aimegraph.nodes.actor_factory import (  # noqa: F401 - the factory's names lived here: kept a release
    ALWAYS_BOUND,
    ActorFactory,
    ActorSpec,
    DefaultActorFactory,
    artifact_lines,
    task_message,
)
from aimegraph.nodes.actor_hooks import (
    JUMP,
    full_state,
    hook_view,
    stopped,
    summary_reset,
    unanswered,
    with_reply,
    written,
)
from aimegraph.nodes.context import within_budget
from aimegraph.nodes.dual import Steps, blocking_call, model_node
from aimegraph.nodes.notes import unseen_notes
from aimegraph.nodes.types import Node
from aimegraph.prompts import actor as prompts
from aimegraph.prompts import guardrails as guardrail_prompts
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
    middleware: MiddlewareStack | None = None,
    tool_step: Callable[[ActorState, Runtime[Any]], Command[str]] | None = None,
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
    first model call, as in a hand-written ReAct loop. ``middleware`` (the actor's
    LangChain middleware) runs its ``before_model`` hooks, the model call inside its
    ``wrap_model_call`` hooks, then its ``after_model`` hooks (see
    :mod:`aimegraph.nodes.actor_hooks`). ``tool_step`` plays a task whose call the
    plan gives (:func:`aimegraph.nodes.tool_step.make_tool_step`) instead.
    """
    stack = middleware or MiddlewareStack()
    budgeted = within_budget(model, config, make_actor_call(model, tools, config, stack))

    def react(state: ActorState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg = config.for_run(runtime)
        steps = state.get("steps", 0) + 1
        hooks = hook_view(state) if stack.hooks_state else None
        reset: dict[str, Any] = {}  # the context budget's summary, if hooks dropped turns
        if hooks is not None and stack.before_model:
            try:
                hooks = yield from run_hooks(stack.before_model, hooks)
            except HookFailed as failure:
                return {"steps": steps, **_failed(state, failure, runtime)}
            if hooks.jump in ("end", "tools"):  # no model call in this step
                update = {"steps": steps, **written(state, hooks, [])}
                seen = cast(ActorState, {**full_state(state, hooks), "steps": steps})
                if hooks.jump == "tools":  # the calls still unanswered, as a reply's
                    return {**update, JUMP: _next_after_react(seen, done)}
                return update | settled(seen, stopped(hooks), runtime.stream_writer)
            reset = summary_reset(state, hooks)
            state = cast(ActorState, full_state(state, hooks))
        asked = yield from budgeted(state, runtime)
        if "error" in asked:
            failed = TaskResult(status="failed", summary=asked["error"])
            return {"steps": steps, **settled(state, failed, runtime.stream_writer), **asked}
        reply, usage = asked.pop("messages"), asked.pop("usage")
        if hooks is None:
            update = {**asked, "messages": reply}
            now = {**state, "messages": [*state["messages"], *reply]}
        else:
            try:
                hooks = yield from run_hooks(stack.after_model, with_reply(hooks, reply))
            except HookFailed as failure:  # the reply stays, and its usage
                kept = {**asked, "messages": reply, "steps": steps, "usage": usage}
                return kept | _failed(state, failure, runtime)
            # The context budget's summary, made in this step, wins over a reset.
            update = {**reset, **written(state, hooks, reply), **asked}
            now = full_state(state, hooks)
        update |= {"steps": steps, "usage": usage}
        # The state as of this step, for the reports run in it and the settled
        # task's event (which carries the attempt's usage so far).
        seen = cast(
            ActorState, {**now, "steps": steps, "usage": (state.get("usage") or Usage()) + usage}
        )
        if hooks is not None and hooks.jump == "end":
            return update | settled(seen, stopped(hooks), runtime.stream_writer)
        if hooks is not None and hooks.jump == "model":
            return {**update, JUMP: "react"}
        last = seen["messages"][-1]
        if calls := unanswered(seen["messages"]):
            if all(c["name"] in REPORTS for c in calls):
                reply_calls = AIMessage(content="", tool_calls=calls)
                reports = run_in_step(
                    reply_calls,
                    REPORTS,
                    state=seen,
                    runtime=runtime,
                    once_per_reply=[SUBMIT_RESULT],
                )
                return _with_outcomes(update, reports)
            return update
        if isinstance(last, HumanMessage | ToolMessage) and _steps_left(seen, cfg):
            return update  # a re-ask, or the calls a hook answered: the model goes on
        return update | settled(seen, _unsubmitted_result(seen, cfg), runtime.stream_writer)

    # A factory may block (the default one lists the workspace): under ainvoke it runs
    # in a worker thread, as the sync node it was would.
    opening: Runnable[ActorState, dict[str, Any]] | None = (
        blocking_call(assemble, name="assemble") if assemble else None
    )
    reading_notes: Runnable[ActorState, dict[str, Any]] = blocking_call(_new_notes, name="notes")

    def step_or_settle(state: ActorState, runtime: Runtime[Any]) -> Steps[Command[str]]:
        if tool_step is not None and state["task"].call is not None:
            return tool_step(state, runtime)
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
            update = yield from react(state, runtime)
        else:  # the tools step used the last one
            update = settled(state, _unsubmitted_result(state, cfg), runtime.stream_writer)
        update = _merged(opened, update)
        if "usage" in update:  # the step's calls, the summary's included
            update["usage"] = update["usage"].for_task(state["task"].id, state.get("member"))
        goto = update.pop(JUMP, None) or _next_after_react(update, done)
        return Command(update=update, goto=goto)

    return model_node(
        step_or_settle, name="react", metadata=lambda state: call_metadata("actor", state)
    )


def _failed(state: ActorState, failure: HookFailed, runtime: Runtime[Any]) -> dict[str, Any]:
    """The update failing the task a middleware hook raised in, as data (a retryable
    failure, as of a summary model's provider, is raised for the node's retry policy)."""
    if isinstance(failure.__cause__, Exception):
        reraise_if_retryable(failure.__cause__, runtime)
    result = TaskResult(status="failed", summary=str(failure))
    return {"error": str(failure), **settled(state, result, runtime.stream_writer)}


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
    ``tools`` task per unanswered tool call (but ``submit_result``, which waits for
    them), else ``react`` (after a re-ask, reports run in the step, or calls a hook
    answered)."""
    if update.get("result") is not None:
        return done
    calls = [c for c in unanswered(update.get("messages", [])) if c["name"] != SUBMIT_RESULT]
    return [Send("tools", [call]) for call in calls] if calls else "react"


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
    if isinstance(last, HumanMessage) and (problem := last.response_metadata.get(RE_ASK)):
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
