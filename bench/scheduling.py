"""Scheduling: wall time of uneven DAGs against their critical path, batch vs eager.

Twenty random DAGs of 8 to 30 tasks (seeded). Each task takes one actor LLM call
that sleeps a log-normal duration (median 0.1 s, sigma 0.8: most tasks short, a
few several times longer, as real LLM tasks are); the planner and the reporter
answer at once and the verifier is off, so the run's floor is the DAG's critical
path (the longest chain of task durations). ``max_parallel`` is above every
DAG's width, so only the scheduler stands between a run and that floor:

* ``batch``: the orchestrator's batch of ``Send``s ends with its slowest member
  (LangGraph's super-step barrier), then the next batch starts;
* ``eager``: each task starts the moment its dependencies complete.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from pathlib import Path

from langchain_core.messages import BaseMessage

from aimegraph import build_aime_graph
from aimegraph.models.offline.scripted import Scenario
from bench.chat_models import LatencyChatModel
from bench.common import (
    Headline,
    SectionResult,
    Table,
    TaskDict,
    config,
    fmt_s,
    fmt_x,
    scenario,
    task,
    thread_config,
    workspace,
)

SCHEDULERS = ("batch", "eager")
MAX_PARALLEL = 32
_TASK_ID = re.compile(r'<task id="([^"]+)"')


class DurationChatModel(LatencyChatModel):
    """The latency model; an actor call sleeps its task's duration, every other
    call answers at once."""

    durations: dict[str, float] = {}

    @property
    def _llm_type(self) -> str:
        return "bench-duration"

    def delay_s(self, messages: list[BaseMessage]) -> float:
        found = _TASK_ID.search("\n".join(m.text for m in messages))
        return self.durations.get(found.group(1), 0.0) if found else 0.0


def random_dag(rng: random.Random, n: int) -> list[TaskDict]:
    """``n`` tasks in plan order, each depending on up to three earlier ones."""
    tasks: list[TaskDict] = []
    for i in range(n):
        earlier = [t["id"] for t in tasks]
        k = min(len(earlier), rng.choice((0, 1, 1, 2, 2, 3)))
        tasks.append(task(f"t{i + 1}", *sorted(rng.sample(earlier, k))))
    return tasks


def critical_path(tasks: list[TaskDict], durations: dict[str, float]) -> float:
    """The longest chain of task durations (plan order is topological)."""
    finish: dict[str, float] = {}
    for t in tasks:
        start = max((finish[d] for d in t["dependencies"]), default=0.0)
        finish[t["id"]] = start + durations[t["id"]]
    return max(finish.values())


def width(tasks: list[TaskDict]) -> int:
    """The most tasks at one depth: a lower bound of the DAG's parallel width."""
    level: dict[str, int] = {}
    for t in tasks:
        level[t["id"]] = 1 + max((level[d] for d in t["dependencies"]), default=0)
    return max(list(level.values()).count(v) for v in set(level.values()))


def run_dag(
    tasks: list[TaskDict], durations: dict[str, float], scheduler: str, ws: Path
) -> tuple[float, int]:
    """Wall seconds and prompt tokens sent of one run of the aime graph over ``tasks``."""
    data = scenario(tasks)
    model = DurationChatModel(scenario=Scenario.model_validate(data), durations=durations)
    cfg = config(
        ws,
        scheduler=scheduler,
        max_parallel=MAX_PARALLEL,
        max_tasks=len(tasks),
        max_steps=1000,
        verify="off",
    )
    graph = build_aime_graph(model, config=cfg)
    start = time.perf_counter()
    out = graph.invoke({"goal": data["goal"]}, thread_config())
    seconds = time.perf_counter() - start
    assert out["status"] == "succeeded", out.get("reason")
    return seconds, model.tokens_sent


