"""The sequential team mode: members in order, each handed the previous result."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langgraph.graph import START
from langgraph.types import Send

from aimegraph.nodes.teams.common import (
    TeamBuilder,
    TeamParts,
    TeamState,
    _blocked,
    _no_turn,
    _render,
    _turn,
    _turns,
)
from aimegraph.prompts import teams as team_prompts
from aimegraph.state import (
    TaskResult,
)


def _route_sequential(parts: TeamParts) -> Callable[[TeamState], Send | str]:
    def route(state: TeamState) -> Send | str:
        if _blocked(parts, state):
            return "finish"
        team = state["task"].team
        assert team is not None
        order, done = team.members, _turns(state)
        count = len(order)
        rounds = len(done) // count
        if (
            done
            and len(done) % count == 0
            and (done[-1].status == "completed" or rounds >= team.max_rounds)
        ):
            return "finish"
        position = len(done) % count
        # The last good result and what failed after it: a failed member's work is redone.
        good = max((i for i, t in enumerate(done) if t.status == "completed"), default=0)
        handover = (
            team_prompts.SEQUENTIAL_HANDOVER.format(result=_render(done[good:]))
            if done
            else team_prompts.SEQUENTIAL_FIRST
        )
        context = team_prompts.SEQUENTIAL.format(
            order=" -> ".join(order),
            position=position + 1,
            count=count,
            round=team_prompts.SEQUENTIAL_AGAIN.format(round=rounds + 1) if rounds else "",
            handover=handover,
        )
        return _turn(parts, state, order[position], context)

    return route


def conclude(parts: TeamParts, state: TeamState) -> TaskResult:
    done = _turns(state)
    if not done:
        return _no_turn(parts, state)
    last = done[-1]
    if last.status == "failed":
        rounds = -(-len(done) // len(state["task"].team.members))  # type: ignore[union-attr]
        return TaskResult(
            status="failed",
            summary=f"The last member, {last.member}, failed in round {rounds}: {last.summary}",
        )
    artifacts: dict[str, str] = {}
    for turn in done:
        if turn.status == "completed":
            artifacts |= turn.artifacts
    return TaskResult(status="completed", summary=last.summary, artifacts=artifacts)


def wire(builder: TeamBuilder, parts: TeamParts, nodes: Sequence[str]) -> None:
    """Each turn (and the start) routes to the next member or to ``finish``."""
    for source in (START, *nodes):
        builder.add_conditional_edges(source, _route_sequential(parts), [*nodes, "finish"])
