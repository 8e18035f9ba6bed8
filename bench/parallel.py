"""Parallel speed-up: wall time of DAG-shaped plans when every LLM call takes a fixed latency.

Each of the four 8-task DAG shapes runs with :class:`LatencyChatModel` (the
scripted model plus ``time.sleep(latency)`` per call; each task takes two calls:
``update_progress`` then ``submit_result``). Compared side by side:

* the critical-path lower bound: latency x the LLM calls on the longest path
  (planner + depth x calls per task + reporter + verifier);
* the engine in parallel, ``AimeConfig(max_parallel=8)``, invoked once with
  LangGraph's default thread pool and once with ``max_concurrency=16`` in the
  run config (LangGraph runs sync parallel branches in a ``ThreadPoolExecutor``
  whose default size is ``min(32, cores + 4)``);
* the engine as a sequential AIME loop, ``AimeConfig(max_parallel=1,
  replan="every_step")``: one subtask at a time, the planner consulted after each;
* a hand-written sequential AIME-style loop (:func:`sequential_loop`) making the
  same calls to the same model directly, with no graph at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph.state import CompiledStateGraph

from aimegraph import PlanUpdate, Verdict, build_aime_graph
from aimegraph.tools.progress import submit_result, update_progress
from bench.common import (
    WORKING_STEP,
    LatencyChatModel,
    SectionResult,
    Table,
    TaskDict,
    config,
    dag_shapes,
    depth,
    fmt_s,
    fmt_x,
    median_time,
    memory_saver,
    scenario,
    thread_config,
    topological,
    workspace,
)

CALLS_PER_TASK = 1 + 1  # WORKING_STEP, then the default submit_result
FIXED_CALLS = 3  # planner, reporter, verifier
GOAL = "Assemble the report from its work items."


def sequential_loop(model: LatencyChatModel, goal: str = GOAL) -> str:
    """A minimal hand-written AIME loop: plan, then one task at a time (a ReAct loop
    until ``submit_result``), consulting the planner after each task, then report
    and verify. Returns the final answer."""
    planner = model.with_structured_output(PlanUpdate)

    def consult_planner(progress: str) -> PlanUpdate:
        reply = planner.invoke(
            [
                SystemMessage("# Role: planner\nPlan the goal as tasks."),
                HumanMessage(f"Goal: {goal}\n\n{progress}"),
            ]
        )
        assert isinstance(reply, PlanUpdate)
        return reply

    plan = consult_planner("(no progress yet)")
    tasks: list[TaskDict] = topological([spec.model_dump() for spec in plan.tasks])
    actor = model.bind_tools([update_progress, submit_result])
    results: dict[str, str] = {}
    for i, spec in enumerate(tasks):
        messages: list[BaseMessage] = [
            SystemMessage("# Role: actor\nDo the task with the tools."),
            HumanMessage(
                f"Overall goal (for context): {goal}\n\n"
                f'<task id="{spec["id"]}" attempt="1">\nTitle: {spec["title"]}\n</task>'
            ),
        ]
        while spec["id"] not in results:
            reply = actor.invoke(messages)
            assert isinstance(reply, AIMessage)
            messages.append(reply)
            for call in reply.tool_calls:
                if call["name"] == "submit_result":
                    results[spec["id"]] = call["args"]["summary"]
                messages.append(ToolMessage("ok", tool_call_id=call["id"]))
        if i < len(tasks) - 1:
            done = "\n".join(f"- [x] {k}: {v}" for k, v in results.items())
            consult_planner(done)
    answer = model.invoke(
        [
            SystemMessage("# Role: reporter\nWrite the final answer."),
            HumanMessage(
                "".join(f'<result id="{k}">\n{v}\n</result>\n' for k, v in results.items())
            ),
        ]
    ).text
    verdict = model.with_structured_output(Verdict).invoke(
        [
            SystemMessage("# Role: verifier\nJudge the answer."),
            HumanMessage(f"<answer>\n{answer}\n</answer>"),
        ]
    )
    assert isinstance(verdict, Verdict)
    return answer


def measure_shape(
    tasks: list[TaskDict], ws: Path, latency: float, repeat: int
) -> tuple[dict[str, float], dict[str, int]]:
    """Median wall time and LLM calls of one DAG under the four execution modes."""
    model = LatencyChatModel.from_dict(
        scenario(tasks, noop_replans=True, actor_steps=[WORKING_STEP]), latency
    )
    par = build_aime_graph(model, config=config(ws, max_parallel=8), checkpointer=memory_saver())
    seq = build_aime_graph(
        model,
        config=config(ws, max_parallel=1, replan="every_step", max_steps=1000),
        checkpointer=memory_saver(),
    )

    def run_graph(graph: CompiledStateGraph[Any, Any, Any, Any], **run_config: Any) -> None:
        out = graph.invoke({"goal": GOAL}, thread_config(**run_config))
        assert out["status"] == "succeeded", out.get("reason")

    modes: dict[str, Callable[[], object]] = {
        "par_default": partial(run_graph, par),
        "par_16": partial(run_graph, par, max_concurrency=16),
        "seq_engine": partial(run_graph, seq),
        "seq_loop": partial(sequential_loop, model),
    }
    times: dict[str, float] = {}
    calls: dict[str, int] = {}
    for label, fn in modes.items():
        times[label] = median_time(fn, repeat=repeat, warmup=0, setup=model.reset)
        calls[label] = model.calls  # of the last repetition
    return times, calls


def run(quick: bool) -> SectionResult:
    latency, repeat = (0.01, 1) if quick else (0.05, 3)
    shapes = dag_shapes()
    if quick:
        shapes = {k: v for k, v in shapes.items() if k in ("independent x8", "diamond 1-6-1")}
    table = Table(
        f"2. Parallel speed-up: 8-task DAGs, {latency * 1e3:.0f} ms per LLM call "
        f"(wall seconds, median of {repeat})",
        [
            "DAG shape",
            "depth",
            "LLM calls par / seq",
            "critical-path bound",
            "parallel, default pool",
            "parallel, max_concurrency=16",
            "bound / parallel",
            "sequential engine",
            "hand-written seq. loop",
            "speed-up vs seq. engine",
        ],
    )
    metrics: dict[str, float] = {}
    with workspace() as ws:
        for name, tasks in shapes.items():
            times, calls = measure_shape(tasks, ws, latency, repeat)
            critical_calls = FIXED_CALLS + depth(tasks) * CALLS_PER_TASK
            bound = latency * critical_calls
            best = min(times["par_default"], times["par_16"])
            table.add(
                name,
                depth(tasks),
                f"{calls['par_16']} / {calls['seq_engine']}",
                fmt_s(bound),
                fmt_s(times["par_default"]),
                fmt_s(times["par_16"]),
                f"{bound / best:.0%}",
                fmt_s(times["seq_engine"]),
                fmt_s(times["seq_loop"]),
                fmt_x(times["seq_engine"] / best),
            )
            key = name.split()[0].split("-")[0]
            metrics |= {f"{key}.bound_s": bound, **{f"{key}.{k}_s": v for k, v in times.items()}}
            metrics[f"{key}.speedup"] = times["seq_engine"] / best
            metrics[f"{key}.calls_seq"] = calls["seq_engine"]
            if calls["seq_loop"] != calls["seq_engine"]:
                table.notes.append(
                    f"{name}: the hand-written loop made {calls['seq_loop']} calls, "
                    f"the sequential engine {calls['seq_engine']}."
                )
    table.notes += [
        f"Each task takes {CALLS_PER_TASK} LLM calls (update_progress, submit_result). "
        f"critical-path bound = {latency * 1e3:.0f} ms x (planner + depth x {CALLS_PER_TASK} "
        "+ reporter + verifier); bound / parallel is the efficiency of the parallel run "
        "(the better of the two pool settings).",
        "parallel = AimeConfig(max_parallel=8). default pool: LangGraph's sync runner submits "
        "parallel branches to a ThreadPoolExecutor of min(32, cores + 4) workers "
        f"({min(32, (os.cpu_count() or 1) + 4)} here) unless the run config sets max_concurrency.",
        "sequential engine = the engine itself with AimeConfig(max_parallel=1, "
        "replan='every_step'): one subtask at a time, the planner (a no-op PlanUpdate) consulted "
        "after each. hand-written seq. loop = bench.parallel.sequential_loop: the same call "
        "sequence on the same model, without LangGraph.",
    ]
    return SectionResult("parallel", [table], metrics)