def run(quick: bool) -> SectionResult:
    n_dags, sizes = (3, (8, 12)) if quick else (20, (8, 30))
    rng = random.Random(12)
    dags = []
    for _ in range(n_dags):
        tasks = random_dag(rng, rng.randint(*sizes))
        durations = {t["id"]: rng.lognormvariate(mu=-2.303, sigma=0.8) for t in tasks}
        dags.append((tasks, durations))

    ratios: dict[str, list[float]] = {s: [] for s in SCHEDULERS}
    walls: dict[str, list[float]] = {s: [] for s in SCHEDULERS}
    paths: list[float] = []
    tokens: dict[str, int] = dict.fromkeys(SCHEDULERS, 0)
    with workspace() as ws:
        for i, (tasks, durations) in enumerate(dags):
            path = critical_path(tasks, durations)
            paths.append(path)
            # Alternate which scheduler goes first, so neither always runs warm.
            for scheduler in SCHEDULERS if i % 2 == 0 else SCHEDULERS[::-1]:
                wall, sent = run_dag(tasks, durations, scheduler, ws)
                tokens[scheduler] += sent
                walls[scheduler].append(wall)
                ratios[scheduler].append(wall / path)

    table = Table(
        f"Scheduling: {n_dags} random DAGs of {sizes[0]}-{sizes[1]} tasks with log-normal "
        "task durations, wall time / critical path (instant planner and reporter, "
        f"max_parallel={MAX_PARALLEL})",
        [
            "scheduler",
            "median",
            "worst",
            "best",
            "mean wall (s)",
            "mean critical path (s)",
            "prompt tokens per run (mean)",
        ],
    )
    metrics: dict[str, float] = {"dags": n_dags, "mean_critical_path_s": statistics.mean(paths)}
    for scheduler in SCHEDULERS:
        r = ratios[scheduler]
        table.add(
            scheduler,
            fmt_x(statistics.median(r)),
            fmt_x(max(r)),
            fmt_x(min(r)),
            fmt_s(statistics.mean(walls[scheduler])),
            fmt_s(statistics.mean(paths)),
            f"{tokens[scheduler] / n_dags:,.0f}",
        )
        metrics |= {
            f"{scheduler}.median_ratio": statistics.median(r),
            f"{scheduler}.worst_ratio": max(r),
            f"{scheduler}.mean_wall_s": statistics.mean(walls[scheduler]),
        }
    tasks_total = sum(len(t) for t, _ in dags)
    table.notes += [
        f"{tasks_total} tasks in all; each task depends on 0-3 earlier ones; widest level "
        f"{max(width(t) for t, _ in dags)} tasks. Durations: log-normal, median 0.10 s, "
        f"sigma 0.8 (shortest {min(min(d.values()) for _, d in dags):.3f} s, longest "
        f"{max(max(d.values()) for _, d in dags):.2f} s); seeded, the same DAGs for both.",
        "critical path = the longest dependency chain of task durations, the wall time of a "
        "perfect scheduler with free workers and no engine cost. ratio = wall / critical path "
        "(per DAG; median, worst and best over the DAGs). The wall time also holds the planner "
        "and reporter steps and the engine's own cost.",
        "batch: each orchestrator step sends the ready tasks and LangGraph's super-step waits "
        "for the slowest. eager: the executor node starts each task the moment its last "
        "dependency completes (AimeConfig.scheduler, default 'eager').",
    ]
    med = {s: statistics.median(ratios[s]) for s in SCHEDULERS}
    worst = {s: max(ratios[s]) for s in SCHEDULERS}
    headline = Headline(
        f"scheduling, {n_dags} random DAGs of {sizes[0]}-{sizes[1]} tasks with log-normal task "
        "durations",
        "the DAG's critical path; the batch scheduler",
        f"wall / critical path: eager median {fmt_x(med['eager'])}, worst "
        f"{fmt_x(worst['eager'])}; batch median {fmt_x(med['batch'])}, worst "
        f"{fmt_x(worst['batch'])}; {tokens['eager'] / n_dags:,.0f} prompt tokens per run "
        f"(batch {tokens['batch'] / n_dags:,.0f})",
    )
    return SectionResult("scheduling", [table], metrics, headlines=[headline])
