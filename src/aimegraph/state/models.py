"""The records that flow through the aime graph (a contract: docs/architecture.md, Contracts).

All records are frozen pydantic models: a node never mutates what another node
holds, it returns a new copy and the reducers merge it. That is what makes the
parallel executors safe and every checkpoint a faithful snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from itertools import count
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

TaskStatus = Literal["pending", "in_progress", "completed", "failed", "skipped"]
ResultStatus = Literal["completed", "failed"]
RunStatus = Literal[
    "running", "succeeded", "failed", "budget_exhausted", "rejected", "cancelled", "blocked"
]
ENDED_STATUSES: tuple[RunStatus, ...] = (
    "succeeded",
    "failed",
    "budget_exhausted",
    "rejected",
    "cancelled",
    "blocked",
)
"""A run with one of these has ended: nothing to resume; new input starts a new run."""

TERMINAL_TASK_STATUSES: frozenset[str] = frozenset({"completed", "failed", "skipped"})


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _clip(limit: int) -> BeforeValidator:
    def clip(value: object) -> object:
        return value[:limit] if isinstance(value, str) else value

    return BeforeValidator(clip)


# Text the models fill in. The bound is in the JSON schema, so grammar-constrained
# decoding must end the string (small models otherwise ramble to the token limit);
# a longer value from an unconstrained model is clipped rather than refused, which
# would cost a re-ask. llama.cpp's grammar parser rejects (and llama-cpp-python then
# crashes on) a string bound much above 1,000 characters, so none is larger.
Id = Annotated[str, _clip(40), Field(max_length=40)]
ShortText = Annotated[str, _clip(80), Field(max_length=80)]
Text = Annotated[str, _clip(600), Field(max_length=600)]
LongText = Annotated[str, _clip(1000), Field(max_length=1000)]


class TaskResult(_Record):
    """What an actor hands back for its task."""

    status: ResultStatus
    summary: str
    artifacts: dict[str, str] = Field(default_factory=dict)
    tripwire: str | None = None
    """Set when a guardrail stopped the task (a tool call's arguments or output
    tripped it): why. The run then ends ``blocked``; the task is not retried."""


TeamMode = Literal["sequential", "joint", "hierarchical", "broadcast"]


class TeamSpec(BaseModel):
    """A team of agent units doing one task together; also the
    shape the planner model fills in, so unknown fields are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    mode: TeamMode = Field(
        description="sequential: one after another, each given the previous result; "
        "joint: one shared conversation until they agree; hierarchical: the first member "
        "leads, splits the task among the others and integrates; broadcast: all do the "
        "task independently and the results are voted on or merged."
    )
    members: tuple[Id, ...] = Field(
        min_length=1, max_length=8, description="Agent unit names; in hierarchical, the lead first."
    )
    max_rounds: int = Field(
        default=3, ge=1, le=10, description="Rounds at most (passes, turns each, delegations)."
    )
    speaker: Literal["round_robin", "model"] = Field(
        default="round_robin",
        description="joint: members speak in turn, or the model picks the next speaker.",
    )


class MemberResult(_Record):
    """One turn of one team member: what it handed back and how it got there."""

    member: str
    turn: int = 1
    role: str = "member"
    """What the turn was for: ``member`` (a turn of its own), ``part`` (a part a lead
    assigned), ``lead`` (the lead's integration)."""
    status: ResultStatus
    summary: str
    artifacts: dict[str, str] = Field(default_factory=dict)
    transcript: str = ""
    """The tool calls and observations of the turn, cut to a few thousand characters."""
    steps: int = 0
    tripwire: str | None = None
    """Why a tool guardrail stopped the turn, if one did: the team's task fails with it."""


class ToolCallSpec(BaseModel):
    """One tool call the engine makes, with no model call."""

    # A tool step. A string argument may name a dependency's result
    # (aimegraph.state.references): `$t1` its result text, `$t1.key` a field of its
    # JSON result, `$$` a `$`. The planner's prompt says so: the schema, sent with
    # every planner call, does not repeat it.
    model_config = ConfigDict(frozen=True, extra="ignore")

    # A tool's whole name: providers take up to 64 characters or more, and a clipped
    # name would name no tool.
    tool: str = Field(max_length=128)
    args: dict[str, Any] = Field(default_factory=dict)


