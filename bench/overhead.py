"""Engine overhead: wall time per orchestration step and per task with an instant model.

The aime graph runs a chain of ``n`` tasks (so ``n`` orchestration steps, one actor
each) on the scripted model, which answers instantly. Every actor makes one ordinary
tool call (the calculator: a tools step) before it submits, as real tasks do. Two
baselines, each with the same model calls and tool calls and the same checkpointer:

* a raw LangGraph loop, one node looping on itself for the same top-level super-steps
  (what the engine costs per orchestration step on top of LangGraph itself);
* a plain LangGraph graph a user would write by hand for the same workflow (planner,
  a ``Send`` per ready task to a ReAct subgraph with a ``ToolNode``, reporter,
  verifier), at the same durability: when the engine's actors run with
  ``durability="exit"``, so do the plain graph's task subgraphs.

An instant model makes prompt size free, so every row also gives the prompt tokens
each side sends per run (message text plus bound tool schemas, counted by the model).
The plain-graph comparison runs in interleaved rounds; its ratios are the median and
the range over the rounds.

This module holds the section's ``run`` and tables 1, 1c and 1e; the plain graph
is in :mod:`bench.plain_graph`, the run-control table (1d) in :mod:`bench.run_control`
and the pieces timed alone (1b) in :mod:`bench.engine_pieces`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from aimegraph import build_aime_graph
from aimegraph.tools.calculator import calculator
from bench.chat_models import BenchChatModel
from bench.common import (
    Headline,
    SectionResult,
    Table,
    config,
    fmt_ms,
    fmt_range,
    fmt_x,
    median_time,
    memory_saver,
    scenario,
    sqlite_saver,
    task,
    thread_config,
    time_samples,
    workspace,
)
from bench.engine_pieces import component_costs, component_table
from bench.plain_graph import build_plain_graph
from bench.run_control import run_control_table

SaverFactory = Callable[[Path], AbstractContextManager[BaseCheckpointSaver[Any] | None]]


@contextmanager
def _memory(_: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    yield memory_saver()


CHECKPOINTERS: dict[str, SaverFactory] = {
    "none": lambda _: nullcontext(None),
    "InMemorySaver": _memory,
    "SqliteSaver (temp file)": lambda tmp: sqlite_saver(tmp / "overhead.db"),
}
GOAL = {"goal": "Assemble the report."}
TOOL_STEP = {"tool": "calculator", "args": {"expression": "48000 + 213"}}
"""Each actor's ordinary tool call before it submits."""


def chain(n_tasks: int) -> list[dict[str, Any]]:
    """A chain of ``n_tasks`` tasks, each with the calculator's bundle."""
    tasks = [task("t1")] + [task(f"t{i}", f"t{i - 1}") for i in range(2, n_tasks + 1)]
    return [{**t, "tool_bundles": ["compute"]} for t in tasks]


class LoopState(TypedDict, total=False):
    count: int
    last: str


