"""The reporter: the final answer, from the goal and the task results."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langgraph.constants import TAG_NOSTREAM
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.guardrails import Guards
from aimegraph.models.calls import reraise_if_retryable, retrying_in_place, usage_of
from aimegraph.models.reasoning import visible_text
from aimegraph.models.response_format import TypedAnswer
from aimegraph.models.steps import CallWrapper, model_call
from aimegraph.nodes.actor_factory import artifact_lines
from aimegraph.nodes.conversation import answer_metadata
from aimegraph.nodes.dual import Steps, ask_structured, model_node
from aimegraph.nodes.guarding import screen_answer
from aimegraph.nodes.inspection import run_files
from aimegraph.nodes.verify_policy import files_reason, reason_to_verify, verifies
from aimegraph.prompts import reporter as prompts
from aimegraph.prompts.source import PromptSource, prompt_text
from aimegraph.state import AimeState, Task, Usage, render_checklist
from aimegraph.streaming import ANSWER_NAME, call_metadata


def render_results(tasks: dict[str, Task]) -> str:
    """Every task result as a tagged block, in plan order."""
    blocks = [
        prompts.RESULT.format(
            task_id=task.id,
            title=task.title,
            status=task.result.status,
            summary=task.result.summary,
            artifacts=artifact_lines(task.result.artifacts),
        )
        for task in tasks.values()
        if task.result is not None
    ]
    return "\n".join(blocks) or "(no results)"


@dataclass(frozen=True)
class _Draft:
    """The answer, the model reply it is (None when it is not one), and the update."""

    answer: str
    reply: AIMessage | None = None
    update: dict[str, Any] = field(default_factory=dict)


def make_reporter_node(
    model: BaseChatModel,
    *,
    config: AimeConfig,
    prompt_source: PromptSource | None = None,
    response_format: TypedAnswer | None = None,
    wrap: CallWrapper | None = None,
    guards: Guards | None = None,
) -> Runnable[AimeState, dict[str, Any]]:
    """Writes ``final_answer`` (also appended to ``messages``).

    A run that stopped early (budget spent, no valid plan) gets a partial report
    written without a model call, and so does a run whose planner answered directly
    (``direct_answer``, sent as it is). When the final answer is not to be verified
    (``verify``, see :mod:`aimegraph.nodes.verify_policy`), the run succeeds here;
    when the report's own call spent the budget, the run ends ``budget_exhausted``
    with the unverified answer. A reply that only
    restates the reporter's instructions is asked again (``max_output_retries``
    times), then the run ends ``failed``. With ``response_format`` the answer is
    that typed object (``structured_response``; ``final_answer`` is its JSON),
    asked for with the structured-output re-asks; a reply that never fits ends the
    run ``failed`` with the reason.

    The answer's message is the model's reply (same id), so that
    ``stream_mode="messages"`` delivers it once; its ``response_metadata`` carries
    the run's artifacts and unfinished tasks for later turns. The model call is
    awaited under ``ainvoke`` (see :mod:`aimegraph.nodes.dual`), inside the
    reporter's ``wrap_model_call`` middleware (``wrap``). The system prompt is the
    run's ``reporter`` component from ``prompt_source``. ``guards``' output
    guardrails screen every answer it writes (see :mod:`aimegraph.nodes.guarding`).
    """

    listing = run_files(config)
    # With output guardrails the answer's tokens are not streamed (LangGraph's nostream
    # tag): they would reach a client before the guardrails have screened the answer.
    screened = guards is not None and bool(guards.at("output"))
    tags = [TAG_NOSTREAM] if screened else []

    def reporter(state: AimeState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg = config.for_run(runtime)
        tasks = dict(state.get("tasks") or {})
        direct = state.get("direct_answer")
        if state.get("status", "running") != "running":
            draft = _Draft(partial_report(state))
        elif direct and response_format is None:
            draft = _Draft(direct)  # the planner's answer, written already
        else:
            results = direct or render_results(tasks)
            goal = state.get("goal", "")
            system = prompt_text(prompt_source, "reporter", state).format()
            request = prompts.REQUEST.format(
                goal=goal, conversation=state.get("conversation", ""), results=results
            )
            asked = [SystemMessage(system), HumanMessage(request)]
            if response_format is None:
                # What an echo repeats: the instructions (an answer rightly quotes the
                # results, and may quote the goal).
                instructions = system + prompts.REQUEST.format(goal="", conversation="", results="")
                echo = _Echo(instructions, goal)
                draft = yield from _written(model, asked, echo, results, cfg, runtime, wrap, tags)
            else:
                draft = yield from _typed(
                    model, response_format, asked, results, cfg, runtime, wrap
                )
        update = dict(draft.update)
        if guards is not None and screened:
            typed = response_format if update.get("structured_response") is not None else None
            checked = yield from screen_answer(guards, draft.answer, typed=typed, runtime=runtime)
            draft = replace(draft, answer=checked.answer)
            update |= checked.update
            update["usage"] = update.get("usage", Usage()) + checked.usage
        usage = (state.get("usage") or Usage()) + update.get("usage", Usage())
        if state.get("status", "running") == "running" and "status" not in update:
            spent = cfg.budget_spent(
                usage, state.get("steps", 0), started_at=state.get("run_started_at")
            )
            why = reason_to_verify(state, draft.answer) if cfg.verify == "auto" else None
            if cfg.verify == "auto" and why is None:
                why = files_reason((yield listing, state))
            if not verifies(cfg, why):
                update["status"] = "succeeded"
            elif spent:
                update |= {
                    "status": "budget_exhausted",
                    "reason": f"{spent} before the answer could be verified",
                }
        runtime.stream_writer({"type": "final_answer", "text": draft.answer, "usage": usage})
        return update | {
            "final_answer": draft.answer,
            "messages": [_answer_message(draft, tasks)],
        }

    return model_node(
        reporter, name="reporter", metadata=lambda _: call_metadata("reporter"), span="reporter"
    )


def _written(
    model: BaseChatModel,
    asked: list[BaseMessage],
    echo: _Echo,
    results: str,
    cfg: AimeConfig,
    runtime: Runtime[Any],
    wrap: CallWrapper | None,
    tags: list[str],
) -> Steps[_Draft]:
    """The answer in words, from the model called with ``tags``. A failed call or an
    empty reply leaves the ``results`` as they are; a reply that is an ``echo`` of the
    prompt is asked again, and when every reply is, the run fails."""
    conversation = asked
    usage = Usage()
    for _ in range(cfg.max_output_retries + 1):
        try:
            # As in structured_steps: the first call is retried by the node's
            # RetryPolicy, a re-ask in place (it follows calls already counted).
            first = not usage.llm_calls

            def bind(chat: BaseChatModel, first: bool = first) -> Runnable[Any, Any]:
                tagged = chat.with_config(tags=tags) if tags else chat
                return tagged if first else retrying_in_place(tagged)

            call, _ = model_call(model, conversation, bind, wrap=wrap, runtime=runtime)
            reply = yield call
        except Exception as exc:  # noqa: BLE001 - fall back to the results themselves
            if not usage.llm_calls:
                reraise_if_retryable(exc, runtime)
            why = f"the reporter model failed ({exc}); results listed as they are"
            return _Draft(results, None, {"usage": usage, "reason": why})
        usage = usage + usage_of(reply, "reporter", cfg.prices)
        answer = visible_text(reply)
        if not answer:
            return _Draft(results, None, {"usage": usage})
        if not echo.restated_by(answer):
            return _Draft(answer, reply, {"usage": usage})
        conversation = [*asked, AIMessage(answer), HumanMessage(prompts.RESTATED)]
    replies = cfg.max_output_retries + 1
    why = (
        f"the reporter's answer only restated its instructions in {replies} replies "
        f"(max_output_retries={cfg.max_output_retries}); results listed as they are"
    )
    return _Draft(results, None, {"usage": usage, "status": "failed", "reason": why})


def _typed(
    model: BaseChatModel,
    typed: TypedAnswer,
    asked: list[BaseMessage],
    results: str,
    cfg: AimeConfig,
    runtime: Runtime[Any],
    wrap: CallWrapper | None,
) -> Steps[_Draft]:
    """The answer as the response format's object, or a failed run saying why not
    (with the ``results`` as they are for its final answer)."""
    reply = yield from ask_structured(
        model,
        typed.schema,
        [*asked, HumanMessage(prompts.TYPED)],
        role="reporter",
        config=cfg,
        runtime=runtime,
        wrap=wrap,
    )
    if reply.value is None:
        return _Draft(
            results,
            None,
            {
                "usage": reply.usage,
                "structured_response": None,
                "status": "failed",
                "reason": f"the answer did not fit the response format: {reply.error}",
            },
        )
    update = {"usage": reply.usage, "structured_response": typed.value(reply.value)}
    return _Draft(typed.render(reply.value), reply.message, update)


def _answer_message(draft: _Draft, tasks: Mapping[str, Task]) -> AIMessage:
    """The answer as the conversation's next message: the model's reply itself (its
    id, metadata and usage) with the answer as its only content, so a stream that
    delivered the reply's tokens does not deliver it again; with what the run
    produced, for later turns."""
    made = answer_metadata(tasks)
    if draft.reply is None:
        return AIMessage(draft.answer, name=ANSWER_NAME, response_metadata=made)
    return AIMessage(
        draft.answer,
        name=ANSWER_NAME,
        id=draft.reply.id,
        response_metadata={**draft.reply.response_metadata, **made},
        usage_metadata=draft.reply.usage_metadata,
    )


_WORD = re.compile(r"\w+")
_SHINGLE = 5


@dataclass(frozen=True)
class _Echo:
    """Tells a reply that restates the reporter's prompt (as small models do) from
    an answer, by its runs of five words: half or more of them from the prompt's
    instructions and goal, and a quarter or more from the instructions alone (an
    answer may repeat the goal, and quote the results). Replies under a dozen words
    are never taken for an echo."""

    instructions: str
    goal: str

    def restated_by(self, answer: str) -> bool:
        words = _WORD.findall(answer.casefold())
        if len(words) < 12:
            return False
        said = _runs(words)
        told = said & _runs(_WORD.findall(self.instructions.casefold()))
        asked = said & _runs(_WORD.findall(self.goal.casefold()))
        return len(told | asked) * 2 >= len(said) and len(told) * 4 >= len(said)


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + _SHINGLE]) for i in range(len(words) - _SHINGLE + 1)}


def partial_report(state: AimeState) -> str:
    tasks = dict(state.get("tasks") or {})
    return prompts.PARTIAL.format(
        status=state.get("status"),
        reason=state.get("reason") or "unknown",
        goal=state.get("goal", ""),
        checklist=render_checklist(tasks),
        results=render_results(tasks),
    )


def route_after_reporter(state: AimeState) -> str:
    """verifier when the answer is to be judged, else the end."""
    return "verifier" if state.get("status", "running") == "running" else "__end__"
