"""Team modes (BMW Agents' workflow types) as LangGraph subgraphs, one per mode.

Every mode graph takes the executor's input (:class:`ActorInput` whose task has a
``team``) and hands back its output (the task with its result and its members'
turns, progress updates, usage), so it drops into the executor, or any graph, in
place of a single actor. A member's turn is the actor graph itself, built as a
team member (``build_actor_graph(member=True)``) and added as a node: its ReAct
loop, tools, approvals, ``ask_human``, streaming and checkpoints are the single
actor's. Turns are dispatched with ``Send`` and each runs in its own super-step
(parallel ones in the same), so a resumed run never redoes a finished turn.

* ``sequential``: members in order, each handed the previous result; another round
  when the last member fails, up to ``max_rounds``.
* ``joint``: one shared conversation in turns (round robin, or the model picks the
  next speaker with ``speaker="model"``) until a proposal stands that every other
  member has heard without objecting, or ``max_rounds`` rounds.
* ``hierarchical``: the first member leads: it splits the task (a structured call),
  the parts go to members in parallel (``Send``), failed parts are split again up to
  ``max_rounds`` times, and the lead integrates the results in a turn of its own.
* ``broadcast``: every member does the task independently, in parallel; a vote
  (strict majority of the completed results, on the artifact ``answer`` or else the
  summary) or, without a majority, a merge by the model; the agreement is reported.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, TypeVar, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer, Command, Send
from pydantic import BaseModel, ConfigDict, Field

from aimegraph.config import AimeConfig
from aimegraph.memory.nodes import make_task_record_node
from aimegraph.models.calls import LLM_RETRY_POLICY, StructuredReply
from aimegraph.nodes.dual import Steps, ask_structured, model_node
from aimegraph.nodes.factory import artifact_lines
from aimegraph.nodes.types import Node
from aimegraph.nodes.verifier import make_task_check_node
from aimegraph.prompts import teams as team_prompts
from aimegraph.prompts.source import PromptSource
from aimegraph.state import (
    ActorInput,
    ActorOutput,
    MemberResult,
    Task,
    TaskResult,
    TeamMode,
    TeamSpec,
    Usage,
)
from aimegraph.state.models import Id, LongText, ShortText, Text
from aimegraph.streaming import call_metadata
from aimegraph.teams.units import AgentRegistry, UnitActorFactory
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


# --- what the lead and the merge are asked for ---


class Part(BaseModel):
    """One member's part of the lead's split."""

    model_config = ConfigDict(extra="ignore")

    member: Id = Field(description="The member's name.")
    instruction: Text = Field(description="What this member must do and hand back.")


class Delegation(BaseModel):
    """The lead's split of the task."""

    model_config = ConfigDict(extra="ignore")

    parts: list[Part] = Field(default_factory=list, max_length=8)


class NextSpeaker(BaseModel):
    """Who speaks next in a joint team."""

    model_config = ConfigDict(extra="ignore")

    member: Id = Field(description="The next speaker's name.")
    reason: ShortText = Field(default="", description="Why this member, in a few words.")


class Merged(BaseModel):
    """The merge of disagreeing broadcast results."""

    model_config = ConfigDict(extra="ignore")

    summary: LongText = Field(description="The merged result, with its key figures.")
    answer: ShortText = Field(default="", description="The final answer in a few words.")
    agreeing: list[Id] = Field(
        default_factory=list, max_length=8, description="Members whose results agree with it."
    )


# --- the parts every mode graph is built from ---


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


def mode_graph(
    mode: TeamMode, parts: TeamParts, *, checkpointer: Checkpointer = None
) -> CompiledStateGraph[TeamState, AimeConfig, ActorInput, ActorOutput]:
    """Wire ``mode``'s graph from ``parts`` (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown team mode {mode!r}; modes: {', '.join(MODES)}")
    builder = StateGraph(
        TeamState, context_schema=AimeConfig, input_schema=ActorInput, output_schema=ActorOutput
    )
    nodes = list(parts.member_graphs)
    for node, graph in parts.member_graphs.items():
        builder.add_node(node, graph)
    builder.add_node("finish", make_finish_node(parts, _CONCLUDE[mode]))
    if mode == "sequential":
        for source in (START, *nodes):
            builder.add_conditional_edges(source, _route_sequential(parts), [*nodes, "finish"])
    elif mode == "joint":
        builder.add_node(
            "select",
            _make_select_node(parts),
            destinations=tuple(nodes),
            retry_policy=LLM_RETRY_POLICY,
        )
        for source in (START, *nodes):
            builder.add_conditional_edges(source, _route_joint(parts), [*nodes, "select", "finish"])
    elif mode == "broadcast":
        builder.add_conditional_edges(START, _fan_out(parts), [*nodes, "finish"])
        builder.add_node("aggregate", _make_aggregate_node(parts), retry_policy=LLM_RETRY_POLICY)
        for node in nodes:
            builder.add_edge(node, "aggregate")
        builder.add_edge("aggregate", "finish")
    else:
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
    if parts.checker is not None:
        builder.add_node(
            "check",
            make_task_check_node(parts.checker, config=parts.config, prompt_source=parts.prompts),
            retry_policy=LLM_RETRY_POLICY,
        )
        builder.add_edge("finish", "check")
        last = "check"
    else:
        last = "finish"
    if parts.memory:
        # The task's episode, as a single actor's (its lesson after a retry included).
        builder.add_node("record", make_task_record_node(parts.default_chat, parts.config))
        builder.add_edge(last, "record")
        last = "record"
    builder.add_edge(last, END)
    return builder.compile(checkpointer=checkpointer, name=mode)


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


# --- sequential ---


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


def _conclude_sequential(parts: TeamParts, state: TeamState) -> TaskResult:
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


def _no_turn(parts: TeamParts, state: TeamState) -> TaskResult:
    team = state["task"].team
    if team is None:
        why = "the task has no team"
    elif unknown := _unknown(parts, team.members):
        why = f"unknown agent units {unknown}; available: {sorted(parts.node_of)}"
    else:
        why = "its share of the LLM-call budget was used up"
    return TaskResult(status="failed", summary=f"The team could not work on the task: {why}.")


# --- joint ---


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


def _conclude_joint(parts: TeamParts, state: TeamState) -> TaskResult:
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


# --- broadcast ---


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


def _conclude_broadcast(parts: TeamParts, state: TeamState) -> TaskResult:
    return state.get("result") or _no_turn(parts, state)


def _agreement(agreeing: int, of: int, how: str, members: Sequence[str]) -> dict[str, str]:
    return {
        "agreement": f"{agreeing}/{of}",
        "aggregation": how,
        "agreeing": ", ".join(members),
    }


# --- hierarchical ---


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


def _conclude_hierarchical(parts: TeamParts, state: TeamState) -> TaskResult:
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


Conclude = Callable[[TeamParts, TeamState], TaskResult]

_CONCLUDE: dict[str, Conclude] = {
    "sequential": _conclude_sequential,
    "joint": _conclude_joint,
    "hierarchical": _conclude_hierarchical,
    "broadcast": _conclude_broadcast,
}


def make_finish_node(parts: TeamParts, conclude: Conclude) -> Node[TeamState]:
    """Settles the task with the team's result and keeps every member's turn on it."""

    def finish(state: TeamState, runtime: Runtime[Any]) -> dict[str, Any]:
        result = conclude(parts, state)
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
