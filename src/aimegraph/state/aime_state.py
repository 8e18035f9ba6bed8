"""The shared state of the aime graph (DESIGN.md section 3, contract)."""

from __future__ import annotations

import operator
from typing import Annotated, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from aimegraph.state.models import ProgressUpdate, RunStatus, Task, TaskResult, Usage, Verdict
from aimegraph.state.reducers import add_usage, append_batches, merge_task_batches


class AimeInput(TypedDict, total=False):
    """What a run starts from: a goal, or a conversation whose last human message is one."""

    goal: str
    messages: Annotated[list[AnyMessage], add_messages]


class AimeOutput(TypedDict, total=False):
    """What a caller reads back (the public keys)."""

    goal: str
    messages: Annotated[list[AnyMessage], add_messages]
    # The two keys that grow with the plan are DeltaChannels: a checkpoint stores
    # only what changed (a full snapshot every 100 updates), so checkpoint bytes
    # per task stay flat as plans grow instead of re-serialising the whole map.
    tasks: Annotated[dict[str, Task], DeltaChannel(merge_task_batches, dict)]
    updates: Annotated[list[ProgressUpdate], DeltaChannel(append_batches, list)]
    verdict: Verdict | None
    final_answer: str | None
    status: RunStatus
    reason: str | None
    replans: int
    usage: Annotated[Usage, add_usage]


class AimeState(AimeOutput, total=False):
    """Public keys plus the engine's bookkeeping.

    ``notes`` are human notes for the planner, read at its next call. Between
    steps append one with ``graph.update_state(config, {"notes": [...]},
    as_node="executor")``; while the run waits on an interrupt, send it with the
    answer: ``Command(resume=..., update={"notes": [...]})`` (an ``update_state``
    then would replace the pending step). ``replan_reason`` says
    why the planner is being called again; ``dispatched`` is the last batch the
    orchestrator sent out; ``steps`` counts orchestration steps.
    """

    notes: Annotated[list[str], operator.add]
    replan_reason: str | None
    dispatched: list[str]
    steps: int
    plan_rationale: str


class ActorInput(TypedDict):
    """What the orchestrator ``Send``s to one executor."""

    goal: str
    task: Task
    dependency_results: dict[str, TaskResult]
    llm_call_budget: NotRequired[int | None]
