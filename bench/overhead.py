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
"""

from __future__ import annotations

import operator
import statistics
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Send

from aimegraph import (
    DefaultActorFactory,
    PlanUpdate,
    Task,
    Verdict,
    build_aime_graph,
    default_registry,
)
from aimegraph.checkpoints import hold_thread
from aimegraph.models.offline.scripted import ScriptedChatModel
from aimegraph.tools.calculator import calculator
from bench.common import (
    BenchChatModel,
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
    timed,
    workspace,
)

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


def run_control_table(
    ws: Path, model: ScriptedChatModel, steps: int, repeat: int
) -> tuple[Table, dict[str, float]]:
    """The same SQLite-checkpointed run three ways, interleaved: the graph as
    LangGraph compiles it (``CompiledStateGraph.invoke``, no run control), the
    aime graph's ``invoke`` (the run's settings in the checkpoint metadata, Ctrl-C
    as a drain), and that under the thread's lease (``hold_thread``)."""
    goal = {"goal": "Assemble the report."}
    samples: dict[str, list[float]] = {"bare": [], "invoke": [], "held": []}
    with sqlite_saver(ws / "control.db") as saver:
        graph = build_aime_graph(model, config=config(ws, max_steps=10_000), checkpointer=saver)
        # The same compiled graph without the AimeGraph subclass (as Pregel.copy builds it).
        attrs = {
            k: v for k, v in graph.__dict__.items() if k not in ("__orig_class__", "run_settings")
        }
        bare = CompiledStateGraph(**attrs)

        def held() -> object:
            cfg = thread_config()
            with hold_thread(saver, cfg["configurable"]["thread_id"]) as lease:
                return graph.invoke(goal, cfg, control=lease.control)

        runs: dict[str, Callable[[], object]] = {
            "bare": lambda: bare.invoke(goal, thread_config()),
            "invoke": lambda: graph.invoke(goal, thread_config()),
            "held": held,
        }
        for i in range(repeat + 1):  # interleaved, so drift in the machine hits all three
            for name, fn in runs.items():
                model.reset()
                _, seconds = timed(fn)
                if i:  # the first round warms up
                    samples[name].append(seconds)
    medians = {name: statistics.median(times) for name, times in samples.items()}
    fastest = {name: min(times) for name, times in samples.items()}
    quartiles = {name: statistics.quantiles(times, n=4) for name, times in samples.items()}
    table = Table(
        f"1d. Run control: one SQLite-checkpointed run of {steps} orchestration steps, "
        f"three ways, interleaved ({repeat} runs each)",
        [
            "run",
            "fastest ms",
            "median ms",
            "middle half (ms)",
            "fastest, against LangGraph's own",
            "median, against LangGraph's own",
        ],
    )
    labels = {
        "bare": "the same graph as LangGraph compiles it (`CompiledStateGraph.invoke`)",
        "invoke": "`graph.invoke` (run settings in each checkpoint, Ctrl-C drains)",
        "held": "`graph.invoke` under `hold_thread` (the lease and its cancel watcher)",
    }
    for name, label in labels.items():
        low, _, high = quartiles[name]
        table.add(
            label,
            fmt_ms(fastest[name], 1),
            fmt_ms(medians[name], 1),
            f"{fmt_ms(low, 1)}-{fmt_ms(high, 1)}",
            fmt_x(fastest[name] / fastest["bare"]),
            fmt_x(medians[name] / medians["bare"]),
        )
    table.notes += [
        "The drain checks are in all three (LangGraph checks its RunControl before every "
        "super-step; the eager runner and the model nodes read it between tasks and calls); "
        "the lease is taken once per run (an flock, or an advisory lock on Postgres) and "
        "its watcher thread polls for a cancel 5 times a second, off the run's path.",
        "The fastest run of each is the least disturbed by the rest of the machine; where "
        "the middle halves overlap, a difference of medians is the machine's noise.",
    ]
    metrics = {f"control.{name}_s": value for name, value in medians.items()}
    metrics |= {f"control.{name}.fastest_s": value for name, value in fastest.items()}
    metrics |= {f"control.{n}.ratio": fastest[n] / fastest["bare"] for n in ("invoke", "held")}
    return table, metrics


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
    metrics |= {"sizes.per_run_s": per_run, "sizes.per_task_s": per_task}
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


class _Empty(TypedDict, total=False):
    x: int


def _noop(state: _Empty) -> _Empty:
    return {"x": state.get("x", 0) + 1}


def component_costs(ws: Path, model: BenchChatModel, repeat: int) -> dict[str, float]:
    """Micro-benchmarks of the pieces a task goes through, in seconds per call."""
    registry = default_registry(ws)
    tools = list(registry.tools.values())
    factory = DefaultActorFactory(registry, workspace=ws)
    sample = Task(id="t1", title="Work item t1", description="Produce the partial result t1.")
    chain = StateGraph(_Empty)
    for i in range(4):
        chain.add_node(f"n{i}", _noop)
        chain.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    subgraph = chain.compile()

    def pool_round_trip() -> None:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(int).result()

    prompt = [HumanMessage("x" * 2000)]
    pieces: dict[str, Callable[[], object]] = {
        "scripted_call": lambda: model.invoke(prompt),
        "bind_tools": lambda: model.bind_tools(tools),
        "factory_build": lambda: factory.build(sample, "Assemble the report.", {}),
        "thread_pool": pool_round_trip,
        "subgraph_4_nodes": lambda: subgraph.invoke({"x": 0}),
        "lease": lambda: hold_thread(f"sqlite:///{ws / 'lease.db'}", "t").release(),
    }
    return {name: median_time(fn, repeat=repeat, warmup=3) for name, fn in pieces.items()}


