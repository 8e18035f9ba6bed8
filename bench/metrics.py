"""Metrics overhead: wall time per model call of the demo run with the Prometheus
metrics on (callback handler on every model, tool and task run; usage counted from
each step's update) against the same run with them off, in interleaved rounds."""

from __future__ import annotations

import contextlib
import statistics
import time
import uuid

from aimegraph.checkpoints import hold_thread, open_checkpointer, run_config
from aimegraph.metrics import disable_metrics, enable_metrics
from aimegraph.steering import invoke_held, prepare_demo, run_graph
from bench.common import (
    Headline,
    SectionResult,
    Table,
    fmt_ms,
    fmt_range,
    fmt_x,
    skipped,
    workspace,
)


def _seconds_per_call() -> float:
    thread_id = f"bench-metrics-{uuid.uuid4().hex[:8]}"
    settings, goal = prepare_demo(thread_id)
    with open_checkpointer("memory") as saver, hold_thread(saver, thread_id) as lease:
        graph = run_graph(settings, saver)
        started = time.perf_counter()
        state = invoke_held(graph, {"goal": goal}, run_config(thread_id, settings), lease)
        elapsed = time.perf_counter() - started
    assert state["status"] == "succeeded", state.get("reason")
    return elapsed / state["usage"].llm_calls


def run(quick: bool) -> SectionResult:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return skipped("metrics", "needs pip install 'aimegraph[metrics]'")
    rounds = 3 if quick else 10
    off: list[float] = []
    on: list[float] = []
    # The demo's workspaces go under the working directory: a temporary one.
    with workspace() as root, contextlib.chdir(root):
        _seconds_per_call()  # warm: imports, the sandbox's first start
        for _ in range(rounds):
            disable_metrics()
            off.append(_seconds_per_call())
            enable_metrics()
            on.append(_seconds_per_call())
    disable_metrics()
    ratios = [b / a for a, b in zip(off, on, strict=True)]
    table = Table(
        "Metrics overhead: the demo run per model call, metrics on against off",
        ["metrics", "ms per model call", "ratio to off"],
        notes=[
            f"{rounds} interleaved rounds, median (range); the demo run (scripted model, "
            "real tools), in process, in-memory checkpoints"
        ],
    )
    table.add("off", fmt_range(off, fmt_ms), "1.00x")
    table.add("on", fmt_range(on, fmt_ms), fmt_range(ratios, fmt_x))
    ratio = statistics.median(ratios)
    headline = Headline(
        "metrics overhead per model call (demo run)",
        "the same run with metrics off",
        f"{fmt_x(ratio)} ({fmt_ms(statistics.median(on))} ms vs "
        f"{fmt_ms(statistics.median(off))} ms)",
    )
    metrics = {
        "metrics_on_s_per_call": statistics.median(on),
        "metrics_off_s_per_call": statistics.median(off),
        "metrics_overhead_ratio": ratio,
    }
    return SectionResult("metrics", [table], metrics, [headline])
