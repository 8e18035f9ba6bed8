"""A plan-first configuration (the pattern of CaMeL, Debenedetti et al., 2025) and
the stand-in planner that plays it offline.

CaMeL plans the control flow from the user's request before any untrusted data is
read, so that data never chooses the next tool. In aimegraph that is tool steps the
planner fixes, and actors that may only read: :data:`PLAN_FIRST` is aimegraph with
the tool policy :func:`~aimegraph.eval.public.defences.side_effects_in_tool_steps_only`
(a side-effect call runs only as a planned tool step; an actor's is refused).

What the stand-in planner (:func:`plan_first_scenario`) decides: it writes a
ground-truth call as a tool step when every argument of the call is written in the
request (:func:`~aimegraph.eval.public.defences.given_by`), which a real planner
could do before reading anything; every other call, in order, goes to an actor,
which makes it after reading the outputs before it, as a model reading them would.
An actor's side-effect call is then refused by the policy: a task whose transfer
needs a figure from the transaction history is not solved. That is the price of
the pattern without CaMeL's data flow (its interpreter passes values read by a
quarantined model into the planned calls, under capability checks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from aimegraph.eval.oracle import (
    UNSOLVED_ANSWER,
    AimeOracle,
    OracleError,
    planned_bundles,
    stage_steps,
)
from aimegraph.eval.oracle_plays import dollars_escaped
from aimegraph.eval.public.defences import given_by
from aimegraph.eval.suite import OracleStage, Task
from aimegraph.eval.systems import SystemSpec
from aimegraph.models.offline.scripted import Scenario

__all__ = ["PLAN_FIRST", "PLAN_FIRST_MODEL_NAME", "PlanFirstModels", "plan_first_scenario"]

POLICY = "aimegraph.eval.public.defences:side_effects_in_tool_steps_only"

PLAN_FIRST = SystemSpec(name="aimegraph-plan-first", config={"tool_policy": POLICY})
"""aimegraph whose side effects run only as tool steps the plan fixed."""

PLAN_FIRST_MODEL_NAME = "oracle-plan-first"

_PLACEHOLDERS = ("{last_tool_output}", "{stage:")

ACTOR_CALLS = 8
"""The most calls one actor task makes (``max_actor_steps``, 10 by default, one of
which submits its result), as the adapters' stages."""


def _fixed(request: str, call: dict[str, Any]) -> bool:
    return all(given_by(request, value) for value in (call.get("args") or {}).values())


def _runs(request: str, calls: list[dict[str, Any]]) -> list[tuple[bool, list[dict[str, Any]]]]:
    """``calls`` in order, in runs of calls the plan fixes (True) or an actor makes."""
    runs: list[tuple[bool, list[dict[str, Any]]]] = []
    for call in calls:
        fixed = _fixed(request, call)
        if runs and not fixed and not runs[-1][0] and len(runs[-1][1]) < ACTOR_CALLS:
            runs[-1][1].append(call)
        else:
            runs.append((fixed, [call]))
    return runs


def plan_first_scenario(task: Task, *, solve: bool = True) -> dict[str, Any]:
    """The scripted scenario of the stand-in planner (see the module docstring) for
    ``task``, whose oracle's calls are literal (a public benchmark's).

    Raises:
        OracleError: the task has no oracle, an oracle call reads an earlier output,
            or a turn's answer is typed.
    """
    if task.oracle is None:
        raise OracleError(f"task {task.id!r} has no oracle replies")
    turns = task.oracle.turns
    written = [c.get("args") for t in turns for s in t.stages for c in s.calls]
    written += [t.answer for t in turns]
    if any(mark in json.dumps(written) for mark in _PLACEHOLDERS):
        raise OracleError(f"task {task.id!r}: the plan-first stand-in plays literal calls only")
    bundles = planned_bundles(task)
    planner, actors, reporter = [], {}, []
    goals = task.goals
    for number, turn in enumerate(task.oracle.turns, 1):
        if turn.answer is None:
            raise OracleError(f"task {task.id!r}: the plan-first stand-in answers in text only")
        request = goals[min(number, len(goals)) - 1]
        calls = [call for stage in turn.stages for call in stage.calls]
        named = turn.stages[0].bundles or bundles
        specs: list[dict[str, Any]] = []
        for fixed, run in _runs(request, calls) or [(False, [])]:
            before = [specs[-1]["id"]] if specs else []
            task_id = f"t{number}-{len(specs) + 1}"
            if fixed:
                call = run[0]
                step = {"tool": call["tool"], "args": dollars_escaped(call.get("args") or {})}
                title = f"Call {call['tool']}"
                specs.append(_spec(task_id, title, before) | {"call": step})
                continue
            title = "Read what the request needs" if run else "Answer the request"
            specs.append(_spec(task_id, title, before) | {"tool_bundles": named})
            actors[task_id] = stage_steps(OracleStage(id=task_id, title=title, calls=run))
        planner.append({"rationale": "The request fixes these calls.", "tasks": specs})
        reporter.append({"text": turn.answer if solve else UNSOLVED_ANSWER})
    return {
        "name": f"plan-first-{task.id}",
        "goal": goals[0],
        "any_goal": True,
        "planner": planner,
        "actors": actors,
        "reporter": reporter,
    }


def _spec(task_id: str, title: str, dependencies: list[str]) -> dict[str, Any]:
    return {"id": task_id, "title": title, "description": title, "dependencies": dependencies}


@dataclass(frozen=True)
class PlanFirstModels:
    """The stand-in planner's model for each rollout of an aimegraph system."""

    name: str = PLAN_FIRST_MODEL_NAME
    """How records and reports name the model (part of the system's digest)."""

    def __call__(self, task: Task, kind: str, rollout: int) -> BaseChatModel:
        if kind != "aimegraph":
            raise OracleError(f"the plan-first stand-in plays aimegraph only, not {kind}")
        return AimeOracle(scenario=Scenario.model_validate(plan_first_scenario(task)))
