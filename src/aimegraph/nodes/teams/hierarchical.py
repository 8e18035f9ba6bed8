"""The hierarchical team mode: the lead splits the task and integrates the members' parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.runnables import Runnable
from langgraph.graph import START
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel, ConfigDict, Field

from aimegraph.models.calls import LLM_RETRY_POLICY
from aimegraph.nodes.dual import Steps, model_node
from aimegraph.nodes.teams.common import (
    TeamBuilder,
    TeamParts,
    TeamState,
    _ask_team,
    _blocked,
    _no_turn,
    _render,
    _roster,
    _task_fields,
    _team_metadata,
    _turn,
    _turns,
)
from aimegraph.nodes.types import Node
from aimegraph.prompts import teams as team_prompts
from aimegraph.state import (
    TaskResult,
)
from aimegraph.state.models import Id, Text


class Part(BaseModel):
    """One member's part of the lead's split."""

    model_config = ConfigDict(extra="ignore")

    member: Id = Field(description="The member's name.")
    instruction: Text = Field(description="What this member must do and hand back.")


class Delegation(BaseModel):
    """The lead's split of the task."""

    model_config = ConfigDict(extra="ignore")

    parts: list[Part] = Field(default_factory=list, max_length=8)


def _make_split_node(parts: TeamParts) -> Runnable[TeamState, Command]:
    """The lead splits the task among the other members (a structured call, awaited
    under ``ainvoke``)."""

    def split(state: TeamState, runtime: Runtime[Any]) -> Steps[Command]:
        if _blocked(parts, state):
            return Command(goto="finish")
        task = state["task"]
        team = task.team
        assert team is not None
        lead, done = team.members[0], _turns(state)
        others = [m for m in dict.fromkeys(team.members[1:]) if m != lead]
        delegations = state.get("delegations", 0) + 1
        if not others:
            alone = team_prompts.ALONE.format(reason="it has no other members")
            return Command(goto=_turn(parts, state, lead, alone, role="lead"))
        previous = [t for t in done if t.role == "part"]
        reply = yield from _ask_team(
            parts,
            runtime,
            parts.chat_of[lead],
            Delegation,
            team_prompts.LEAD_SYSTEM.format(members=_roster(parts, others)),
            team_prompts.LEAD_TASK.format(
                **_task_fields(task),
                goal=state["goal"],
                criteria=task.completion_criteria or "the task is done",
                previous=team_prompts.LEAD_PREVIOUS.format(results=_render(previous))
                if previous
                else "",
            ),
            task_id=task.id,
            member=lead,
        )
        assigned: dict[str, str] = {}
        for part in reply.value.parts if reply.value is not None else []:
            if part.member in others and part.member not in assigned:
                assigned[part.member] = part.instruction
        update = {"usage": reply.usage, "delegations": delegations, "parts_sent": len(assigned)}
        spent = reply.usage.llm_calls
        if not assigned:
            reason = reply.error or f"the split named none of {others}"
            alone = team_prompts.ALONE.format(reason=reason)
            return Command(
                goto=_turn(parts, state, lead, alone, role="lead", spent=spent), update=update
            )
        sends = [
            _turn(
                parts,
                state,
                member,
                team_prompts.PART.format(lead=lead, instruction=instruction),
                role="part",
                share=len(assigned),
                spent=spent,
            )
            for member, instruction in assigned.items()
        ]
        return Command(goto=sends, update=update)

    return model_node(split, name="split", metadata=_team_metadata)


def _make_review_node(parts: TeamParts) -> Node[TeamState]:
    """After the parts: split again when some failed and rounds are left, else the
    lead integrates."""

    def review(state: TeamState, runtime: Runtime[Any]) -> Command:
        team = state["task"].team
        assert team is not None
        done = [t for t in _turns(state) if t.role == "part"]
        latest = done[-state.get("parts_sent", 0) :] if state.get("parts_sent") else []
        failed = any(t.status == "failed" for t in latest)
        if failed and state.get("delegations", 0) < team.max_rounds and not _blocked(parts, state):
            return Command(goto="split")
        if _blocked(parts, state):
            return Command(goto="finish")
        integrate = team_prompts.INTEGRATE.format(results=_render(done))
        return Command(goto=_turn(parts, state, team.members[0], integrate, role="lead"))

    return review


def _after_hierarchical_turn(state: TeamState) -> Literal["review", "finish"]:
    turns = _turns(state)
    return "finish" if turns and turns[-1].role == "lead" else "review"


def conclude(parts: TeamParts, state: TeamState) -> TaskResult:
    done = _turns(state)
    leads = [t for t in done if t.role == "lead"]
    if not leads:
        return _no_turn(parts, state)
    lead = leads[-1]
    if lead.status == "failed":
        return TaskResult(
            status="failed",
            summary=f"The lead, {lead.member}, could not integrate the parts: {lead.summary}",
        )
    return TaskResult(status="completed", summary=lead.summary, artifacts=lead.artifacts)


def wire(builder: TeamBuilder, parts: TeamParts, nodes: Sequence[str]) -> None:
    """The lead's ``split`` sends the parts; ``review`` splits again or has the lead integrate."""
    builder.add_node(
        "split",
        _make_split_node(parts),
        destinations=(*nodes, "finish"),
        retry_policy=LLM_RETRY_POLICY,
    )
    builder.add_node("review", _make_review_node(parts), destinations=("split", *nodes))
    builder.add_edge(START, "split")
    for node in nodes:
        builder.add_conditional_edges(node, _after_hierarchical_turn, ["review", "finish"])