class Span(_Record):
    """A stretch of a run's time: one tool call of a task (``name`` is the tool's), or
    one planner, reporter or verifier call (``name`` is the role). Times are epoch
    seconds (``time.time()``), as ``run_started_at`` is."""

    name: str
    started_at: float
    ended_at: float

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at


class Task(_Record):
    """One node of the progress list (AIME's hierarchical task list).

    Its timestamps (epoch seconds, ``time.time()``; None until they happen) are those
    of its latest attempt: ``ready_at`` when it could first start (its plan committed
    and its dependencies completed, or its failed attempt ended, for a retry),
    ``started_at`` when its actor was started, ``ended_at`` when it settled;
    ``tool_spans`` times the attempt's tool calls, ``past_attempts`` the failed
    attempts before it."""

    id: str
    title: str
    description: str = ""
    parent_id: str | None = None
    dependencies: tuple[str, ...] = ()
    status: TaskStatus = "pending"
    completion_criteria: str = ""
    tool_bundles: tuple[str, ...] = ()
    persona: str = ""
    # The Agent Skills its actor is shown (all installed ones when it names none).
    skills: tuple[str, ...] = ()
    result: TaskResult | None = None
    attempts: int = 0
    # Agent units: one named unit, or a team; the turns of
    # a team's members (of the latest attempt) are kept with the result.
    agent: str | None = None
    team: TeamSpec | None = None
    members: tuple[MemberResult, ...] = ()
    # A tool step: the engine makes this call instead of running an actor.
    call: ToolCallSpec | None = None
    ready_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    tool_spans: tuple[Span, ...] = ()
    past_attempts: tuple[Span, ...] = ()

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_TASK_STATUSES

    def retried(self) -> Task:
        """This failed task back to pending for another attempt, ready again since its
        failed attempt ended, which joins ``past_attempts``."""
        past = self.past_attempts
        if self.started_at is not None and self.ended_at is not None:
            ran = Span(
                name=f"attempt {self.attempts}", started_at=self.started_at, ended_at=self.ended_at
            )
            past = (*past, ran)
        update = {"status": "pending", "ready_at": self.ended_at, "past_attempts": past}
        return self.model_copy(update=update)


class ProgressUpdate(_Record):
    """AIME's Update_Progress record: what an actor (or the engine) reported."""

    task_id: str
    status: str
    message: str
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class Verdict(_Record):
    """The verifier's verdict on an answer."""

    # Also the verifier model's output schema: unknown fields a model adds (such as a
    # confidence) are ignored, and the texts (sent with every verifier call) say only
    # what the names and the verifier's prompt do not.
    model_config = ConfigDict(frozen=True, extra="ignore")

    passed: bool
    reasoning: Text = Field(default="", description="Citing the answer.")
    issues: list[Text] = Field(
        default_factory=list, max_length=10, description="Problems to fix; none when passed."
    )
    evidence: list[Text] = Field(
        default_factory=list,
        max_length=20,
        description="Citations: 'file:line: what it says' or 'recomputed: expression = value'.",
    )


Price = tuple[float, float] | tuple[float, float, float]
"""USD per million tokens: (input, output), or (input, output, cached input) for
providers that bill prompt-cache reads at their own rate."""

Prices = Mapping[str, Price]
"""Prices by model name (the reply's ``response_metadata["model_name"]``)."""


class _Counts(_Record):
    """What one share of a run's usage counts. ``cached_input_tokens`` are part of
    ``input_tokens`` (read from the provider's prompt cache) and ``reasoning_tokens``
    part of ``output_tokens``, as LangChain's ``usage_metadata`` details report them."""

    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    tool_calls: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def _summed(self, other: _Counts) -> dict[str, Any]:
        return {name: getattr(self, name) + getattr(other, name) for name in _COUNTS}


_COUNTS = tuple(_Counts.model_fields)


class RoleUsage(_Counts):
    """The usage of one role, one task or one team member."""

    def __add__(self, other: RoleUsage) -> RoleUsage:
        return RoleUsage(**self._summed(other))


def _merged(mine: dict[str, RoleUsage], theirs: dict[str, RoleUsage]) -> dict[str, RoleUsage]:
    merged = dict(mine)
    for key, used in theirs.items():
        merged[key] = merged[key] + used if key in merged else used
    return merged


