"""Table 1d of the overhead section: what run control costs.

One SQLite-checkpointed run timed three ways, interleaved: as LangGraph compiles
the graph (no run control), through the aime graph's ``invoke`` (run settings in
the checkpoint metadata, Ctrl-C drains) and that under the thread's lease.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from langgraph.graph.state import CompiledStateGraph

from aimegraph import build_aime_graph
from aimegraph.checkpoints import hold_thread
from aimegraph.models.offline.scripted import ScriptedChatModel
from bench.common import Table, config, fmt_ms, fmt_x, sqlite_saver, thread_config, timed


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
