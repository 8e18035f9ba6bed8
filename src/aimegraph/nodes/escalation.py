"""Escalation instead of failure (``AimeConfig.escalate``): where the run would end
for want of plan repairs or replans (or, with ``"failures"``, where a task failed for
good), it pauses for a human with the reason and the choices.

The interrupt value: ``kind="escalation"``, ``trigger``, ``reason``, the failed tasks
(``failed_tasks``: id, title, why), the progress list (``checklist``), the plan's
unfinished tasks as an editable ``PlanUpdate`` (``plan``), the ``choices``, and for
unattended runs ``timeout_s``, ``default`` and ``deadline`` (epoch seconds: the front
end driving the run answers ``default`` then, see
:mod:`aimegraph.waits`). Answers:

* ``{"action": "edit", "plan": {PlanUpdate}}``: the edited plan (checked as at plan
  approval, :func:`aimegraph.nodes.human.edited_plan`; an invalid one is asked again)
  and the run goes on;
* ``{"action": "answer", "answer": "...", "task_id": "t2"}``: the human's answer is
  the failed task's result (``task_id`` may be left out when one task failed);
* ``{"action": "replan", "note": "..."}``: the planner revises the plan once more
  (with the note), past ``max_replans``: the human's call;
* ``{"action": "give_up", "reason": "..."}`` (or ``"reject"``): the run ends as it
  would have (``failed``, ``budget_exhausted`` or ``rejected``), saying so.

Anything else is asked again with ``error`` saying why.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from aimegraph.config import AimeConfig
from aimegraph.nodes.human import edited_plan, require_checkpointer
from aimegraph.nodes.planner import commit_plan
from aimegraph.nodes.types import Node
from aimegraph.state import (
    AimeState,
    Escalation,
    PlanChecks,
    Task,
    TaskResult,
    render_checklist,
)
from aimegraph.waits import wait_terms

PLANNER, ORCHESTRATOR, REPORTER = "planner", "orchestrator", "reporter"

Choice = Literal["edit", "answer", "replan", "give_up"]

ANSWERS = (
    'answer {"action": "edit", "plan": {...}}, {"action": "answer", "answer": "...", '
    '"task_id": "..."}, {"action": "replan", "note": "..."} or {"action": "give_up", '
    '"reason": "..."}'
)


def escalation_for(state: AimeState) -> Escalation:
    """The run's pending escalation; for a run the verifier rejected with no replans
    left (routed here from the verifier, which writes none), made from its outcome."""
    if (pending := state.get("escalation")) is not None:
        return pending
    return Escalation(
        trigger="verifier",
        reason=state.get("reason") or "the verifier rejected the answer",
        failed=[],
        status=state.get("status", "rejected"),
    )


def make_escalate_node(config: AimeConfig, *, checks: PlanChecks) -> Node[AimeState]:
    """The node that asks a human what to do instead of ending the run (see the
    module docstring); routes with ``Command``: to the ``orchestrator`` after an
    edit or an answer, the ``planner`` for a replan, the ``reporter`` to end."""

    def escalate(state: AimeState, runtime: Runtime[Any]) -> Command:
        cfg = config.for_run(runtime)
        require_checkpointer("escalate")
        pending = escalation_for(state)
        tasks = dict(state.get("tasks") or {})
        failed = [tasks[i] for i in pending["failed"] if i in tasks]
        choices: list[Choice] = ["edit", "answer", "replan", "give_up"]
        if not failed:  # nothing to answer for
            choices.remove("answer")
        settled = {"escalation": None, "status": "running", "reason": None}
        error: str | None = None
        while True:  # each answer that is not taken is asked again, saying why
            value = interrupt(_request(pending, tasks, failed, choices, cfg, error))
            choice, details = parse_escalation_answer(value, choices)
            if choice == "give_up":
                why = details or "no reason given"
                reason = f"{pending['reason']}; a human gave up on it: {why}"
                update = {"escalation": None, "status": pending["status"], "reason": reason}
                return Command(goto=REPORTER, update=update)
            if choice == "replan":
                note = f"\nThe human's note: {details}" if details else ""
                return Command(
                    goto=PLANNER,
                    update=settled
                    | {
                        "replan_reason": f"{pending['reason']}{note}",
                        "replans": state.get("replans", 0) + 1,
                        "dispatched": [],
                    },
                )
            if choice == "answer":
                answered = _answered(failed, details)
                if isinstance(answered, str):
                    error = answered
                    continue
                runtime.stream_writer({"type": "escalation", "answered": list(answered)})
                return Command(goto=ORCHESTRATOR, update=settled | {"tasks": answered})
            if choice == "edit":
                checked = edited_plan(details, tasks, checks, max_tasks=cfg.max_tasks)
                if isinstance(checked, str):
                    error = checked
                    continue
                edited, changed = checked
                committed = commit_plan(state, runtime, changed, edited.model_dump())
                return Command(goto=ORCHESTRATOR, update=settled | committed)
            error = f"{details}: {ANSWERS}"

    return escalate


def parse_escalation_answer(value: Any, choices: Collection[Choice]) -> tuple[Choice | None, Any]:
    """(the choice, its details: the plan, the answer and task, the note or reason),
    or (None, why the answer is none of ``choices``)."""
    if not isinstance(value, Mapping):
        return None, f"unrecognised answer {value!r:.200}"
    action = str(value.get("action") or ("answer" if "answer" in value else "")).lower()
    action = {"reject": "give_up", "deny": "give_up"}.get(action, action)
    if action not in choices:
        return None, f"{action or 'no action'} is not one of {', '.join(choices)}"
    if action == "edit":
        plan = value.get("plan")
        return ("edit", plan) if isinstance(plan, Mapping) else (None, "an edit needs a plan")
    if action == "answer":
        answer = value.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            return None, "an answer for the task needs its text"
        return "answer", (answer.strip(), value.get("task_id"))
    text = value.get("note") or value.get("reason")
    return action, str(text) if text else None  # type: ignore[return-value]


def _answered(failed: list[Task], details: tuple[str, Any]) -> dict[str, Task] | str:
    """The failed task the human answered for, completed with the answer; or why not."""
    answer, task_id = details
    ids = [t.id for t in failed]
    if task_id is None and len(failed) == 1:
        task_id = ids[0]
    chosen = next((t for t in failed if t.id == task_id), None)
    if chosen is None:
        return f"say which failed task the answer is for (task_id: one of {', '.join(ids)})"
    result = TaskResult(status="completed", summary=f"(answered by a human) {answer}")
    return {chosen.id: chosen.model_copy(update={"status": "completed", "result": result})}


def _request(
    pending: Escalation,
    tasks: Mapping[str, Task],
    failed: list[Task],
    choices: list[Choice],
    cfg: AimeConfig,
    error: str | None,
) -> dict[str, Any]:
    return {
        "kind": "escalation",
        "trigger": pending["trigger"],
        "reason": pending["reason"],
        "failed_tasks": [
            {"id": t.id, "title": t.title, "reason": t.result.summary if t.result else ""}
            for t in failed
        ],
        "checklist": render_checklist(dict(tasks)),
        "plan": editable_plan(tasks),
        "choices": choices,
        **wait_terms(cfg.escalation_timeout_s, cfg.escalation_default),
        "error": error,
    }


def editable_plan(tasks: Mapping[str, Task]) -> dict[str, Any]:
    """The plan's pending and failed tasks as a ``PlanUpdate`` a human can edit and
    send back: a failed task sent back runs again; one left out is skipped, as after
    any plan (completed tasks stay as they are)."""
    specs = [
        {
            "id": t.id,
            "title": t.title,
            "description": t.description,
            "dependencies": list(t.dependencies),
            "completion_criteria": t.completion_criteria,
            "tool_bundles": list(t.tool_bundles),
        }
        for t in tasks.values()
        if t.status in ("pending", "failed")
    ]
    return {"rationale": "edited by a human", "tasks": specs, "drop": []}