class Usage(_Counts):
    """Resource use of a run; the state reducer adds these up. The totals are what
    the budgets count; ``by_role`` splits them by role (planner, actor, reporter,
    verifier, team, memory, tool_step), ``by_task`` by the task whose actor (or
    team, check, tool step) spent them, ``outside_tasks`` being the rest (planner,
    reporter, final verifier); ``by_member`` splits team tasks' shares by member
    (agent unit name), ``by_model`` counts the calls of named models (the reply's
    model name: in a fallback chain, the member that answered).

    A tool call is a call of a working tool (run, failed or refused): an actor's, a
    tool step's, the inspecting verifier's reads. The actor's reports
    (``update_progress``, ``submit_result``) and ``submit_verdict`` are not."""

    by_role: dict[str, RoleUsage] = Field(default_factory=dict)
    by_task: dict[str, RoleUsage] = Field(default_factory=dict)
    outside_tasks: RoleUsage = Field(default_factory=RoleUsage)
    by_member: dict[str, RoleUsage] = Field(default_factory=dict)
    by_model: dict[str, RoleUsage] = Field(default_factory=dict)
    unknown_tasks: list[str] = Field(default_factory=list)
    """Tasks whose usage is (partly) unknown, as ``unknown_members`` team members: an
    agent unit's agent reported none. Their counts, and the totals, are lower bounds."""
    unknown_members: list[str] = Field(default_factory=list)

    @classmethod
    def of_call(
        cls,
        role: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cached_input_tokens: int = 0,
        reasoning_tokens: int = 0,
        tool_calls: int = 0,
        price: Price | None = None,
        model: str = "",
    ) -> Usage:
        """One model call's usage, counted under ``role`` (and under ``model``, the
        name of the model that answered, when known), with the ``tool_calls`` it made;
        its cost from ``price``."""
        cost = 0.0
        if price is not None:
            cached_price = price[2] if len(price) == 3 else price[0]
            cost = (
                (input_tokens - cached_input_tokens) * price[0]
                + cached_input_tokens * cached_price
                + output_tokens * price[1]
            ) / 1e6
        counts = RoleUsage(
            llm_calls=1,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_input_tokens=cached_input_tokens,
            reasoning_tokens=reasoning_tokens,
            tool_calls=tool_calls,
            cost_usd=cost,
        )
        return cls.of_role(role, counts, model=model)

    @classmethod
    def of_role(cls, role: str, counts: RoleUsage, *, model: str = "") -> Usage:
        """``counts`` spent by ``role`` (and by ``model``, when named) outside any
        task, until :meth:`for_task` attributes them to one."""
        by_model = {model: counts} if model else {}
        return cls(
            **counts.model_dump(), by_role={role: counts}, by_model=by_model, outside_tasks=counts
        )

    def totals(self) -> RoleUsage:
        """The counts without the breakdowns."""
        return RoleUsage(**{name: getattr(self, name) for name in _COUNTS})

    def for_task(self, task_id: str, member: str | None = None, *, known: bool = True) -> Usage:
        """This usage attributed to ``task_id`` (and to the team ``member``): the
        breakdowns by task and member become its totals; unless ``known``, the task's
        (and member's) usage is said to be unknown."""
        counts = self.totals()
        return self.model_copy(
            update={
                "by_task": {task_id: counts},
                "outside_tasks": RoleUsage(),
                "by_member": {member: counts} if member else {},
                "unknown_tasks": [] if known else [task_id],
                "unknown_members": [member] if member and not known else [],
            }
        )

    def counts_nothing(self) -> bool:
        """Whether this record is empty: adding it to another changes nothing."""
        if self.by_role or self.by_task or self.by_member or self.by_model:
            return False
        if self.unknown_tasks or self.unknown_members:
            return False
        return not any(getattr(self, name) for name in _COUNTS)

    def __add__(self, other: Usage) -> Usage:
        # Records are immutable, and most additions (the reducer's, a step's) meet an
        # empty one: it is returned as it is rather than copied.
        if other.counts_nothing():
            return self
        if self.counts_nothing():
            return other
        return Usage(
            **self._summed(other),
            by_role=_merged(self.by_role, other.by_role),
            by_task=_merged(self.by_task, other.by_task),
            outside_tasks=self.outside_tasks + other.outside_tasks,
            by_member=_merged(self.by_member, other.by_member),
            by_model=_merged(self.by_model, other.by_model),
            unknown_tasks=list(dict.fromkeys([*self.unknown_tasks, *other.unknown_tasks])),
            unknown_members=list(dict.fromkeys([*self.unknown_members, *other.unknown_members])),
        )


# --- what the planner model is asked for (a contract: docs/architecture.md) ---
# Unknown fields are ignored and every string and list is bounded.


