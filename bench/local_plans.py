"""Plan drafts from the bundled Gemma 3 270M under grammar-constrained decoding.

The planner's real prompt goes to the in-process local model (``resolve_model("local")``,
structured output through a forced function call, i.e. JSON constrained by a grammar built
from the schema). Each goal is drafted twice, once with today's bounded ``PlanUpdate``
schema (every string and list has a maximum) and once with the unbounded schema the engine
used before (the baseline, kept here only): a draft counts when it parses, validates and
applies to an empty progress list. Needs the ``[local]`` extra: the full bench runs it;
``python -m bench --only local_plans``.
"""

from __future__ import annotations

import importlib.util
import time

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from aimegraph.models.calls import invoke_structured
from aimegraph.models.resolve import resolve_model
from aimegraph.prompts import planner as prompts
from aimegraph.state import PlanError, PlanUpdate, apply_plan, plan_update_schema
from aimegraph.tools import default_registry
from bench.common import Headline, SectionResult, Table, fmt_s, skipped, workspace

GOALS = (
    "What is 17 times 23? Reply with the number.",
    "Read notes.txt and list the three most frequent words.",
    "Write a haiku about autumn into poem.txt.",
    "Compute the mean of the numbers in data.csv and save it to mean.txt.",
)
MAX_TASKS = 3


class UnboundedTaskSpec(BaseModel):
    """The baseline: ``TaskSpec`` as it was before the bounds (no maxima, all optional
    fields still optional)."""

    id: str
    title: str
    description: str = ""
    dependencies: list[str] = Field(default_factory=list)
    completion_criteria: str = ""
    tool_bundles: list[str] = Field(default_factory=list)
    persona: str = ""
    parent_id: str | None = None


class UnboundedPlanUpdate(BaseModel):
    """The baseline ``PlanUpdate``: rationale required, lists and strings unbounded."""

    rationale: str
    tasks: list[UnboundedTaskSpec] = Field(default_factory=list)
    drop: list[str] = Field(default_factory=list)


def _draft(model: object, schema: type[BaseModel], goal: str, bundles: str) -> tuple[bool, str]:
    messages = [
        SystemMessage(prompts.SYSTEM.format(max_tasks=MAX_TASKS, bundles=bundles)),
        HumanMessage(
            prompts.CONTEXT.format(
                goal=goal,
                conversation="",
                replans=0,
                max_replans=1,
                checklist="(no tasks yet)",
                sections="",
            )
        ),
    ]
    reply = invoke_structured(model, schema, messages, role="planner", mode="native", retries=0)  # type: ignore[arg-type]
    if reply.value is None:
        return False, reply.error or "no value"
    try:
        plan = PlanUpdate.model_validate(reply.value.model_dump())
        apply_plan({}, plan, max_tasks=MAX_TASKS)
    except (PlanError, ValueError) as exc:
        return False, f"invalid plan: {exc}"
    if not plan.tasks:
        return False, "an empty plan"
    return True, "ok"


def run(quick: bool) -> SectionResult:
    if importlib.util.find_spec("llama_cpp") is None:
        return skipped("local_plans", "llama-cpp-python is missing: pip install 'aimegraph[local]'")
    goals = GOALS[:1] if quick else GOALS
    model = resolve_model("local")
    with workspace() as ws:
        bundles = default_registry(ws).describe()
        table = Table(
            "Plan drafts from the bundled Gemma 3 270M (grammar-constrained structured output)",
            ["schema", "drafts", "parse and validate", "median s per draft", "failures seen"],
        )
        metrics: dict[str, float] = {}
        for name, schema in (
            ("bounded (today)", plan_update_schema(MAX_TASKS)),
            ("unbounded (before)", UnboundedPlanUpdate),
        ):
            good, times, problems = 0, [], []
            for goal in goals:
                started = time.perf_counter()
                ok, why = _draft(model, schema, goal, bundles)
                times.append(time.perf_counter() - started)
                good += ok
                if not ok:
                    problems.append(why.replace("UnboundedPlanUpdate", "PlanUpdate")[:90])
            times.sort()
            median = times[len(times) // 2]
            key = name.split()[0]
            metrics[f"{key}_drafts"] = float(len(goals))
            metrics[f"{key}_seconds_per_draft"] = median
            metrics[f"{key}_valid"] = good
            table.add(
                name,
                len(goals),
                f"{good} of {len(goals)}",
                fmt_s(median),
                "; ".join(sorted(set(problems))) or "-",
            )
    headline = Headline(
        f"plan drafts from the bundled Gemma 3 270M, grammar-constrained ({len(goals)} goals)",
        "the same prompts with the unbounded schema used before",
        f"{metrics['bounded_valid']:.0f} of {len(goals)} drafts parse and validate (before: "
        f"{metrics['unbounded_valid']:.0f} of {len(goals)}); "
        f"{fmt_s(metrics['bounded_seconds_per_draft'])} s per draft against "
        f"{fmt_s(metrics['unbounded_seconds_per_draft'])} s",
    )
    return SectionResult("local_plans", [table], metrics, headlines=[headline])
