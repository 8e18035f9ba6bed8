"""The shared state of the aime graph (a contract: docs/architecture.md, Contracts)."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from aimegraph.state.models import (
    ProgressUpdate,
    RunStatus,
    Span,
    Task,
    TaskResult,
    Usage,
    Verdict,
)
from aimegraph.state.reducers import add_usage, append_batches, merge_facts, merge_task_batches


class AimeInput(TypedDict, total=False):
    """What a run starts from: a goal, or a conversation whose last human message is one.

    ``status`` is read so that the graph, as a node of an app whose state carries
    the aime keys, knows the thread's last run has finished: a finished status and a
    human message after it start a new run on that message. The earlier turns of
    ``messages``, and how the last run ended (``status``, ``reason``), make the new
    run's view of the conversation.

    ``plan`` is a predefined plan (a ``PlanUpdate``, its dict, or a list of task
    specs; :mod:`aimegraph.state.plans`): validated as the planner's are, it takes
    the place of the planner's next plan, with no model call, and is used once.
    """

    goal: str
    messages: Annotated[list[AnyMessage], add_messages]
    status: RunStatus
    reason: str | None
    plan: Any


class PastRun(TypedDict, total=False):
    """A finished run of a thread, archived in ``runs`` when a new request starts
    the next run there: its goal, outcome, plan (``tasks``), progress updates,
    usage, and the times of its model calls (``spans``) and start."""

    goal: str
    status: RunStatus
    reason: str | None
    final_answer: str | None
    verdict: Verdict | None
    tasks: dict[str, Task]
    updates: list[ProgressUpdate]
    usage: Usage
    prompt_version: str | None
    spans: list[Span]
    run_started_at: float


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
    # The current run's usage (the run budgets count it); a new run on the thread
    # starts it at zero and keeps the old one in its ``runs`` record.
    usage: Annotated[Usage, add_usage]
    # The thread's earlier runs, oldest first (see ``thread_usage`` for totals).
    runs: Annotated[list[PastRun], DeltaChannel(append_batches, list)]
    # Working memory: facts actors remember, merged by key.
    facts: Annotated[dict[str, str], merge_facts]
    # The prompt version the run started with: the id the
    # graph's prompt source gives its texts by; set at the run's start, kept on resume.
    prompt_version: str | None
    # When the current run's planner, reporter and verifier calls ran (the tasks
    # carry their own times): with them, aimegraph.state.run_timeline draws the run.
    spans: Annotated[list[Span], DeltaChannel(append_batches, list)]
    # The typed final answer (build_aime_graph(response_format=...)): an instance of
    # the pydantic model, or a dict for a JSON schema; None until the reporter
    # writes one, and when the reply never fit the format.
    structured_response: Any


EscalationTrigger = Literal["plan", "replans", "task_failed", "verifier"]


class Escalation(TypedDict):
    """Why the run waits for a human instead of ending (``AimeConfig.escalate``): what
    ran out (``trigger``: ``plan`` repairs, ``replans``, a ``task_failed`` for good,
    the ``verifier`` rejecting), the ``reason``, the failed tasks' ids, and the
    ``status`` the run ends with if the human gives up."""

    trigger: EscalationTrigger
    reason: str
    failed: list[str]
    status: RunStatus


class InputScreen(TypedDict):
    """What the input guardrails found in the goal: the ``tripwire`` (why it is
    blocked), or the ``goal`` as redacted; both None when it passed."""

    tripwire: str | None
    goal: str | None


class AimeState(AimeOutput, total=False):
    """Public keys plus the engine's bookkeeping.

    ``notes`` are human notes for the planner, read at its next call. Between
    steps append one with ``graph.update_state(config, {"notes": [...]},
    as_node="executor")``; while the run waits on an interrupt, send it with the
    answer: ``Command(resume=..., update={"notes": [...]})`` (an ``update_state``
    without ``as_node`` is refused then: it would drop the waiting actors, see
    ``aimegraph.graphs.compiled``). A note for the running actors too goes to the
    run's store instead (``aimegraph.steering.send_note``). ``replan_reason`` says
    why the planner is being called again; ``dispatched`` is the last batch the
    orchestrator sent out; ``steps`` counts orchestration steps;
    ``run_started_at`` (``time.time()``) is when the current run began, for
    ``max_wall_s``; ``proposal`` and ``draft`` hold a plan awaiting approval
    (``approve_plan``), ``approval_error`` why the human's answer (an edit that is
    no valid plan, an answer that is no decision) or new input was not taken;
    ``run_goal`` is the goal the current run works for (``goal`` is what the last
    input said: a request sent while a plan awaits approval is not taken);
    ``escalation`` why the run waits for a human instead of ending;
    ``direct_answer`` the planner's answer when its first plan answered the goal
    instead of planning work (the reporter sends it without a model call).
    ``conversation`` is the run's view of the thread's earlier turns (for the
    planner, the reporter and the verifier), ``recent_turns`` the shorter one its
    actors get; both are made by the intake node when the run starts.
    ``screening`` is set while the input guardrails screen the goal beside the first
    planner call, ``input_screen`` holds what they found (see
    :mod:`aimegraph.nodes.guarding`).

    A thread holds one run at a time. A new request on a thread whose run has
    finished (``graph.invoke({"messages": [HumanMessage(...)]}, same_config)``, the
    next turn of a chat) starts a new run: a new ``goal``; ``tasks``, ``updates``,
    ``usage`` and the run's counters start afresh, so the run budgets apply to each
    run; the finished run is appended to ``runs``. ``thread_usage(state)`` gives
    the thread's totals. In a parent app whose state extends this class and has
    the aime graph as a node, the parent's own reducers merge each run's output:
    its ``usage`` adds up every turn's usage (the thread total) and its ``tasks``
    merge every turn's tasks by id (declare ``tasks: dict[str, Task]`` in the
    parent's state to keep only the latest plan).
    """

    notes: Annotated[list[str], operator.add]
    replan_reason: str | None
    dispatched: list[str]
    steps: int
    plan_rationale: str
    run_started_at: float
    proposal: dict[str, Task] | None
    draft: dict[str, Any] | None
    approval_error: str | None
    run_goal: str | None
    conversation: str
    recent_turns: str
    escalation: Escalation | None
    direct_answer: str | None
    # A predefined plan, until the planner has taken it (see AimeInput).
    plan: Any
    screening: bool
    input_screen: InputScreen | None


def thread_usage(state: Mapping[str, Any]) -> Usage:
    """A thread's usage over all its runs: the archived ``runs`` plus the current one."""
    total = state.get("usage") or Usage()
    for run in state.get("runs") or ():
        total = total + (run.get("usage") or Usage())
    return total


class ActorInput(TypedDict):
    """What the orchestrator ``Send``s to one executor."""

    goal: str
    task: Task
    dependency_results: dict[str, TaskResult]
    llm_call_budget: NotRequired[int | None]
    # The run's prompt version (the actor's prompts are looked up by it).
    prompt_version: NotRequired[str | None]
    # When the run started (``time.time()``): workspace files changed since then are
    # the run's artifacts (the task check inspects them).
    run_started_at: NotRequired[float | None]
    # The run's facts when the task was dispatched; the actor's own ``remember``
    # calls go to ``facts``, so it hands back only what it wrote.
    known_facts: NotRequired[dict[str, str]]
    # The newest earlier turns of the conversation (the run's ``recent_turns``).
    conversation: NotRequired[str]
    # Set when the actor is a team member (aimegraph.teams): its unit's name, its
    # turn in the team, and the team's brief appended to the task message.
    member: NotRequired[str]
    turn: NotRequired[int]
    member_role: NotRequired[str]
    brief: NotRequired[str]