class TaskSpec(BaseModel):
    """A task as the planner writes it. An id that already exists revises that task."""

    model_config = ConfigDict(extra="ignore")

    # Field descriptions are sent with every planner call: they say only what the
    # names and the planner's prompt do not.
    id: Id = Field(description="e.g. t1")
    title: ShortText
    description: Text = Field(default="", description="What to do and what to hand back.")
    dependencies: list[Id] = Field(
        default_factory=list,
        max_length=12,
        description="Ids of tasks whose results it needs.",
    )
    completion_criteria: Text = ""
    tool_bundles: list[Id] = Field(default_factory=list, max_length=6)
    skills: list[Id] = Field(default_factory=list, max_length=6, description="Skills it needs.")
    persona: ShortText = Field(default="", description="The specialist to do it.")
    parent_id: Id | None = None
    agent: Id | None = Field(default=None, description="The agent unit to do it, if one fits.")
    team: TeamSpec | None = Field(
        default=None, description="A team of agent units to do it together, if it needs one."
    )
    call: ToolCallSpec | None = None


class PlanUpdate(BaseModel):
    """The planner's output: new or revised tasks, and pending tasks to cancel."""

    model_config = ConfigDict(extra="ignore")

    rationale: LongText = ""
    tasks: list[TaskSpec] = Field(default_factory=list)
    drop: list[Id] = Field(
        default_factory=list, max_length=50, description="Ids of pending tasks to cancel."
    )
    no_work_needed: bool = Field(
        default=False,
        description="True only when the goal needs no work at all (a greeting, thanks, "
        "something the conversation already answers): then send no tasks.",
    )
    answer: LongText = Field(
        default="",
        description="Only with no tasks, when the goal needs no work: the reply to the user.",
    )

    def with_tool_calls(self, calls: Sequence[Mapping[str, Any]]) -> PlanUpdate:
        """This plan with one tool step per tool call (``{name, args}``, as a chat
        model's reply carries them): ids ``t1``, ``t2``... not used by its tasks,
        titled by the tool, no dependencies (they run in parallel)."""
        taken = {spec.id for spec in self.tasks}
        free = (f"t{n}" for n in count(1) if f"t{n}" not in taken)
        steps = [
            TaskSpec(
                id=next(free),
                title=str(call["name"]),
                call=ToolCallSpec(tool=str(call["name"]), args=dict(call.get("args") or {})),
            )
            for call in calls
        ]
        return self.model_copy(update={"tasks": [*self.tasks, *steps]})

    @property
    def direct_answer(self) -> str | None:
        """The answer to send as it is: a plan with no tasks that carries one."""
        if self.tasks:
            return None
        return self.answer.strip() or None


_TEAM_FIELDS = ("agent", "team")
_SKILL_FIELDS = ("skills",)


@cache
def plan_update_schema(
    max_tasks: int, *, teams: bool = False, skills: bool = False, first: bool = False
) -> type[PlanUpdate]:
    """``PlanUpdate`` with at most ``max_tasks`` tasks, the schema the planner model
    fills in (a list bound in the schema lets constrained decoding end the list). A
    ``first`` plan (the progress list is empty) must send its task list: with a
    default, a grammar built from the schema lets a model send ``{}``. An empty list
    is still valid there, for a goal that needs no work (``no_work_needed``, or an
    ``answer``); the plan's validation refuses it otherwise. Without ``teams`` (no agent units
    configured) the tasks have no ``agent`` and ``team`` fields, and without ``skills``
    (no Agent Skills installed) no ``skills`` field: a field the model cannot use is
    one more way to go wrong."""
    spec: type[TaskSpec] = TaskSpec
    left_out = (() if teams else _TEAM_FIELDS) + (() if skills else _SKILL_FIELDS)
    if left_out:
        spec = create_model(  # type: ignore[call-overload]
            "TaskSpec",
            __config__=TaskSpec.model_config,
            __doc__=TaskSpec.__doc__,
            **{
                name: (field.annotation, field)
                for name, field in TaskSpec.model_fields.items()
                if name not in left_out
            },
        )
    return create_model(
        "PlanUpdate",
        __base__=PlanUpdate,
        __doc__=PlanUpdate.__doc__,
        tasks=(
            list[spec],  # type: ignore[valid-type]
            Field(..., max_length=max_tasks)
            if first
            else Field(default_factory=list, max_length=max_tasks),
        ),
    )