def component_table(parts: dict[str, float]) -> Table:
    table = Table(
        "1b. Where a task's time goes: pieces of the engine timed alone (no checkpointer)",
        ["piece", "per", "ms"],
    )
    rows = {
        "scripted_call": ("one call of the instant scripted model (2,000-char prompt)", "LLM call"),
        "bind_tools": (
            "`bind_tools` over the default registry's tools (schema conversion)",
            "actor LLM call",
        ),
        "factory_build": (
            "`DefaultActorFactory.build` (persona, tool bundles by embedding search, environment)",
            "task",
        ),
        "thread_pool": (
            "create a 1-thread pool, run one call, join it",
            "ToolNode call (not the actor's reports: they run in its react step) and timeout guard",
        ),
        "subgraph_4_nodes": ("invoke a compiled 4-node no-op StateGraph", "subgraph invocation"),
        "lease": (
            "take and release a thread's lease on an SQLite file (flock, cancel watcher "
            "thread started and joined)",
            "run",
        ),
    }
    for key, (label, per) in rows.items():
        table.add(label, per, fmt_ms(parts[key], 3))
    table.notes.append(
        "An executor runs as a subgraph for every task: react steps (the factory's assembly "
        "opens the first; a reply that only reports, update_progress or submit_result, is run "
        "in its react step) and a tools step for any other tool; a task that submits at once "
        "is one super-step (the plain graph's ReAct subgraph: two). The planner and verifier "
        "are subgraphs too."
    )
    return table


# --------------------------------------------------------------------------- plain baseline


class PlainState(TypedDict, total=False):
    goal: str
    deps: dict[str, list[str]]
    results: Annotated[dict[str, str], operator.or_]
    answer: str


class PlainTaskState(MessagesState, total=False):
    task_id: str


@tool("submit_result")
def plain_submit(status: str, summary: str, artifacts: dict[str, str] | None = None) -> str:
    """Submit the task's result."""
    return summary


@tool("update_progress")
def plain_progress(status: str, message: str) -> str:
    """Record progress."""
    return "Progress recorded."


def build_plain_graph(
    model: BenchChatModel,
    checkpointer: BaseCheckpointSaver[Any] | None,
    task_durability: str = "inherit",
) -> CompiledStateGraph:
    """What a LangGraph user would write by hand for the same workflow, making the
    same model and tool calls: a planner call (structured output), then each ready
    task as a ``Send`` to a ReAct subgraph (model with tools <-> ``ToolNode``, until
    ``submit_result``), a reporter call and a verifier call (structured output).
    ``task_durability="exit"`` runs the task subgraphs with that durability."""
    planner = model.with_structured_output(PlanUpdate)
    verifier = model.with_structured_output(Verdict)
    tools = [calculator, plain_submit, plain_progress]
    actor = model.bind_tools(tools)
    durability: dict[str, Any] = (
        {"durability": "exit"} if task_durability == "exit" and checkpointer else {}
    )

    def react(state: PlainTaskState) -> dict[str, Any]:
        return {"messages": [actor.invoke(state["messages"])]}

    def after_react(state: PlainTaskState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    def after_tools(state: PlainTaskState) -> str:
        called = state["messages"][-2]
        submitted = isinstance(called, AIMessage) and any(
            c["name"] == "submit_result" for c in called.tool_calls
        )
        return END if submitted else "react"

    sub = StateGraph(PlainTaskState)
    sub.add_node("react", react)
    sub.add_node("tools", ToolNode(tools))
    sub.add_edge(START, "react")
    sub.add_conditional_edges("react", after_react, ["tools", END])
    sub.add_conditional_edges("tools", after_tools, ["react", END])
    react_graph = sub.compile()

    def run_task(state: PlainTaskState) -> PlainState:
        out = react_graph.invoke(state, **durability)
        return {"results": {state["task_id"]: out["messages"][-1].text}}

    def plan(state: PlainState) -> PlainState:
        reply = planner.invoke([SystemMessage("# Role: planner"), HumanMessage(state["goal"])])
        update = PlanUpdate.model_validate(reply)
        return {"deps": {t.id: list(t.dependencies) for t in update.tasks}, "results": {}}

    def dispatch(state: PlainState) -> Command[Any]:
        done = state.get("results") or {}
        ready = [t for t, deps in state["deps"].items() if t not in done and set(deps) <= set(done)]
        if not ready:
            return Command(goto="report")
        return Command(
            goto=[
                Send(
                    "task",
                    {
                        "task_id": t,
                        "messages": [
                            SystemMessage("# Role: actor"),
                            HumanMessage(f'<task id="{t}">\nTitle: {t}'),
                        ],
                    },
                )
                for t in ready
            ]
        )

    def report(state: PlainState) -> PlainState:
        text = model.invoke([SystemMessage("# Role: reporter"), HumanMessage(state["goal"])]).text
        verifier.invoke([SystemMessage("# Role: verifier"), HumanMessage(text)])
        return {"answer": text}

    builder = StateGraph(PlainState)
    builder.add_node("plan", plan)
    builder.add_node("dispatch", dispatch, destinations=("task", "report"))
    builder.add_node("task", run_task)
    builder.add_node("report", report)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "dispatch")
    builder.add_edge("task", "dispatch")
    builder.add_edge("report", END)
    return builder.compile(checkpointer=checkpointer, name="plain")