def build_raw_loop(
    model: BenchChatModel,
    calls_per_step: list[int],
    tools_per_step: list[int],
    checkpointer: BaseCheckpointSaver[Any] | None,
) -> CompiledStateGraph:
    """The baseline: one node that, on super-step ``i``, calls ``model``
    ``calls_per_step[i]`` times and the calculator ``tools_per_step[i]`` times, and
    loops back to itself until every step has run."""
    prompt = [HumanMessage("Summarise the results so far.")]

    def step(state: LoopState) -> LoopState:
        i = state.get("count", 0)
        last = ""
        for _ in range(calls_per_step[i]):
            last = model.invoke(prompt).text
        for _ in range(tools_per_step[i]):
            last = calculator.invoke(TOOL_STEP["args"])
        return {"count": i + 1, "last": last}

    def route(state: LoopState) -> str:
        return "step" if state.get("count", 0) < len(calls_per_step) else END

    builder = StateGraph(LoopState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", route, ["step", END])
    return builder.compile(checkpointer=checkpointer, name="raw-loop")


def spread(total: int, slots: int) -> list[int]:
    """``total`` calls spread as evenly as possible over ``slots`` super-steps."""
    return [total // slots + (1 if i < total % slots else 0) for i in range(slots)]


def count_supersteps(saver: BaseCheckpointSaver[Any], thread_id: str) -> tuple[int, int]:
    """(top-level super-steps, super-steps inside subgraphs) of one checkpointed run.

    Every namespace gets one checkpoint for its input plus one per super-step.
    """
    per_ns = Counter(
        item.config["configurable"].get("checkpoint_ns", "")
        for item in saver.list({"configurable": {"thread_id": thread_id}})
    )
    top = per_ns.pop("", 0) - 1
    nested = sum(n - 1 for n in per_ns.values())
    return top, nested


def _invoke(graph: CompiledStateGraph[Any, Any, Any, Any], inputs: dict[str, Any]) -> None:
    graph.invoke(inputs, thread_config())


def tokens_per_run(model: BenchChatModel, run: Callable[[], object]) -> tuple[int, int]:
    """(model calls, prompt tokens sent) of one call of ``run``."""
    model.reset()
    run()
    return model.calls, model.tokens_sent


def run(quick: bool) -> SectionResult:
    n_tasks, repeat, rounds = (4, 1, 1) if quick else (20, 5, 3)
    tasks = chain(n_tasks)
    table = Table(
        f"1. Engine overhead: chain of {n_tasks} tasks, one calculator call each, instant "
        f"scripted model (median of {repeat})",
        [
            "checkpointer",
            "orch. steps",
            "super-steps (top / in subgraphs)",
            "LLM calls / tool calls",
            "prompt tokens per run: aime / raw",
            "aime run (ms)",
            "raw loop (ms)",
            "overhead ms/step",
            "ratio",
        ],
    )
    metrics: dict[str, float] = {}
    with workspace() as ws:
        # Count super-steps, LLM calls and tool calls once, with a checkpointer that keeps them.
        model = BenchChatModel.from_dict(scenario(tasks, actor_steps=[TOOL_STEP]))
        saver = memory_saver()
        probe = build_aime_graph(model, config=config(ws, max_steps=10_000), checkpointer=saver)
        cfg = thread_config()
        out = probe.invoke(GOAL, cfg)
        assert out["status"] == "succeeded", out.get("reason")
        steps = probe.get_state(cfg).values["steps"]
        top, nested = count_supersteps(saver, cfg["configurable"]["thread_id"])
        calls = out["usage"].llm_calls
        tool_calls = len(tasks)  # one calculator call each
        per_step_calls = spread(calls, top)
        per_step_tools = spread(tool_calls, top)

        for label, open_saver in CHECKPOINTERS.items():
            with open_saver(ws) as checkpointer:
                graph = build_aime_graph(
                    model, config=config(ws, max_steps=10_000), checkpointer=checkpointer
                )
                raw = build_raw_loop(model, per_step_calls, per_step_tools, checkpointer)
                aime_run = partial(_invoke, graph, GOAL)
                raw_run = partial(_invoke, raw, {"count": 0})
                aime_s = median_time(aime_run, repeat=repeat, setup=model.reset)
                raw_s = median_time(raw_run, repeat=repeat, setup=model.reset)
                aime_calls, aime_tokens = tokens_per_run(model, aime_run)
                raw_calls, raw_tokens = tokens_per_run(model, raw_run)
            assert aime_calls == raw_calls == calls, (aime_calls, raw_calls, calls)
            overhead = (aime_s - raw_s) / steps
            table.add(
                label,
                steps,
                f"{top} / {nested}",
                f"{calls} / {tool_calls}",
                f"{aime_tokens:,} / {raw_tokens:,}",
                fmt_ms(aime_s, 1),
                fmt_ms(raw_s, 1),
                fmt_ms(overhead),
                fmt_x(aime_s / raw_s),
            )
            key = label.split()[0].lower()
            metrics |= {
                f"{key}.aime_s": aime_s,
                f"{key}.raw_s": raw_s,
                f"{key}.overhead_per_step_delta_s": overhead,
                f"{key}.ratio": aime_s / raw_s,
                f"{key}.aime_tokens": aime_tokens,
                f"{key}.raw_tokens": raw_tokens,
            }
        plain, plain_metrics = plain_table(ws, model, tasks, repeat, rounds)
        sizes, size_metrics = size_table(ws, (1, 4) if quick else (1, 5, 20), repeat * 3)
        control, control_metrics = run_control_table(ws, model, steps, 3 if quick else 25)
        parts = component_costs(ws, model, repeat=20 if quick else 200)
    metrics |= {"steps": steps, "supersteps": top, "nested_supersteps": nested, "llm_calls": calls}
    table.notes += [
        f"An orchestration step is one orchestrator dispatch (`steps` in the state). The raw "
        f"loop runs the same {top} top-level super-steps and makes the same {calls} calls to the "
        f"same instant model and the same {tool_calls} calculator calls, with the same "
        f"checkpointer; it has no subgraphs, so the {nested} super-steps the aime graph runs "
        "inside its planner/executor/verifier subgraphs are part of the engine's overhead.",
        "ratio = aime run time / raw loop time. overhead ms/step = (aime - raw) / orch. steps.",
        "prompt tokens per run: what the model was sent (message text and bound tool schemas, "
        "4 characters a token). The raw loop sends a one-line prompt and binds no tools, so an "
        "instant model hides what the engine's prompts would cost on a real one.",
        "With a checkpointer, subgraphs inherit it: the aime graph saves one checkpoint per "
        "super-step at both levels (top + in subgraphs), the raw loop one per top-level step.",
    ]
    metrics |= {f"part.{k}": v for k, v in parts.items()} | plain_metrics | control_metrics
    metrics |= size_metrics
    return SectionResult(
        "overhead",
        [table, plain, sizes, control, component_table(parts)],
        metrics,
        headlines=headlines(metrics, n_tasks, calls, tool_calls, rounds),
    )


VARIANTS = (("batch", "inherit"), ("eager", "inherit"), ("eager", "exit"))
"""(scheduler, actor_durability) of the aime runs compared with the plain graph."""


def plain_table(
    ws: Path, model: BenchChatModel, tasks: list[dict[str, Any]], repeat: int, rounds: int
) -> tuple[Table, dict[str, float]]:
    """The aime graph (both schedulers; eager also with ``actor_durability="exit"``)
    against :func:`build_plain_graph` over the same chain at the same durability, with
    each checkpointer: wall time per task, the ratio over ``rounds`` interleaved rounds,
    and the prompt tokens each sends per run."""
    n_tasks = len(tasks)
    table = Table(
        f"1c. Against a plain LangGraph graph making the same model and tool calls: chain of "
        f"{n_tasks} tasks, one calculator call each, instant scripted model (median of "
        f"{repeat} runs per round, {rounds} rounds)",
        [
            "checkpointer",
            "scheduler, actor durability",
            "LLM calls / tool calls: aime / plain",
            "prompt tokens per run: aime / plain",
            "aime ms/task",
            "plain ms/task",
            f"ratio, median (range) of {rounds} rounds",
        ],
    )
    metrics: dict[str, float] = {}
    for label, open_saver in CHECKPOINTERS.items():
        with open_saver(ws) as checkpointer:
            for scheduler, durability in VARIANTS:
                if durability == "exit" and checkpointer is None:
                    continue  # nothing to checkpoint: the same run as "inherit"
                cfg = config(ws, max_steps=10_000, scheduler=scheduler, actor_durability=durability)
                graph = build_aime_graph(model, config=cfg, checkpointer=checkpointer)
                plain = build_plain_graph(model, checkpointer, task_durability=durability)
                aime_run = partial(_invoke, graph, GOAL)
                plain_run = partial(_invoke, plain, GOAL)
                aime_times: list[float] = []
                plain_times: list[float] = []
                for _ in range(rounds):  # interleaved, so drift hits both sides alike
                    aime_times.append(
                        statistics.median(time_samples(aime_run, repeat=repeat, setup=model.reset))
                    )
                    plain_times.append(
                        statistics.median(time_samples(plain_run, repeat=repeat, setup=model.reset))
                    )
                ratios = [a / p for a, p in zip(aime_times, plain_times, strict=True)]
                aime_calls, aime_tokens = tokens_per_run(model, aime_run)
                plain_calls, plain_tokens = tokens_per_run(model, plain_run)
                assert aime_calls == plain_calls, (aime_calls, plain_calls)
                exit_ = durability == "exit"
                table.add(
                    label,
                    f"{scheduler}, {'exit' if exit_ else 'as the run'}",
                    f"{aime_calls} / {n_tasks} (both)",
                    f"{aime_tokens:,} / {plain_tokens:,}",
                    fmt_ms(statistics.median(aime_times) / n_tasks),
                    fmt_ms(statistics.median(plain_times) / n_tasks),
                    fmt_range(ratios, fmt_x),
                )
                key = f"plain.{label.split()[0].lower()}.{scheduler}" + (".exit" if exit_ else "")
                metrics |= {
                    f"{key}.aime_s": statistics.median(aime_times),
                    f"{key}.plain_s": statistics.median(plain_times),
                    f"{key}.ratio": statistics.median(ratios),
                    f"{key}.ratio_min": min(ratios),
                    f"{key}.ratio_max": max(ratios),
                    f"{key}.aime_tokens": aime_tokens,
                    f"{key}.plain_tokens": plain_tokens,
                }
    table.notes += [
        "plain: what a LangGraph user would write by hand for the same workflow "
        "(`build_plain_graph`): a planner call with structured output, each ready task as a "
        "`Send` to a ReAct subgraph (model with tools <-> `ToolNode` until `submit_result`), "
        "a reporter call and a verifier call; the same calls to the same model, the same "
        "tool calls, the same checkpointer (its task subgraphs checkpoint their steps too).",
        "actor durability exit (eager only): each actor runs with LangGraph's "
        "durability='exit', checkpointing only when it pauses on an interrupt (a finished "
        "task's result is still saved the moment it completes); the plain graph's task "
        "subgraphs then run with durability='exit' too.",
        "eager: with a checkpointer the runner starts each actor as a LangGraph `@task` "
        "(its result saved the moment it finishes; what a `@task` call costs is in table 1b); "
        "without one it calls the actor subgraph itself (nothing to replay).",
        "ratio = aime / plain. What the engine adds per task: the actor factory (persona, "
        "bundles by embedding search, environment), budgets and retries, the progress list "
        "and its stream events, usage accounting, the run-start and record nodes; and longer "
        "prompts (the tokens column), which an instant model does not charge for.",
    ]
    return table, metrics


def size_table(ws: Path, sizes: tuple[int, ...], repeat: int) -> tuple[Table, dict[str, float]]:
    """The engine (eager, no checkpointer) against the plain graph on chains of each size,
    each run interleaved with the other's: where the difference lies, once per run or
    once per task (a least-squares line through the differences)."""
    table = Table(
        "1e. Once per run or once per task: the engine against the plain graph on chains of "
        f"{', '.join(map(str, sizes))} tasks (eager, no checkpointer; median of {repeat} "
        "interleaved runs)",
        ["tasks", "aime ms", "plain ms", "difference ms", "ratio"],
    )
    metrics: dict[str, float] = {}
    differences = []
    for n in sizes:
        model = BenchChatModel.from_dict(scenario(chain(n), actor_steps=[TOOL_STEP]))
        graph = build_aime_graph(model, config=config(ws, max_steps=10_000), checkpointer=None)
        sides = (
            partial(_invoke, graph, GOAL),
            partial(_invoke, build_plain_graph(model, None), GOAL),
        )
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(repeat):
            for run_side, samples in zip(sides, times, strict=True):
                samples += time_samples(run_side, repeat=1, setup=model.reset)
        aime_s, plain_s = (statistics.median(samples) for samples in times)
        differences.append(aime_s - plain_s)
        table.add(
            n,
            fmt_ms(aime_s, 1),
            fmt_ms(plain_s, 1),
            fmt_ms(aime_s - plain_s),
            fmt_x(aime_s / plain_s),
        )
        metrics[f"sizes.{n}.ratio"] = aime_s / plain_s
    per_task, per_run = statistics.linear_regression(sizes, differences)
    # Fitted to differences, so either may come out negative on a noisy machine.
    metrics |= {"sizes.per_run_delta_s": per_run, "sizes.per_task_delta_s": per_task}
    table.notes.append(
        f"difference = {per_run * 1e3:.2f} ms per run + {per_task * 1e3:.3f} ms per task "
        "(least squares over the sizes): the part per run is the planner's and verifier's "
        "subgraphs and the intake, orchestrator, reporter and record steps; the part per "
        "task, what each actor costs beyond the plain graph's ReAct subgraph."
    )
    return table, metrics


def headlines(
    metrics: dict[str, float], n_tasks: int, calls: int, tool_calls: int, rounds: int
) -> list[Headline]:
    def ratio(key: str) -> str:
        lo, mid, hi = (metrics[f"{key}.ratio{s}"] for s in ("_min", "", "_max"))
        return f"{mid:.2f}x ({lo:.2f}-{hi:.2f})"

    def tokens(key: str, other: str) -> str:
        return f"{metrics[f'{key}.aime_tokens']:,.0f} / {metrics[f'{key}.{other}_tokens']:,.0f}"

    savers = ("none", "inmemorysaver", "sqlitesaver")
    raw = " / ".join(f"{metrics[f'{k}.overhead_per_step_delta_s'] * 1e3:+.1f}" for k in savers)
    plain_eager = " / ".join(ratio(f"plain.{k}.eager") for k in savers)
    plain_batch = " / ".join(ratio(f"plain.{k}.batch") for k in savers)
    plain_exit = " / ".join(ratio(f"plain.{k}.eager.exit") for k in savers[1:])
    return [
        Headline(
            f"engine overhead per orchestration step: chain of {n_tasks} tasks, each one "
            "calculator call then submit_result, instant scripted model; no checkpointer / "
            "InMemorySaver / SQLite",
            f"raw LangGraph loop with the same top-level super-steps, the same {calls} model "
            f"calls and {tool_calls} tool calls, the same checkpointer",
            f"{raw} ms per step; prompt tokens per run {tokens('none', 'raw')} (the raw loop "
            "sends a one-line prompt)",
        ),
        Headline(
            f"engine against a plain LangGraph graph: the same chain and calls; no checkpointer "
            f"/ InMemorySaver / SQLite; median (range) of {rounds} interleaved rounds",
            "hand-written planner / `Send` per ready task to a model-`ToolNode` ReAct subgraph "
            "/ reporter / verifier, same checkpointer and durability",
            f"eager {plain_eager}; batch {plain_batch}; with actor durability exit on both "
            f"sides (memory / SQLite) {plain_exit}; prompt tokens per run "
            f"{tokens('plain.none.eager', 'plain')} (engine / plain)",
        ),
        Headline(
            "run control: one SQLite-checkpointed run, interleaved; graph.invoke (run "
            "settings stored, Ctrl-C drains) / under hold_thread (the lease)",
            "the same compiled graph as LangGraph compiles it (CompiledStateGraph.invoke)",
            f"fastest run {metrics['control.invoke.ratio']:.2f}x / "
            f"{metrics['control.held.ratio']:.2f}x; medians "
            f"{metrics['control.invoke_s'] / metrics['control.bare_s']:.2f}x / "
            f"{metrics['control.held_s'] / metrics['control.bare_s']:.2f}x (the same calls and "
            "prompt tokens)",
        ),
    ]
