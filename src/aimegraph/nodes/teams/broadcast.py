"""The broadcast team mode: every member does the task in parallel; a vote or a merge."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.runnables import Runnable
from langgraph.graph import START
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, ConfigDict, Field

from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.nodes.dual import Steps, model_node
from aimegraph.nodes.teams.common import (
    TeamBuilder,
    TeamParts,
    TeamState,
    _ask_team,
    _blocked,
    _failures,
    _no_turn,
    _render,
    _task_fields,
    _team_metadata,
    _turn,
    _turns,
)
from aimegraph.prompts import teams as team_prompts
from aimegraph.state import (
    MemberResult,
    TaskResult,
)
from aimegraph.state.models import Id, LongText, ShortText


class Merged(BaseModel):
    """The merge of disagreeing broadcast results."""

    model_config = ConfigDict(extra="ignore")

    summary: LongText = Field(description="The merged result, with its key figures.")
    answer: ShortText = Field(default="", description="The final answer in a few words.")
    agreeing: list[Id] = Field(
        default_factory=list, max_length=8, description="Members whose results agree with it."
    )


def _fan_out(parts: TeamParts) -> Callable[[TeamState], list[Send] | str]:
    def fan_out(state: TeamState) -> list[Send] | str:
        if _blocked(parts, state):
            return "finish"
        members = state["task"].team.members  # type: ignore[union-attr]
        # A unit named twice works twice, independently: its turns are numbered.
        return [
            _turn(
                parts,
                state,
                m,
                team_prompts.BROADCAST,
                share=len(members),
                turn=members[:i].count(m) + 1,
            )
            for i, m in enumerate(members)
        ]

    return fan_out


def _vote_key(turn: MemberResult) -> str:
    answer = turn.artifacts.get("answer") or turn.summary
    return " ".join(answer.split()).casefold().rstrip(".")


def _make_aggregate_node(parts: TeamParts) -> Runnable[TeamState, dict[str, Any]]:
    """Votes on the members' results; without a majority, the model merges them.
    The merge call is awaited under ``ainvoke`` (see :mod:`aimegraph.nodes.dual`)."""

    def aggregate(state: TeamState, runtime: Runtime[Any]) -> Steps[dict[str, Any]]:
        done = _turns(state)
        completed = [t for t in done if t.status == "completed"]
        if not completed:
            failed = TaskResult(status="failed", summary=f"Every member failed: {_failures(done)}")
            return {"result": failed}
        key, votes = Counter(_vote_key(t) for t in completed).most_common(1)[0]
        if votes * 2 > len(completed):
            winner = next(t for t in completed if _vote_key(t) == key)
            agreed = [t.member for t in completed if _vote_key(t) == key]
            summary = winner.summary
            if failures := _failures(done):
                summary += f"\n(Failed members: {failures})"
            artifacts = winner.artifacts | _agreement(len(agreed), len(done), "vote", agreed)
            return {"result": TaskResult(status="completed", summary=summary, artifacts=artifacts)}
        reply = yield from _ask_team(
            parts,
            runtime,
            parts.default_chat,
            Merged,
            team_prompts.MERGE_SYSTEM,
            team_prompts.MERGE_TASK.format(**_task_fields(state["task"]), results=_render(done)),
            task_id=state["task"].id,
        )
        if reply.value is None:
            answers = "; ".join(f"{t.member}: {_vote_key(t)[:200]}" for t in completed)
            why = f"The members disagreed ({answers}) and merging failed: {reply.error}"
            return {"result": TaskResult(status="failed", summary=why), "usage": reply.usage}
        merged = reply.value
        agreeing = [m for m in dict.fromkeys(merged.agreeing) if any(t.member == m for t in done)]
        artifacts = {"answer": merged.answer} if merged.answer else {}
        artifacts |= _agreement(len(agreeing), len(done), "merge", agreeing)
        result = TaskResult(status="completed", summary=merged.summary, artifacts=artifacts)
        return {"result": result, "usage": reply.usage}

    return model_node(aggregate, name="aggregate", metadata=_team_metadata)


def conclude(parts: TeamParts, state: TeamState) -> TaskResult:
    return state.get("result") or _no_turn(parts, state)


def _agreement(agreeing: int, of: int, how: str, members: Sequence[str]) -> dict[str, str]:
    return {
        "agreement": f"{agreeing}/{of}",
        "aggregation": how,
        "agreeing": ", ".join(members),
    }


def wire(builder: TeamBuilder, parts: TeamParts, nodes: Sequence[str]) -> None:
    """The start fans out to every member; their results meet in ``aggregate``."""
    builder.add_conditional_edges(START, _fan_out(parts), [*nodes, "finish"])
    builder.add_node("aggregate", _make_aggregate_node(parts), retry_policy=LLM_RETRY_POLICY)
    for node in nodes:
        builder.add_edge(node, "aggregate")
    builder.add_edge("aggregate", "finish")
