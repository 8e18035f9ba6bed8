"""The reporter: the final answer, from the goal and the task results."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from aimegraph.config import AimeConfig
from aimegraph.models.calls import reraise_if_retryable, usage_of
from aimegraph.models.reasoning import visible_text
from aimegraph.nodes.dual import Steps, model_node
from aimegraph.nodes.executor import artifact_lines
from aimegraph.prompts import reporter as prompts
from aimegraph.prompts.source import PromptSource, prompt_text
from aimegraph.state import AimeState, Task, Usage, render_checklist


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


def make_reporter_node(
    model: BaseChatModel, *, config: AimeConfig, prompt_source: PromptSource | None = None
) -> Runnable[AimeState, dict[str, Any]]:
    """Writes ``final_answer`` (also appended to ``messages``).

    A run that stopped early (budget spent, no valid plan) gets a partial report
    written without a model call. When the final answer is not to be verified,
    the run succeeds here; when the report's own call spent the budget, the run
    ends ``budget_exhausted`` with the unverified answer. The model call is
    awaited under ``ainvoke`` (see :mod:`aimegraph.nodes.dual`). The system prompt
    is the run's ``reporter`` component from ``prompt_source``.
    """

    def reporter(state: AimeState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        cfg = config.for_run(runtime)
        tasks = dict(state.get("tasks") or {})
        status = state.get("status", "running")
        update: dict[str, Any] = {}
        if status != "running":
            answer = partial_report(state)
        else:
            messages = [
                SystemMessage(prompt_text(prompt_source, "reporter", state).format()),
                HumanMessage(
                    prompts.REQUEST.format(
                        goal=state.get("goal", ""), results=render_results(tasks)
                    )
                ),
            ]
            try:
                reply = yield model, messages
                update["usage"] = usage_of(reply, "reporter", cfg.prices)
                answer = visible_text(reply)
            except Exception as exc:  # noqa: BLE001 - fall back to the results themselves
                reraise_if_retryable(exc, runtime)
                answer = ""
                update["reason"] = f"the reporter model failed ({exc}); results listed as they are"
            answer = answer or render_results(tasks)
            spent = cfg.budget_spent(
                (state.get("usage") or Usage()) + update.get("usage", Usage()),
                state.get("steps", 0),
                started_at=state.get("run_started_at"),
            )
            if cfg.verify not in ("final", "both"):
                update["status"] = "succeeded"
            elif spent:
                update |= {
                    "status": "budget_exhausted",
                    "reason": f"{spent} before the answer could be verified",
                }
        runtime.stream_writer({"type": "final_answer", "text": answer})
        return update | {"final_answer": answer, "messages": [AIMessage(answer, name="aime")]}

    return model_node(reporter, name="reporter")


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
