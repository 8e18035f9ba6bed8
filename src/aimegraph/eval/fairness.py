"""The first check of the knowledge rule (:mod:`aimegraph.eval.knowledge`), made by the
eval harness before stand-ins play a suite: every oracle call, as each system plays it
(:mod:`aimegraph.eval.oracle_plays`), uses only what its caller has seen, so a suite
whose oracle is clairvoyant is refused before a figure rests on it. (An oracle that
counts its breaches instead, a public benchmark's ground truth, is left to the run.)

What a caller has seen is followed as the run would show it: the goals; the text of
a read of one of the task's files (the real ``read_file`` and ``list_dir`` over a
scratch copy); any other output only at run time (a literal only such an output could
show is left to the run-time check, :func:`aimegraph.eval.oracle.refuse_unseen`).
aimegraph's actor sees its dependencies' results and its own outputs, never another
task's; the ReAct loop sees its whole conversation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aimegraph.eval.knowledge import Literal, Sight, StaticReads, call_literals, unseen
from aimegraph.eval.oracle_plays import (
    LAST,
    STAGE,
    call_notes,
    planner_sight,
    planner_writes,
    react_turns,
)
from aimegraph.eval.suite import OracleStage, Suite, Task

__all__ = ["Clairvoyance", "clairvoyance_problem", "clairvoyant_calls", "derived_notes"]


@dataclass(frozen=True)
class Clairvoyance:
    """A call that uses a literal its caller has not seen."""

    task: str
    caller: str  # "aimegraph's planner", "aimegraph's actor", "the ReAct loop"
    stage: str
    call: int  # the call's index in its stage
    tool: str
    literal: Literal

    def describe(self) -> str:
        return (
            f"task {self.task!r}, stage {self.stage!r}, call {self.call + 1} ({self.tool}): "
            f"{self.literal.describe()} is in nothing {self.caller} has seen"
        )


def clairvoyance_problem(suite: Suite) -> str | None:
    """Why ``suite`` is refused under the knowledge rule, in one line (None: it is fair):
    its figures would credit a stand-in with what no real model could know."""
    files = {src: suite.file_path(src) for task in suite.tasks for src in task.files.values()}
    found = clairvoyant_calls(suite.tasks, files)
    if not found:
        return None
    listed = "; ".join(c.describe() for c in found[:3])
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    return (
        f"an oracle uses what its caller has not seen (the knowledge rule): {listed}{more}. "
        "Add the read that would show it before the call (read_file of the file it comes "
        "from), or note how the caller works it out: derived: {LITERAL: HOW} on the call"
    )


def derived_notes(tasks: Sequence[Task]) -> int:
    """How many ``derived`` notes the oracles of ``tasks`` carry (a report counts them)."""
    return sum(len(call_notes(call)) for task in tasks for _, _, call in _calls(task))


def clairvoyant_calls(tasks: Sequence[Task], files: Mapping[str, Path]) -> list[Clairvoyance]:
    """Every oracle call of ``tasks`` that breaks the knowledge rule, on either system;
    ``files`` maps each task file's source (as the task names it) to its path."""
    found: list[Clairvoyance] = []
    for task in tasks:
        if task.oracle is None or not task.oracle.refuses_breaches:
            continue
        reads = StaticReads({target: files[source] for target, source in task.files.items()})
        try:
            found += _react(task, reads)
            found += _aimegraph(task, reads)
        finally:
            reads.close()
    return found


def _calls(task: Task) -> Iterator[tuple[OracleStage, int, Mapping[str, Any]]]:
    for turn in task.oracle.turns if task.oracle is not None else ():
        for stage in turn.stages:
            for index, call in enumerate(stage.calls):
                yield stage, index, call


def _refused(
    task: Task, caller: str, stage: OracleStage, index: int, sight: Sight
) -> list[Clairvoyance]:
    """The call's literals ``sight`` does not show (none while it waits on an output
    known only at run time: the run-time check decides then)."""
    call = stage.calls[index]
    tool = str(call["tool"])
    missing = unseen(call_literals(tool, call.get("args") or {}), sight.text, call_notes(call))
    if sight.pending:
        return []
    return [Clairvoyance(task.id, caller, stage.id, index, tool, m) for m in missing]


def _output(reads: StaticReads, call: Mapping[str, Any]) -> str | None:
    return reads.output(str(call["tool"]), call.get("args") or {})


def _react(task: Task, reads: StaticReads) -> list[Clairvoyance]:
    assert task.oracle is not None
    found: list[Clairvoyance] = []
    sight = Sight()
    turns = task.oracle.turns
    for number, replies in enumerate(react_turns(turns)):
        # An earlier turn's answer holds results known only at run time.
        sight = sight.seeing(task.goals[number], *([None] if number else []))
        for reply in replies:
            for stage, index in reply:  # a reply's calls do not see each other's outputs
                found += _refused(task, "the ReAct loop", stage, index, sight)
            sight = sight.seeing(*(_output(reads, stage.calls[index]) for stage, index in reply))
    return found


def _aimegraph(task: Task, reads: StaticReads) -> list[Clairvoyance]:
    assert task.oracle is not None
    found: list[Clairvoyance] = []
    for number, turn in enumerate(task.oracle.turns):
        planned = planner_sight(task, number)
        results: dict[str, str | None] = {}
        for index, stage in enumerate(turn.stages):
            step = planner_writes(stage, turn, planned)
            if step is not None:  # a tool step: its output is its result
                results[stage.id] = _output(reads, step)
                continue
            sight = Sight(planned, pending=number > 0).seeing(
                *(results[dep] for dep in turn.dependencies(stage, index))
            )
            outputs: list[str | None] = []
            for call_index, call in enumerate(stage.calls):
                found += _refused(task, "aimegraph's actor", stage, call_index, sight)
                outputs.append(_output(reads, call))
                sight = sight.seeing(outputs[-1])
            results[stage.id] = _result(stage, outputs, results)
    return found


def _result(
    stage: OracleStage, outputs: Sequence[str | None], results: Mapping[str, str | None]
) -> str | None:
    """The stage's result as far as it is known before the run."""
    last = outputs[-1] if outputs else ""
    if LAST in stage.result and last is None:
        return None
    used = STAGE.findall(stage.result)
    if any(results.get(dep) is None for dep in used):
        return None
    text = stage.result.replace(LAST, last or "")
    return STAGE.sub(lambda m: results.get(m.group(1)) or "", text)
