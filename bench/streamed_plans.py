"""Streamed plans: how early the first task starts, and how much sooner the run ends,
when tasks start while the planner's reply still streams in (``stream_plans``).

Twenty seeded 10-task plans (each task a tool step depending on up to two earlier
ones, that sleeps a seeded 0.3-0.8 s). The scripted planner sends its reply at a
fixed pace (``stream_delay_s`` per chunk; a chunk is 16 characters of the plan's
JSON, about four tokens), and takes as long over the reply when it is not streamed.
Each plan runs twice in one process, streaming on and off (alternating which goes
first); the verifier is off and ``max_parallel`` is above the plan's size, so the
only difference is when each task can start.

* time to first task: from the planner call's start to the first task's start,
  over the planner call's duration (the plan's generation time), streaming on;
* wall: the whole run, streaming on over streaming off;
* every run: the same LLM calls both ways, and no task run twice.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from langchain_core.tools import tool

from aimegraph import build_aime_graph
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.streaming import ROLE
from bench.common import Headline, SectionResult, Table, config, fmt_s, fmt_x, workspace

TASKS = 10
CHUNK_DELAY_S = 0.02
MODES = ("on", "off")


class Clock:
    """Start times of the tasks' tool calls and of the planner's model call, in one run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starts: list[tuple[str, float]] = []
        self.plan_start: float | None = None
        self.plan_end: float | None = None


CLOCK = Clock()


@tool
def work(task: str, seconds: float) -> str:
    """Do one task's work (sleeps ``seconds``)."""
    with CLOCK.lock:
        CLOCK.starts.append((task, time.perf_counter()))
    time.sleep(seconds)
    return f"{task} done"


class PlannerTimes(BaseCallbackHandler):
    """When the planner's model call starts and ends (streamed or not)."""

    def __init__(self) -> None:
        self.planner_runs: set[UUID] = set()

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        if (kwargs.get("metadata") or {}).get(ROLE) == "planner":
            self.planner_runs.add(run_id)
            CLOCK.plan_start = CLOCK.plan_start or time.perf_counter()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        if run_id in self.planner_runs:
            CLOCK.plan_end = time.perf_counter()


def plan(rng: random.Random) -> list[dict[str, Any]]:
    """A 10-task plan of tool steps in plan order, each depending on up to two earlier."""
    tasks: list[dict[str, Any]] = []
    for i in range(1, TASKS + 1):
        earlier = [t["id"] for t in tasks]
        deps = sorted(rng.sample(earlier, min(len(earlier), rng.choice((0, 0, 1, 1, 2)))))
        seconds = round(rng.uniform(0.3, 0.8), 2)
        tasks.append(
            {
                "id": f"t{i}",
                "title": f"Work item t{i}",
                "description": f"Produce the partial result t{i} from its inputs.",
                "dependencies": deps,
                "call": {"tool": "work", "args": {"task": f"t{i}", "seconds": seconds}},
            }
        )
    return tasks


def ideal_ratio(tasks: list[dict[str, Any]], generation: float) -> float:
    """The wall ratio of a perfect engine on ``tasks``: each task starts once its spec
    is complete in the reply (the next one begins; the last at its end, the reply sent
    at an even pace over ``generation`` seconds) and its dependencies are done, against
    the plan's generation then its critical path."""
    text = json.dumps({"rationale": "Split the goal into work items.", "tasks": tasks})
    streamed: dict[str, float] = {}
    planned: dict[str, float] = {}
    for i, t in enumerate(tasks):
        seconds = t["call"]["args"]["seconds"]
        nxt = text.find(json.dumps({"id": f"t{i + 2}"})[:-1])
        complete = generation * (nxt / len(text) if nxt >= 0 else 1.0)
        streamed[t["id"]] = max([complete, *(streamed[d] for d in t["dependencies"])]) + seconds
        planned[t["id"]] = max((planned[d] for d in t["dependencies"]), default=0.0) + seconds
    return max(streamed.values()) / (generation + max(planned.values()))


def run_once(tasks: list[dict[str, Any]], stream: bool, ws: Path) -> dict[str, float]:
    """One run: its wall time, time to first task, the plan's generation time, calls."""
    model = ScriptedChatModel.from_dict(
        {
            "any_goal": True,
            "stream_delay_s": CHUNK_DELAY_S,
            "planner": [{"rationale": "Split the goal into work items.", "tasks": tasks}],
            "reporter": [{"text": "Done."}],
        }
    )
    cfg = config(ws, stream_plans=stream, verify="off", max_parallel=TASKS, max_tasks=TASKS)
    graph = build_aime_graph(model, tools=[work], config=cfg)
    global CLOCK
    CLOCK = Clock()
    start = time.perf_counter()
    out = graph.invoke({"goal": "Assemble the report."}, {"callbacks": [PlannerTimes()]})
    wall = time.perf_counter() - start
    assert out["status"] == "succeeded", out.get("reason")
    assert CLOCK.plan_start is not None and CLOCK.plan_end is not None
    first = min(t for _, t in CLOCK.starts)
    runs = Counter(task for task, _ in CLOCK.starts)
    return {
        "wall": wall,
        "generation": CLOCK.plan_end - CLOCK.plan_start,
        "to_first": first - CLOCK.plan_start,
        "calls": out["usage"].llm_calls,
        "twice": sum(n > 1 for n in runs.values()) + (TASKS - len(runs)),
    }


