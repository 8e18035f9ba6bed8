"""How each system plays a task's oracle, under the knowledge rule
(:mod:`aimegraph.eval.knowledge`).

- A ReAct loop (:func:`react_turns`): in each reply, the next call of every stage
  whose dependencies are done, as a real model makes independent calls together
  (``create_agent`` runs them alike); a look at a file it read in an earlier turn is
  not made again (its conversation still holds it).
- aimegraph (:func:`aime_scenario`): a plan with one task per stage. A stage is a tool
  step (no model call) only when its planner could have written it
  (:func:`planner_writes`): one call whose literals its goals show, reading no output;
  any other stage is an actor's, making the stage's calls and ending its task as a real
  model could (:func:`stage_steps`); then the reporter's answer (the scripted model of
  :mod:`aimegraph.models.offline.scripted`). An actor's task names the bundles a planner
  could name from the suite task's own text (:func:`planned_bundles`), or every bundle
  the ReAct loop's tools come from (``every_bundle``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aimegraph.eval.knowledge import call_literals, unseen
from aimegraph.eval.suite import OracleStage, OracleTurn, Task

__all__ = [
    "UNSOLVED_ANSWER",
    "OracleError",
    "aime_scenario",
    "call_notes",
    "dollars_escaped",
    "fill",
    "planned_bundles",
    "planner_sight",
    "planner_writes",
    "react_replies",
    "react_turns",
    "stage_steps",
]

UNSOLVED_ANSWER = "I could not solve this task."

STAGE = re.compile(r"\{stage:([\w.-]+)\}")
LAST = "{last_tool_output}"

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


def call_notes(call: Mapping[str, Any]) -> dict[str, str]:
    """The ``derived`` notes of an oracle call: how its caller works out literals its
    conversation does not show."""
    return {str(k): str(v) for k, v in (call.get("derived") or {}).items()}


def fill(value: Any, last_output: str, results: Mapping[str, str]) -> Any:
    """``value`` with ``{last_tool_output}`` and ``{stage:ID}`` written out."""
    if isinstance(value, str):
        text = value.replace(LAST, last_output)
        return STAGE.sub(lambda m: results.get(m.group(1), m.group(0)), text)
    if isinstance(value, list):
        return [fill(v, last_output, results) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, last_output, results) for k, v in value.items()}
    return value


def rename(value: Any, placeholder: str) -> Any:
    """``{stage:ID}`` as the scripted model spells a result (``{dep:ID}``, ``{result:ID}``)."""
    if isinstance(value, str):
        return STAGE.sub(lambda m: f"{{{placeholder}:{m.group(1)}}}", value)
    if isinstance(value, list):
        return [rename(v, placeholder) for v in value]
    if isinstance(value, dict):
        return {k: rename(v, placeholder) for k, v in value.items()}
    return value


# -- the ReAct loop


Reply = list[tuple[OracleStage, int]]
"""The calls of one reply, as (stage, index of the call in the stage)."""

_READS = frozenset({"read_file", "list_dir"})


def react_turns(turns: list[OracleTurn]) -> list[list[Reply]]:
    """The replies a ReAct loop makes to play each of ``turns`` (:func:`react_replies`),
    a look at what an earlier turn already read left out: the loop still has it."""
    played: list[list[Reply]] = []
    read: set[str] = set()
    for turn in turns:
        replies = react_replies(turn, frozenset(read))
        read |= {_call_key(stage.calls[n]) for reply in replies for stage, n in reply}
        played.append(replies)
    return played


def react_replies(turn: OracleTurn, read: frozenset[str] = frozenset()) -> list[Reply]:
    """The calls of each reply a ReAct loop makes to play ``turn``: the next call of
    every stage whose dependencies are done. A look (:func:`is_look`) at what the loop
    has already ``read`` (calls, by :func:`_call_key`) is not made again."""
    looked = {
        stage.id
        for stage in turn.stages
        if is_look(stage, turn) and _call_key(stage.calls[0]) in read
    }
    made = {stage.id: len(stage.calls) if stage.id in looked else 0 for stage in turn.stages}
    replies: list[Reply] = []
    while True:
        done = _finished(turn, made)
        batch = [
            (stage, made[stage.id])
            for index, stage in enumerate(turn.stages)
            if made[stage.id] < len(stage.calls)
            and all(dep in done for dep in turn.dependencies(stage, index))
        ]
        if not batch:
            return replies
        for stage, _ in batch:
            made[stage.id] += 1
        replies.append(batch)


def is_look(stage: OracleStage, turn: OracleTurn) -> bool:
    """Whether ``stage`` only looks: one read whose output nothing uses but its reader's
    knowledge (a first look at a file, so that later calls may name what it shows)."""
    if len(stage.calls) != 1 or stage.calls[0]["tool"] not in _READS or stage.result != LAST:
        return False
    return f"{{stage:{stage.id}}}" not in json.dumps(turn.model_dump())


def _call_key(call: Mapping[str, Any]) -> str:
    return json.dumps([call["tool"], call.get("args") or {}], sort_keys=True)


def _finished(turn: OracleTurn, made: Mapping[str, int]) -> set[str]:
    done: set[str] = set()
    for index, stage in enumerate(turn.stages):  # dependencies come first
        if made[stage.id] == len(stage.calls) and set(turn.dependencies(stage, index)) <= done:
            done.add(stage.id)
    return done


# -- aimegraph


def planner_sight(task: Task, turn_index: int) -> str:
    """What aimegraph's planner has seen before it plans turn ``turn_index``, as far as
    it is known before the run: the goals so far."""
    return "\n".join(task.goals[: turn_index + 1])


def planner_writes(stage: OracleStage, turn: OracleTurn, sight: str) -> dict[str, Any] | None:
    """The stage as a tool step (``TaskSpec.call``), when its planner could write it:
    one call whose arguments read no output and whose literals its ``sight`` shows (or
    a note derives), and whose output is the stage's result (or whose result nothing
    uses). A ``$`` in them is written ``$$`` (a tool step's references)."""
    used = f"{{stage:{stage.id}}}" in json.dumps(turn.model_dump())
    if len(stage.calls) != 1 or (used and stage.result.strip() != LAST):
        return None
    return _planned_call(stage.calls[0], sight)


def _planned_call(call: Mapping[str, Any], sight: str) -> dict[str, Any] | None:
    args = call.get("args") or {}
    if LAST in json.dumps(args) or STAGE.search(json.dumps(args)):
        return None
    if unseen(call_literals(str(call["tool"]), args), sight, call_notes(call)):
        return None
    return {"tool": call["tool"], "args": dollars_escaped(args)}


def dollars_escaped(value: Any) -> Any:
    """A tool step's arguments: a ``$`` is written ``$$`` (a reference otherwise)."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [dollars_escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: dollars_escaped(v) for k, v in value.items()}
    return value


def planned_bundles(task: Task) -> list[str]:
    """The bundles a planner names for the actors of ``task``: those the suite task
    needs as a whole, which its text says (the files to read or write, the figures to
    compute); the planner cannot know from the text alone which stage makes which
    call, so every actor of the task gets them all."""
    assert task.oracle is not None
    tools = {str(c["tool"]) for t in task.oracle.turns for s in t.stages for c in s.calls}
    return sorted({_BUNDLE_OF_TOOL.get(tool, "custom") for tool in tools})


def stage_steps(stage: OracleStage) -> list[dict[str, Any]]:
    """An actor's replies for ``stage``: its calls, one per reply, the task ending in
    the reply that does the last work where a real model could end it there. A result
    that is the last output itself is ``submit_result`` beside the last call with an
    empty summary (the output is handed back); one the caller knows before the call
    answers (what a file write did) is submitted beside it; one that needs the output
    (a summary of what was read or run) is a plain answer once the output is in."""
    calls = [
        {"tool": call["tool"], "args": rename(call.get("args") or {}, "dep")}
        for call in stage.calls
    ]
    result = rename(stage.result, "dep")
    if not calls:
        return [_submit(result)]
    *work, last = calls
    if result == LAST:
        return [*work, {"calls": [last, _submit("")]}]
    if LAST not in result and last["tool"] in _WRITES:
        return [*work, {"calls": [last, _submit(result)]}]
    return [*calls, {"text": result}]


def _submit(summary: str) -> dict[str, Any]:
    return {"tool": "submit_result", "args": {"status": "completed", "summary": summary}}


@dataclass(frozen=True)
class _Planning:
    """How the oracle's planner writes its tasks."""

    tool_steps: bool = False
    """Split a multi-call stage into tool steps where the planner could write each."""
    actors_only: bool = False
    """No tool steps at all: every stage is an actor's task."""
    every_bundle: bool = False
    """Every actor task names every bundle the ReAct loop's tools come from."""


def _task_spec(
    turn: OracleTurn,
    index: int,
    stage: OracleStage,
    bundles: list[str],
    planning: _Planning,
    sight: str,
) -> dict[str, Any]:
    """The planner's task for a stage: a tool step when its planner could write it
    (:func:`planner_writes`), else an actor's task with ``bundles`` (the stage's own
    ``bundles`` when the oracle names them)."""
    task = {
        "id": stage.id,
        "title": stage.title,
        "description": stage.title,
        "dependencies": turn.dependencies(stage, index),
    }
    known = None if planning.actors_only else planner_writes(stage, turn, sight)
    if known is not None:
        return task | {"call": known}
    return task | {"tool_bundles": bundles if planning.every_bundle else stage.bundles or bundles}


def _tool_steps(
    turn: OracleTurn, index: int, stage: OracleStage, sight: str
) -> list[dict[str, Any]] | None:
    """``stage`` as tool steps: one planned task per call, each written by the planner,
    so no actor reads a tool's output. ``None`` when that cannot play the stage: no
    calls, a call its planner could not write, a result other than the last output."""
    planned = [_planned_call(call, sight) for call in stage.calls]
    if not stage.calls or None in planned or stage.result != LAST:
        return None
    # The last call's task carries the stage's id: later stages and the answer read it.
    ids = [f"{stage.id}-call{n}" for n in range(1, len(stage.calls))] + [stage.id]
    return [
        {
            "id": task_id,
            "title": f"{stage.title}: {call['tool']}",
            "description": stage.title,
            "dependencies": turn.dependencies(stage, index) if n == 0 else [ids[n - 1]],
            "call": call,
        }
        for n, (task_id, call) in enumerate(zip(ids, planned, strict=True))
        if call is not None
    ]


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
    answer (the typed object for a typed answer). With ``tool_steps`` the plan splits a
    stage of several calls into tool steps where its planner could write each; with
    ``actors_only`` no stage is a tool step; with ``every_bundle`` every actor task
    names the bundles of every tool the ReAct loop is bound."""
    if task.oracle is None:
        raise OracleError(f"task {task.id!r} has no oracle replies")
    planning = _Planning(tool_steps and not actors_only, actors_only, every_bundle)
    bundles = planned_bundles(task)
    if every_bundle:  # the loop's tools: the built-in work tools and the application's
        bundles = sorted({*_BUNDLE_OF_TOOL.values(), *bundles})
    planner, actors, reporter = [], {}, []
    for turn_index, turn in enumerate(task.oracle.turns):
        sight = planner_sight(task, turn_index)
        specs: list[dict[str, Any]] = []
        for index, stage in enumerate(turn.stages):
            steps = _tool_steps(turn, index, stage, sight) if planning.tool_steps else None
            if steps is not None:
                specs += steps
                continue
            specs.append(_task_spec(turn, index, stage, bundles, planning, sight))
            if "call" not in specs[-1]:
                actors[stage.id] = stage_steps(stage)
        planner.append({"rationale": "One task per stage of the work.", "tasks": specs})
        if not solve:
            reporter.append({"text": UNSOLVED_ANSWER})
        elif turn.structured is not None and task.answer_schema is not None:
            # A call of the answer's tool, as native structured output binds it: an
            # entry that is the object itself would be read as a step when a field
            # is named like one (error, text, tool).
            answer = rename(turn.structured, "result")
            reporter.append({"tool": task.answer_schema["title"], "args": answer})
        else:
            reporter.append({"text": rename(turn.answer or "", "result")})
    return {
        "name": f"oracle-{task.id}",
        "goal": task.goals[0],
        # Its turns are played in order in one process, whatever the later goals say.
        "any_goal": True,
        "planner": planner,
        "actors": actors,
        "reporter": reporter,
    }
