"""What every team mode shares: the team state, the graph parts, turns, the finish node."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, TypeVar, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel

from aimegraph.config import AimeConfig
from aimegraph.models.calls import StructuredReply
from aimegraph.models.steps import CallWrapper
from aimegraph.nodes.actor_factory import UnitActorFactory, artifact_lines
from aimegraph.nodes.dual import Steps, ask_structured
from aimegraph.nodes.types import Node
from aimegraph.prompts import teams as team_prompts
from aimegraph.prompts.source import PromptSource
from aimegraph.state import (
    ActorInput,
    ActorOutput,
    MemberResult,
    Task,
    TaskResult,
    TeamMode,
    Usage,
)
from aimegraph.streaming import call_metadata
from aimegraph.teams.units import AgentRegistry
from aimegraph.tools.progress import settled
from aimegraph.tools.registry import ToolRegistry

MODES: tuple[TeamMode, ...] = get_args(TeamMode)

M = TypeVar("M", bound=BaseModel)


class TeamState(ActorInput, ActorOutput, total=False):
    """A team's work on one task: the members' turns so far, in order."""

    members: Annotated[list[MemberResult], operator.add]
    result: TaskResult | None
    delegations: int
    parts_sent: int


TeamBuilder = StateGraph[TeamState, AimeConfig, ActorInput, ActorOutput]


@dataclass(frozen=True)
class TeamParts:
    """The member graphs (node name -> graph), which node runs each unit's turns,
    and the model of each unit (for the lead's split and the merge)."""

    units: AgentRegistry
    member_graphs: Mapping[str, CompiledStateGraph[Any, Any, Any, Any]]
    node_of: Mapping[str, str]
    chat_of: Mapping[str, BaseChatModel]
    default_chat: BaseChatModel
    config: AimeConfig
    registry: ToolRegistry
    # Applies the task's (or the matched) unit to each actor; the team executor's
    # ``single`` node and its router use it too.
    unit_factory: UnitActorFactory
    checker: BaseChatModel | None = None
    # The graph's prompt source: the task check's verifier prompt (members have theirs).
    prompts: PromptSource | None = None
    memory: bool = False
    """Record the team task's episode in the run's store (``runtime.store``)."""
    checker_wrap: CallWrapper | None = None
    """The verifier's ``wrap_model_call`` middleware, around the task check's calls."""


# --- turns ---


def _turns(state: TeamState) -> list[MemberResult]:
    return list(state.get("members") or [])


def _calls_left(state: TeamState, spent: int = 0) -> int | None:
    """What is left of the task's share of the run's LLM-call budget, if it has one."""
    budget = state.get("llm_call_budget")
    if budget is None:
        return None
    return budget - (state.get("usage") or Usage()).llm_calls - spent


def _blocked(parts: TeamParts, state: TeamState) -> bool:
    """Whether no turn can start: unknown units, or the call budget is used up."""
    left = _calls_left(state)
    team = state["task"].team
    return team is None or _unknown(parts, team.members) != [] or (left is not None and left <= 0)


def _unknown(parts: TeamParts, members: Sequence[str]) -> list[str]:
    return [m for m in dict.fromkeys(members) if m not in parts.node_of]


def _roster(parts: TeamParts, members: Iterable[str]) -> str:
    """The ``{members}`` of a team prompt: each member with its unit's description."""
    return "\n".join(f"- {m}: {parts.units[m].description}" for m in members)


def _team_metadata(state: TeamState) -> dict[str, Any]:
    """The team's own calls (pick, merge, split) carry the task's id in token streams."""
    return call_metadata("team", state)


def _task_fields(task: Task) -> dict[str, str]:
    """The ``<task>`` block's fields of a team prompt."""
    return {"task_id": task.id, "title": task.title, "description": task.description or task.title}


def _ask_team(
    parts: TeamParts,
    runtime: Runtime[Any],
    chat: BaseChatModel,
    schema: type[M],
    system: str,
    prompt: str,
    *,
    task_id: str,
    member: str | None = None,
) -> Steps[StructuredReply[M]]:
    """One of the team's own structured calls (the speaker pick, the merge, the
    lead's split), counted under the role ``team`` and the task (and the ``member``
    who makes it: the lead's split)."""
    reply = yield from ask_structured(
        chat,
        schema,
        [SystemMessage(system), HumanMessage(prompt)],
        role="team",
        config=parts.config.for_run(runtime),
        runtime=runtime,
    )
    return replace(reply, usage=reply.usage.for_task(task_id, member))


def _turn(
    parts: TeamParts,
    state: TeamState,
    member: str,
    context: str,
    *,
    role: str = "member",
    share: int = 1,
    turn: int | None = None,
    spent: int = 0,
) -> Send:
    """The ``Send`` starting ``member``'s next turn, with the team's brief."""
    task = state["task"]
    assert task.team is not None
    number = turn or 1 + sum(t.member == member for t in _turns(state))
    left = _calls_left(state, spent)
    brief = team_prompts.MEMBER.format(
        member=member,
        turn=number,
        mode=task.team.mode,
        team=", ".join(dict.fromkeys(task.team.members)),
        context=context,
    )
    return Send(
        parts.node_of[member],
        ActorInput(
            goal=state["goal"],
            task=task.model_copy(update={"agent": member, "team": None, "members": ()}),
            dependency_results=state.get("dependency_results", {}),
            llm_call_budget=None if left is None else max(1, left // share),
            known_facts=state.get("known_facts") or {},
            conversation=state.get("conversation", ""),
            # The run's prompt version: a member's turn never picks up a newer one.
            prompt_version=state.get("prompt_version"),
            run_started_at=state.get("run_started_at"),
            member=member,
            turn=number,
            member_role=role,
            brief=brief,
        ),
    )


def _render(turns: Sequence[MemberResult]) -> str:
    return "".join(
        team_prompts.RESULT.format(
            member=t.member,
            status=t.status,
            summary=t.summary.strip(),
            artifacts=artifact_lines(t.artifacts),
        )
        for t in turns
    )


def _failures(turns: Sequence[MemberResult]) -> str:
    return "; ".join(
        f"{t.member}: {t.summary.strip()[:300]}" for t in turns if t.status == "failed"
    )


def _no_turn(parts: TeamParts, state: TeamState) -> TaskResult:
    team = state["task"].team
    if team is None:
        why = "the task has no team"
    elif unknown := _unknown(parts, team.members):
        why = f"unknown agent units {unknown}; available: {sorted(parts.node_of)}"
    else:
        why = "its share of the LLM-call budget was used up"
    return TaskResult(status="failed", summary=f"The team could not work on the task: {why}.")


Conclude = Callable[[TeamParts, TeamState], TaskResult]


def make_finish_node(parts: TeamParts, conclude: Conclude) -> Node[TeamState]:
    """Settles the task with the team's result and keeps every member's turn on it."""

    def finish(state: TeamState, runtime: Runtime[Any]) -> dict[str, Any]:
        tripped = next((t for t in _turns(state) if t.tripwire), None)
        result = (
            TaskResult(status="failed", summary=tripped.summary, tripwire=tripped.tripwire)
            if tripped is not None  # a member's tool call tripped a guardrail: the run ends
            else conclude(parts, state)
        )
        task = state["task"].model_copy(update={"members": tuple(_turns(state))})
        team = task.team
        runtime.stream_writer(
            {
                "type": "team",
                "event": result.status,
                "task_id": task.id,
                "mode": team.mode if team is not None else None,
                "turns": [(t.member, t.status) for t in task.members],
                "agreement": result.artifacts.get("agreement"),
            }
        )
        # ``task`` and ``result`` also go to the state, for the per-task check.
        return settled({**state, "task": task}, result, runtime.stream_writer) | {"task": task}

    return finish