def run(quick: bool) -> SectionResult:
    n_runs = 3 if quick else 20
    rows: list[dict[str, dict[str, float]]] = []
    plans = [plan(random.Random(seed)) for seed in range(n_runs)]
    with workspace() as ws:
        run_once(plans[0], True, ws)  # warm up: first imports, first plan
        for seed, tasks in enumerate(plans):
            row: dict[str, dict[str, float]] = {}
            for mode in MODES if seed % 2 == 0 else MODES[::-1]:
                row[mode] = run_once(tasks, mode == "on", ws)
            rows.append(row)

    first = [r["on"]["to_first"] / r["on"]["generation"] for r in rows]
    walls = [r["on"]["wall"] / r["off"]["wall"] for r in rows]
    ideal = [ideal_ratio(plans[i], r["on"]["generation"]) for i, r in enumerate(rows)]
    same_calls = sum(r["on"]["calls"] == r["off"]["calls"] for r in rows)
    twice = sum(r[m]["twice"] for r in rows for m in MODES)
    table = Table(
        f"Streamed plans: {n_runs} seeded {TASKS}-task plans of tool steps (0.3-0.8 s each), "
        f"the planner's reply paced at {CHUNK_DELAY_S} s per chunk, streaming on vs off",
        ["measure", "median", "worst", "best"],
    )
    table.add(
        "first task starts at (x the plan's generation time, streaming on)",
        fmt_x(statistics.median(first)),
        fmt_x(max(first)),
        fmt_x(min(first)),
    )
    table.add(
        "run wall, streaming on / off",
        fmt_x(statistics.median(walls)),
        fmt_x(max(walls)),
        fmt_x(min(walls)),
    )
    table.add(
        "the same ratio for a perfect engine (no cost; each task starts once complete)",
        fmt_x(statistics.median(ideal)),
        fmt_x(max(ideal)),
        fmt_x(min(ideal)),
    )
    gen = [r["on"]["generation"] for r in rows]
    table.add(
        "plan generation (s)", fmt_s(statistics.median(gen)), fmt_s(max(gen)), fmt_s(min(gen))
    )
    for mode in MODES:
        w = [r[mode]["wall"] for r in rows]
        table.add(
            f"run wall, streaming {mode} (s)",
            fmt_s(statistics.median(w)),
            fmt_s(max(w)),
            fmt_s(min(w)),
        )
    table.notes += [
        f"Same LLM calls with streaming on and off in {same_calls} of {n_runs} runs; tasks run "
        f"more than once (or never) in any run: {twice}.",
        "Generation time: from the planner model call's start to its end (callbacks), the "
        "same pace streamed or not. Time to first task: from that start to the first tool "
        "call. A task is handed over once the next one has begun in the reply (the last one "
        "starts with the accepted plan) and the plan up to it passes the planner's checks.",
        "max_parallel = 10, verifier off; each plan runs both ways in one process, "
        "alternating which goes first.",
        "Perfect engine: the wall ratio if each task started the moment its spec is complete "
        "in the reply (read at an even pace) and its dependencies are done, with no engine "
        "cost, against generation + critical path. A plan whose critical path is short next to "
        "its generation, or whose long chain comes last, gains little even so.",
    ]
    metrics = {
        "runs": float(n_runs),
        "first_task.median_ratio": statistics.median(first),
        "first_task.worst_ratio": max(first),
        "wall.median_ratio": statistics.median(walls),
        "wall.worst_ratio": max(walls),
        "wall.ideal_median_ratio": statistics.median(ideal),
        "wall.ideal_worst_ratio": max(ideal),
        "same_calls_runs": float(same_calls),
        "tasks_run_twice": float(twice),
    }
    headline = Headline(
        f"streamed plans, {n_runs} seeded {TASKS}-task plans paced at {CHUNK_DELAY_S} s per chunk",
        "the plan's generation time; the same run with stream_plans off",
        f"first task starts at {fmt_x(statistics.median(first))} of the generation time "
        f"(worst {fmt_x(max(first))}); run wall {fmt_x(statistics.median(walls))} of "
        f"streaming off (worst {fmt_x(max(walls))}; a perfect engine: "
        f"{fmt_x(statistics.median(ideal))}, worst {fmt_x(max(ideal))}); same LLM calls in "
        f"{same_calls}/{n_runs} runs, {twice} tasks run twice",
    )
    return SectionResult("streamed_plans", [table], metrics, headlines=[headline])
