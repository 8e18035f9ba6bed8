"""The states of the role subgraphs. Keys shared with AimeState carry the same
reducers, so a subgraph used as a node merges straight into the parent."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from aimegraph.state.aime_state import ActorInput
from aimegraph.state.models import (
    MemberResult,
    ProgressUpdate,
    RunStatus,
    Span,
    Task,
    TaskResult,
    Usage,
    Verdict,
)
from aimegraph.state.reducers import add_usage, merge_facts, merge_tasks


class PlannerInput(TypedDict, total=False):
    """What the planner reads. ``usage`` comes in as the run's usage so far (the
    planner's budget counts it); the subgraph replaces it with its own share, which
    is what it hands back, so that the parent's reducer does not count the run's
    usage twice."""

    goal: str
    messages: Annotated[list[AnyMessage], add_messages]
    tasks: Annotated[dict[str, Task], merge_tasks]
    notes: Annotated[list[str], operator.add]
    verdict: Verdict | None
    replan_reason: str | None
    replans: int
    status: RunStatus
    facts: Annotated[dict[str, str], merge_facts]
    prompt_version: str | None
    conversation: str
    usage: Usage
    run_started_at: float
    # A predefined plan, used instead of asking the model (see AimeInput).
    plan: Any


class PlannerOutput(TypedDict, total=False):
    goal: str
    tasks: Annotated[dict[str, Task], merge_tasks]
    status: RunStatus
    reason: str | None
    # The planner's own calls (a last value: the draft node keeps the total).
    usage: Usage
    plan_rationale: str
    replan_reason: str | None
    replans: int
    steps: int
    verdict: Verdict | None
    final_answer: str | None
    # The first plan's answer, when it answered the goal instead of planning work.
    direct_answer: str | None
    # A plan awaiting approval: the changed tasks (``proposal``) and the plan as
    # drafted (a plain dict, so checkpoints hold only data). Both are None once
    # the plan is committed; a caller that approves plans itself reads them.
    proposal: dict[str, Task] | None
    draft: dict[str, Any] | None
    # None once a predefined plan is taken: it is used once.
    plan: Any
    # When the planner's model calls ran (the draft steps), for the run's timeline.
    spans: Annotated[list[Span], operator.add]


class PlannerState(PlannerInput, PlannerOutput, total=False):
    """``plan_error``, ``model_failed``, ``repairs`` and ``approval_error`` are the
    subgraph's own; ``usage_before`` is the run's usage when the planner started;
    ``plan_given``: the draft is a predefined plan, not the model's."""

    plan_error: str | None
    model_failed: bool
    repairs: int
    approval_error: str | None
    memories: list[str]
    usage_before: Usage
    plan_given: bool


class ActorOutput(TypedDict, total=False):
    tasks: Annotated[dict[str, Task], merge_tasks]
    updates: Annotated[list[ProgressUpdate], operator.add]
    usage: Annotated[Usage, add_usage]
    facts: Annotated[dict[str, str], merge_facts]


class MemberOutput(TypedDict, total=False):
    """What the actor graph hands back as a team member: its turn, not the task."""

    members: Annotated[list[MemberResult], operator.add]
    usage: Annotated[Usage, add_usage]
    facts: Annotated[dict[str, str], merge_facts]


class ActorState(ActorInput, ActorOutput, total=False):
    """One task's ReAct loop. ``result`` is set by ``submit_result`` (or by the
    loop's end); ``error`` holds a model failure."""

    messages: Annotated[list[AnyMessage], add_messages]
    tool_names: list[str]
    steps: int
    result: TaskResult | None
    error: str | None
    experience: list[str]
    context_summary: str
    summarised: int
    members: Annotated[list[MemberResult], operator.add]


class VerifierInput(TypedDict, total=False):
    """Only the goal, the conversation before it and the answer (and the replan
    count, and when the run started: the files changed since then are the ones it
    wrote): never the plan."""

    goal: str
    final_answer: str | None
    replans: int
    prompt_version: str | None
    conversation: str
    run_started_at: float


class VerifierOutput(TypedDict, total=False):
    verdict: Verdict | None
    status: RunStatus
    reason: str | None
    replans: int
    replan_reason: str | None
    usage: Annotated[Usage, add_usage]
    # When the verifier's judging ran, for the run's timeline.
    spans: Annotated[list[Span], operator.add]


class VerifierState(VerifierInput, VerifierOutput, total=False):
    pass
