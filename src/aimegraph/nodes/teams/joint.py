"""The joint team mode: one shared conversation in turns until a proposal stands."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.runnables import Runnable
from langgraph.graph import START
from langgraph.runtime import Runtime
from langgraph.types import Command, Send
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
    _roster,
    _task_fields,
    _team_metadata,
    _turn,
    _turns,
)
from aimegraph.prompts import teams as team_prompts
from aimegraph.state import (
    MemberResult,
    TaskResult,
    TeamSpec,
)
from aimegraph.state.models import Id, ShortText


class NextSpeaker(BaseModel):
    """Who speaks next in a joint team."""

    model_config = ConfigDict(extra="ignore")

    member: Id = Field(description="The next speaker's name.")
    reason: ShortText = Field(default="", description="Why this member, in a few words.")


def _stance(turn: MemberResult) -> str:
    stance = turn.artifacts.get("stance", "propose").strip().lower()
    return stance if stance in ("agree", "object") else "propose"


def _standing(turns: Sequence[MemberResult]) -> tuple[MemberResult | None, list[MemberResult]]:
    """The latest proposal and the turns after it."""
    for i in range(len(turns) - 1, -1, -1):
        if turns[i].status == "completed" and _stance(turns[i]) == "propose":
            return turns[i], list(turns[i + 1 :])
    return None, []


def _objections(after: Sequence[MemberResult]) -> list[MemberResult]:
    return [t for t in after if t.status == "completed" and _stance(t) == "object"]


def _agreed(
    team_members: Sequence[str], proposal: MemberResult, after: Sequence[MemberResult]
) -> bool:
    """Every other member has had a turn since the proposal and none objected."""
    others = set(team_members) - {proposal.member}
    return not _objections(after) and others <= {t.member for t in after}


def _route_joint(parts: TeamParts) -> Callable[[TeamState], Send | str]:
    def route(state: TeamState) -> Send | str:
        if _blocked(parts, state):
            return "finish"
        team = state["task"].team
        assert team is not None
        done = _turns(state)
        proposal, after = _standing(done)
        if proposal is not None and _agreed(team.members, proposal, after):
            return "finish"
        if len(done) >= len(team.members) * team.max_rounds:
            return "finish"
        if team.speaker == "model" and done:
            return "select"
        return _turn(parts, state, _in_turn(team, done), _joint_context(team, done))

    return route


def _in_turn(team: TeamSpec, done: Sequence[MemberResult]) -> str:
    return team.members[len(done) % len(team.members)]


def _next_unheard(team: TeamSpec, done: Sequence[MemberResult]) -> str:
    """After the last speaker, in order, the first member who has not answered the
    latest proposal (the moderator's suggestion and fallback)."""
    proposal, after = _standing(done)
    heard = {t.member for t in after} | ({proposal.member} if proposal is not None else set())
    order = list(dict.fromkeys(team.members))
    last = order.index(done[-1].member) if done and done[-1].member in order else -1
    rotation = order[last + 1 :] + order[: last + 1]
    return next((m for m in rotation if m not in heard), rotation[0])


def _conversation(done: Sequence[MemberResult]) -> str:
    return "".join(
        team_prompts.JOINT_TURN.format(
            member=t.member,
            stance=_stance(t) if t.status == "completed" else "failed",
            summary=t.summary.strip()[:1500],
        )
        for t in done[-12:]
    )


def _joint_context(team: TeamSpec, done: Sequence[MemberResult]) -> str:
    return team_prompts.JOINT.format(
        order=", ".join(team.members), conversation=_conversation(done) or team_prompts.JOINT_EMPTY
    )


def _make_select_node(parts: TeamParts) -> Runnable[TeamState, Command]:
    """The model picks the next speaker of a joint team (``speaker="model"``); an
    unusable pick falls back to the next member who has not answered the latest
    proposal."""

    def select(state: TeamState, runtime: Runtime[Any]) -> Steps[Command]:
        task = state["task"]
        team = task.team
        assert team is not None
        done = _turns(state)
        default = _next_unheard(team, done)
        members = dict.fromkeys(team.members)
        reply = yield from _ask_team(
            parts,
            runtime,
            parts.default_chat,
            NextSpeaker,
            team_prompts.SPEAKER_SYSTEM.format(members=_roster(parts, members)),
            team_prompts.SPEAKER_TASK.format(
                **_task_fields(task), conversation=_conversation(done), default=default
            ),
            task_id=task.id,
        )
        picked = reply.value.member if reply.value is not None else None
        speaker = picked if picked in members else default
        turn = _turn(parts, state, speaker, _joint_context(team, done), spent=reply.usage.llm_calls)
        return Command(goto=turn, update={"usage": reply.usage})

    return model_node(select, name="select", metadata=_team_metadata)


def conclude(parts: TeamParts, state: TeamState) -> TaskResult:
    done = _turns(state)
    team = state["task"].team
    if not done or team is None:
        return _no_turn(parts, state)
    proposal, after = _standing(done)
    if proposal is None:
        why = _failures(done) or "every turn objected"
        return TaskResult(status="failed", summary=f"No member proposed a result: {why}")
    if objections := _objections(after):
        said = "; ".join(f"{t.member}: {t.summary.strip()[:300]}" for t in objections)
        return TaskResult(
            status="failed",
            summary=f"No agreement in {team.max_rounds} round(s). {proposal.member} proposed: "
            f"{proposal.summary.strip()[:600]}\nObjections: {said}",
        )
    agreeing = 1 + len({t.member for t in after if _stance(t) == "agree"} - {proposal.member})
    artifacts = {k: v for k, v in proposal.artifacts.items() if k != "stance"}
    artifacts["agreement"] = f"{agreeing}/{len(set(team.members))}"
    return TaskResult(status="completed", summary=proposal.summary, artifacts=artifacts)


def wire(builder: TeamBuilder, parts: TeamParts, nodes: Sequence[str]) -> None:
    """Each turn (and the start) routes to the next speaker, the model's pick, or ``finish``."""
    builder.add_node(
        "select",
        _make_select_node(parts),
        destinations=tuple(nodes),
        retry_policy=LLM_RETRY_POLICY,
    )
    for source in (START, *nodes):
        builder.add_conditional_edges(source, _route_joint(parts), [*nodes, "select", "finish"])
