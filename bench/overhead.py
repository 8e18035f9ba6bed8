"""Engine overhead: wall time per orchestration step with an instant model.

The aime graph runs a chain of ``n`` tasks (so ``n`` orchestration steps, one
actor each) with the ScriptedChatModel, which answers instantly. The baseline is
a minimal raw LangGraph loop, one node looping on itself, that runs the same
number of top-level super-steps and makes the same number of calls to the same
instant model, with the same kind of checkpointer. The difference, divided by
the orchestration steps, is what the engine costs per step on top of LangGraph.
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
from aimegraph.models.scripted import ScriptedChatModel
from bench.common import (
    SectionResult,
    Table,
    config,
    fmt_ms,
    fmt_x,
    median_time,
    memory_saver,
    scenario,
    sqlite_saver,
    task,
    thread_config,
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


class LoopState(TypedDict, total=False):
    count: int
    last: str


def build_raw_loop(
    model: ScriptedChatModel,
    calls_per_step: list[int],
    checkpointer: BaseCheckpointSaver[Any] | None,
) -> CompiledStateGraph:
    """The baseline: one node that calls ``model`` ``calls_per_step[i]`` times on
    super-step ``i`` and loops back to itself until every step has run."""
    prompt = [HumanMessage("Summarise the results so far.")]

    def step(state: LoopState) -> LoopState:
        i = state.get("count", 0)
        last = ""
        for _ in range(calls_per_step[i]):
            last = model.invoke(prompt).text
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


def run(quick: bool) -> SectionResult:
    n_tasks, repeat = (4, 1) if quick else (20, 5)
    tasks = [task("t1")] + [task(f"t{i}", f"t{i - 1}") for i in range(2, n_tasks + 1)]
    table = Table(
        f"1. Engine overhead: chain of {n_tasks} tasks, instant scripted model "
        f"(median of {repeat})",
        [
            "checkpointer",
            "orch. steps",
            "super-steps (top / in subgraphs)",
            "LLM calls",
            "aime run (ms)",
            "raw loop (ms)",
            "aime ms/step",
            "raw ms/step",
            "overhead ms/step",
            "ratio",
        ],
    )
    metrics: dict[str, float] = {}
    with workspace() as ws:
        # Count super-steps and LLM calls once, with a checkpointer that keeps them.
        model = ScriptedChatModel.from_dict(scenario(tasks))
        saver = memory_saver()
        probe = build_aime_graph(model, config=config(ws, max_steps=10_000), checkpointer=saver)
        cfg = thread_config()
        out = probe.invoke({"goal": "Assemble the report."}, cfg)
        assert out["status"] == "succeeded", out.get("reason")
        steps = probe.get_state(cfg).values["steps"]
        top, nested = count_supersteps(saver, cfg["configurable"]["thread_id"])
        calls = out["usage"].llm_calls
        per_step_calls = spread(calls, top)

        for label, open_saver in CHECKPOINTERS.items():
            with open_saver(ws) as checkpointer:
                graph = build_aime_graph(
                    model, config=config(ws, max_steps=10_000), checkpointer=checkpointer
                )
                raw = build_raw_loop(model, per_step_calls, checkpointer)
                aime_s = median_time(
                    partial(_invoke, graph, {"goal": "Assemble the report."}),
                    repeat=repeat,
                    setup=model.reset,
                )
                raw_s = median_time(partial(_invoke, raw, {"count": 0}), repeat=repeat)
            overhead = (aime_s - raw_s) / steps
            table.add(
                label,
                steps,
                f"{top} / {nested}",
                calls,
                fmt_ms(aime_s, 1),
                fmt_ms(raw_s, 1),
                fmt_ms(aime_s / steps),
                fmt_ms(raw_s / steps),
                fmt_ms(overhead),
                fmt_x(aime_s / raw_s),
            )
            key = label.split()[0].lower()
            metrics |= {
                f"{key}.aime_s": aime_s,
                f"{key}.raw_s": raw_s,
                f"{key}.overhead_per_step_s": overhead,
                f"{key}.ratio": aime_s / raw_s,
            }
        plain, plain_metrics = plain_table(ws, model, n_tasks, repeat)
        control, control_metrics = run_control_table(ws, model, steps, 3 if quick else 25)
        parts = component_costs(ws, model, repeat=20 if quick else 200)
    metrics |= {"steps": steps, "supersteps": top, "nested_supersteps": nested, "llm_calls": calls}
    table.notes += [
        f"An orchestration step is one orchestrator dispatch (`steps` in the state). The raw "
        f"loop runs the same {top} top-level super-steps and makes the same {calls} calls to the "
        f"same instant model, with the same checkpointer; it has no subgraphs, so the "
        f"{nested} super-steps the aime graph runs inside its planner/executor/verifier "
        f"subgraphs are part of the engine's overhead.",
        "ratio = aime run time / raw loop time. overhead ms/step = (aime - raw) / orch. steps.",
        "With a checkpointer, subgraphs inherit it: the aime graph saves one checkpoint per "
        "super-step at both levels (top + in subgraphs), the raw loop one per top-level step.",
    ]
    metrics |= {f"part.{k}": v for k, v in parts.items()} | plain_metrics | control_metrics
    return SectionResult("overhead", [table, plain, control, component_table(parts)], metrics)


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


def plain_table(
    ws: Path, model: ScriptedChatModel, n_tasks: int, repeat: int
) -> tuple[Table, dict[str, float]]:
    """The aime graph (both schedulers) against :func:`build_plain_graph` over the
    same chain, with each checkpointer: wall time per task and the ratio."""
    table = Table(
        f"1c. Against a plain LangGraph graph making the same model and tool calls: chain of "
        f"{n_tasks} tasks, instant scripted model (median of {repeat})",
        ["checkpointer", "scheduler", "aime ms/task", "plain ms/task", "overhead ms/task", "ratio"],
    )
    metrics: dict[str, float] = {}
    goal = {"goal": "Assemble the report."}
    for label, open_saver in CHECKPOINTERS.items():
        with open_saver(ws) as checkpointer:
            plain = build_plain_graph(model, checkpointer)
            plain_s = median_time(partial(_invoke, plain, goal), repeat=repeat, setup=model.reset)
            variants = [("batch", "inherit"), ("eager", "inherit")]
            if checkpointer is not None:
                variants.append(("eager", "exit"))
            for scheduler, durability in variants:
                cfg = config(ws, max_steps=10_000, scheduler=scheduler, actor_durability=durability)
                graph = build_aime_graph(model, config=cfg, checkpointer=checkpointer)
                aime_s = median_time(
                    partial(_invoke, graph, goal), repeat=repeat, setup=model.reset
                )
                exit_ = durability == "exit"
                table.add(
                    label,
                    scheduler + (", actor_durability=exit" if exit_ else ""),
                    fmt_ms(aime_s / n_tasks),
                    fmt_ms(plain_s / n_tasks),
                    fmt_ms((aime_s - plain_s) / n_tasks),
                    fmt_x(aime_s / plain_s),
                )
                key = f"plain.{label.split()[0].lower()}.{scheduler}" + (".exit" if exit_ else "")
                metrics |= {f"{key}.aime_s": aime_s, f"{key}.plain_s": plain_s}
                metrics[f"{key}.ratio"] = aime_s / plain_s
    table.notes += [
        "plain: what a LangGraph user would write by hand for the same workflow "
        "(`build_plain_graph`): a planner call with structured output, each ready task as a "
        "`Send` to a ReAct subgraph (model with tools <-> `ToolNode` until `submit_result`), "
        "a reporter call and a verifier call; the same calls to the same model, the same "
        "tool calls, the same checkpointer (its task subgraphs checkpoint their steps too).",
        "ratio = aime / plain. What the engine adds per task: the actor factory (persona, "
        "bundles by embedding search, environment), budgets and retries, the progress list "
        "and its stream events, usage accounting, the run-start and record nodes.",
        "actor_durability=exit (eager only): each actor runs with LangGraph's "
        "durability='exit', checkpointing only when it pauses on an interrupt; a finished "
        "task's result is still saved the moment it completes.",
    ]
    return table, metrics


class _Empty(TypedDict, total=False):
    x: int


def _noop(state: _Empty) -> _Empty:
    return {"x": state.get("x", 0) + 1}


def component_costs(ws: Path, model: ScriptedChatModel, repeat: int) -> dict[str, float]:
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
    model: ScriptedChatModel, checkpointer: BaseCheckpointSaver[Any] | None
) -> CompiledStateGraph:
    """What a LangGraph user would write by hand for the same workflow, making the
    same model and tool calls: a planner call (structured output), then each ready
    task as a ``Send`` to a ReAct subgraph (model with tools <-> ``ToolNode``, until
    ``submit_result``), a reporter call and a verifier call (structured output)."""
    planner = model.with_structured_output(PlanUpdate)
    verifier = model.with_structured_output(Verdict)
    actor = model.bind_tools([plain_submit, plain_progress])

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
    sub.add_node("tools", ToolNode([plain_submit, plain_progress]))
    sub.add_edge(START, "react")
    sub.add_conditional_edges("react", after_react, ["tools", END])
    sub.add_conditional_edges("tools", after_tools, ["react", END])
    react_graph = sub.compile()

    def run_task(state: PlainTaskState) -> PlainState:
        out = react_graph.invoke(state)
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
