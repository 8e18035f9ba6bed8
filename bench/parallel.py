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
* the engine run sequentially with the same calls, ``AimeConfig(max_parallel=1)``:
  the speed-up is parallel against this, so it measures parallelism alone;
* a hand-written sequential loop (:func:`sequential_loop`) making the same calls to
  the same model directly, with no graph at all.

Separately, the calls the default policy saves: the sequential engine with
``replan="on_failure"`` (the default) against the AIME loop, ``replan="every_step"``
(the planner consulted after each task), side by side in calls, prompt tokens and time.
Every row gives the prompt tokens sent per run (counted by the model) beside its
baseline's.
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
from bench.chat_models import LatencyChatModel
from bench.common import (
    WORKING_STEP,
    Headline,
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


def sequential_loop(
    model: LatencyChatModel, goal: str = GOAL, *, consult_after_each: bool = False
) -> str:
    """A minimal hand-written loop: plan, then one task at a time (a ReAct loop until
    ``submit_result``), with ``consult_after_each`` the planner consulted after each
    task (the AIME loop), then report and verify. Returns the final answer."""
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
        if consult_after_each and i < len(tasks) - 1:
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


MODES = ("par_default", "par_16", "seq_same", "seq_loop", "seq_every_step")


def measure_shape(
    tasks: list[TaskDict], ws: Path, latency: float, repeat: int
) -> tuple[dict[str, float], dict[str, int], dict[str, int]]:
    """Median wall time, LLM calls and prompt tokens sent of one DAG in each mode."""
    model = LatencyChatModel.from_dict(
        scenario(tasks, noop_replans=True, actor_steps=[WORKING_STEP]), latency
    )

    def engine(**fields: Any) -> CompiledStateGraph[Any, Any, Any, Any]:
        cfg = config(ws, max_steps=1000, **fields)
        return build_aime_graph(model, config=cfg, checkpointer=memory_saver())

    par = engine(max_parallel=8)
    seq = engine(max_parallel=1)
    aime_loop = engine(max_parallel=1, replan="every_step")

    def run_graph(graph: CompiledStateGraph[Any, Any, Any, Any], **run_config: Any) -> None:
        out = graph.invoke({"goal": GOAL}, thread_config(**run_config))
        assert out["status"] == "succeeded", out.get("reason")

    modes: dict[str, Callable[[], object]] = {
        "par_default": partial(run_graph, par),
        "par_16": partial(run_graph, par, max_concurrency=16),
        "seq_same": partial(run_graph, seq),
        "seq_loop": partial(sequential_loop, model),
        "seq_every_step": partial(run_graph, aime_loop),
    }
    times: dict[str, float] = {}
    calls: dict[str, int] = {}
    tokens: dict[str, int] = {}
    for label, fn in modes.items():
        times[label] = median_time(fn, repeat=repeat, warmup=0, setup=model.reset)
        calls[label] = model.calls  # of the last repetition (the scripted runs repeat)
        tokens[label] = model.tokens_sent
    return times, calls, tokens


def run(quick: bool) -> SectionResult:
    latency, repeat = (0.01, 1) if quick else (0.05, 3)
    shapes = dag_shapes()
    if quick:
        shapes = {k: v for k, v in shapes.items() if k in ("independent x8", "diamond 1-6-1")}
    table = Table(
        f"2. Parallel speed-up: 8-task DAGs, {latency * 1e3:.0f} ms per LLM call, the same "
        f"calls both ways (wall seconds, median of {repeat})",
        [
            "DAG shape",
            "depth",
            "LLM calls par / seq",
            "prompt tokens par / seq",
            "critical-path bound",
            "parallel, default pool",
            "parallel, max_concurrency=16",
            "bound / parallel",
            "sequential engine, same calls",
            "hand-written seq. loop, same calls",
            "speed-up vs seq. engine",
        ],
    )
    saved = Table(
        f"2b. Calls saved by replan='on_failure' (the default) against the AIME loop, "
        f"replan='every_step': both sequential, {latency * 1e3:.0f} ms per LLM call",
        [
            "DAG shape",
            "LLM calls on_failure / every_step",
            "prompt tokens on_failure / every_step",
            "wall s on_failure / every_step",
            "time saved",
        ],
    )
    metrics: dict[str, float] = {}
    with workspace() as ws:
        for name, tasks in shapes.items():
            times, calls, tokens = measure_shape(tasks, ws, latency, repeat)
            assert calls["par_16"] == calls["seq_same"] == calls["seq_loop"], calls
            critical_calls = FIXED_CALLS + depth(tasks) * CALLS_PER_TASK
            bound = latency * critical_calls
            best = min(times["par_default"], times["par_16"])
            table.add(
                name,
                depth(tasks),
                f"{calls['par_16']} / {calls['seq_same']}",
                f"{tokens['par_16']:,} / {tokens['seq_same']:,}",
                fmt_s(bound),
                fmt_s(times["par_default"]),
                fmt_s(times["par_16"]),
                f"{bound / best:.0%}",
                fmt_s(times["seq_same"]),
                fmt_s(times["seq_loop"]),
                fmt_x(times["seq_same"] / best),
            )
            saved.add(
                name,
                f"{calls['seq_same']} / {calls['seq_every_step']}",
                f"{tokens['seq_same']:,} / {tokens['seq_every_step']:,}",
                f"{fmt_s(times['seq_same'])} / {fmt_s(times['seq_every_step'])}",
                fmt_x(times["seq_every_step"] / times["seq_same"]),
            )
            key = name.split()[0].split("-")[0]
            metrics |= {f"{key}.bound_s": bound, **{f"{key}.{k}_s": v for k, v in times.items()}}
            metrics |= {f"{key}.{k}_calls": v for k, v in calls.items()}
            metrics |= {f"{key}.{k}_tokens": v for k, v in tokens.items()}
            metrics[f"{key}.speedup"] = times["seq_same"] / best
            metrics[f"{key}.efficiency"] = bound / best
            metrics[f"{key}.every_step_time_ratio"] = times["seq_every_step"] / times["seq_same"]
    table.notes += [
        f"Each task takes {CALLS_PER_TASK} LLM calls (update_progress, submit_result). "
        f"critical-path bound = {latency * 1e3:.0f} ms x (planner + depth x {CALLS_PER_TASK} "
        "+ reporter + verifier); bound / parallel is the efficiency of the parallel run "
        "(the better of the two pool settings).",
        "parallel = AimeConfig(max_parallel=8). default pool: LangGraph's sync runner submits "
        "parallel branches to a ThreadPoolExecutor of min(32, cores + 4) workers "
        f"({min(32, (os.cpu_count() or 1) + 4)} here) unless the run config sets max_concurrency.",
        "sequential engine = the engine itself with AimeConfig(max_parallel=1), the default "
        "replan='on_failure': one task at a time, the same calls as the parallel run. "
        "hand-written seq. loop = bench.parallel.sequential_loop: the same call sequence on the "
        "same model, without LangGraph (its prompts are one-liners, so it sends fewer tokens).",
    ]
    saved.notes.append(
        "every_step consults the planner (a no-op PlanUpdate here) after each task, as AIME "
        "does; on_failure only when something fails. Both run the same plan one task at a "
        "time; time saved = every_step wall / on_failure wall."
    )
    return SectionResult(
        "parallel", [table, saved], metrics, headlines=headlines(shapes, metrics, latency)
    )


def headlines(
    shapes: dict[str, list[TaskDict]], metrics: dict[str, float], latency: float
) -> list[Headline]:
    keys = [name.split()[0].split("-")[0] for name in shapes]
    names = " / ".join(shapes)
    speedups = " / ".join(fmt_x(metrics[f"{k}.speedup"]) for k in keys)
    efficiency = [metrics[f"{k}.efficiency"] for k in keys]
    calls = {metrics[f"{k}.par_16_calls"] for k in keys}
    tokens = " / ".join(
        f"{metrics[f'{k}.par_16_tokens']:,.0f} vs {metrics[f'{k}.seq_same_tokens']:,.0f}"
        for k in keys
    )
    every = {metrics[f"{k}.seq_every_step_calls"] for k in keys}
    seq_tokens = " / ".join(f"{metrics[f'{k}.seq_same_tokens']:,.0f}" for k in keys)
    every_tokens = " / ".join(f"{metrics[f'{k}.seq_every_step_tokens']:,.0f}" for k in keys)
    saved_time = [metrics[f"{k}.every_step_time_ratio"] for k in keys]
    return [
        Headline(
            f"parallel speed-up, 8-task DAGs at {latency * 1e3:.0f} ms per LLM call: {names}",
            "the engine run sequentially (max_parallel=1) making the same calls",
            f"{speedups} faster; {min(efficiency):.0%}-{max(efficiency):.0%} of the "
            f"critical-path lower bound; {'/'.join(map(str, sorted(calls)))} calls both ways; "
            f"prompt tokens per run {tokens} (parallel vs sequential)",
        ),
        Headline(
            "calls saved by replan='on_failure' (the default), the same DAGs run sequentially",
            "the AIME loop, replan='every_step' (the planner consulted after each task)",
            f"{'/'.join(map(str, sorted(calls)))} calls against "
            f"{'/'.join(map(str, sorted(every)))}; prompt tokens per run {seq_tokens} against "
            f"{every_tokens}; every_step takes {min(saved_time):.2f}x-{max(saved_time):.2f}x "
            "the time",
        ),
    ]
