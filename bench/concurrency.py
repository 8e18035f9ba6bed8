"""Concurrency under asyncio: ``ainvoke`` against ``invoke`` when parallel tasks call tools.

Two independent tasks each make one tool call that waits ``tool_s`` seconds,
then submit. The same plan runs, side by side in one process:

* ``invoke`` with a sync tool (``time.sleep``): LangGraph's thread pool runs the
  two actors, the guard runs each call in a daemon thread;
* ``invoke`` with an async tool (``asyncio.sleep``): each call awaited on the
  engine's own event loop, the actor's thread waiting;
* ``ainvoke`` with the same sync tool: the async guard runs it in a daemon
  thread and awaits it, so the event loop stays free;
* ``ainvoke`` with an async tool (``asyncio.sleep``), awaited on the loop;
* two ``ainvoke`` runs of the sync-tool plan gathered on one loop.

Each is reported as wall time over the ideal (one tool wait for the parallel
pair), and for ``ainvoke`` the share of an asyncio ticker's ticks the loop
served during the run (100% = never blocked). The model is the scripted one
(instant), so the tool waits dominate.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, tool
from langgraph.graph.state import CompiledStateGraph

from aimegraph import build_aime_graph
from bench.chat_models import BenchChatModel
from bench.common import (
    Headline,
    SectionResult,
    Table,
    config,
    fmt_s,
    fmt_x,
    scenario,
    task,
    workspace,
)

TICK_S = 0.002
GOAL = "Assemble the report from its work items."


@tool
def wait_sync(seconds: float) -> str:
    """Waits (a blocking sync tool, like a slow HTTP client)."""
    time.sleep(seconds)
    return "waited"


@tool
async def wait_async(seconds: float) -> str:
    """Waits (an async tool)."""
    await asyncio.sleep(seconds)
    return "waited"


def build(
    tool_: BaseTool, tool_s: float, ws: Path
) -> tuple[CompiledStateGraph[Any, Any, Any, Any], BenchChatModel]:
    tasks = [{**task(t), "tool_bundles": ["custom"]} for t in ("a", "b")]
    steps = [{"tool": tool_.name, "args": {"seconds": tool_s}}]
    model = BenchChatModel.from_dict(scenario(tasks, actor_steps=steps))
    graph = build_aime_graph(model, tools=[tool_], config=config(ws, tool_timeout_s=60))
    return graph, model


def check(out: dict[str, Any]) -> None:
    assert out["status"] == "succeeded", out.get("reason")
    assert all(t.result.summary != "" for t in out["tasks"].values())


async def ticked(run: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """Wall time of ``run`` and the share of ticks an asyncio ticker got meanwhile."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(TICK_S)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    start = time.perf_counter()
    await run()
    elapsed = time.perf_counter() - start
    ticking.cancel()
    return elapsed, min(1.0, ticks * TICK_S / elapsed)


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def run(quick: bool) -> SectionResult:
    tool_s, repeat = (0.05, 1) if quick else (0.5, 3)
    rows: dict[str, tuple[float, float | None]] = {}
    with workspace() as ws:
        sync_graph, sync_model = build(wait_sync, tool_s, ws)
        async_graph, async_model = build(wait_async, tool_s, ws)

        invoked: dict[str, Callable[[], None]] = {
            "invoke, sync tool": lambda: check(sync_graph.invoke({"goal": GOAL})),
            "invoke, async tool": lambda: check(async_graph.invoke({"goal": GOAL})),
        }

        async def one(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
            check(await graph.ainvoke({"goal": GOAL}))

        async def two() -> None:
            await asyncio.gather(one(sync_graph), one(sync_graph))

        cases: dict[str, Callable[[], Awaitable[None]]] = {
            "ainvoke, sync tool": lambda: one(sync_graph),
            "ainvoke, async tool": lambda: one(async_graph),
            "2 ainvoke runs gathered, sync tool": two,
        }
        # What an idle loop serves on this machine: the 100% of the last column.
        _, idle = asyncio.run(ticked(lambda: asyncio.sleep(tool_s * 2)))
        walls: dict[str, list[float]] = {label: [] for label in invoked}
        shares: dict[str, list[float]] = {}
        for _ in range(repeat):
            for label, invoke in invoked.items():
                start = time.perf_counter()
                invoke()
                walls[label].append(time.perf_counter() - start)
            for label, case in cases.items():
                elapsed, ticks_share = asyncio.run(ticked(case))
                walls.setdefault(label, []).append(elapsed)
                shares.setdefault(label, []).append(ticks_share)
        for label, samples in walls.items():
            served = median(shares[label]) / idle if label in shares else None
            rows[label] = (median(samples), served)
        # Prompt tokens per run: the same scripted run each way (one run of each model).
        tokens: dict[str, int] = {}
        for label, graph_model, go in (
            ("sync", sync_model, invoked["invoke, sync tool"]),
            ("async", async_model, lambda: asyncio.run(one(async_graph))),
        ):
            graph_model.reset()
            go()
            tokens[label] = graph_model.tokens_sent

    table = Table(
        f"Concurrency: 2 parallel tasks, one {tool_s * 1e3:.0f} ms tool call each "
        f"(median of {repeat})",
        [
            "run",
            "wall s",
            "wall / one tool wait",
            "vs invoke",
            "loop ticks served",
            "prompt tokens per run",
        ],
    )
    metrics: dict[str, float] = {"tool_s": tool_s}
    base = rows["invoke, sync tool"][0]
    for label, (wall, share) in rows.items():
        runs = 2 if label.startswith("2 ") else 1
        sent = tokens["async" if "async tool" in label else "sync"]
        table.add(
            label,
            fmt_s(wall),
            f"{wall / tool_s:.2f}",
            f"{wall / base:.2f}x",
            "n/a (no loop)" if share is None else f"{share:.0%}",
            f"{sent:,}" + (f" each ({runs} runs)" if runs > 1 else ""),
        )
        key = label.replace(", ", ".").replace(" ", "_")
        metrics[f"{key}.wall_s"] = wall
        if share is not None:
            metrics[f"{key}.ticks_share"] = max(share, 1e-9)
    table.notes += [
        "wall / one tool wait: 1.00 is ideal for the two tasks' calls overlapping; 2.00 means "
        "they ran one after the other. The rest of the run (planner, actors, reporter, "
        "verifier on the instant scripted model) is the overhead above 1.",
        f"loop ticks served: ticks an asyncio task sleeping {TICK_S * 1e3:.0f} ms per tick "
        "got during the run, over the ticks it gets from an idle loop in the same process "
        "(a blocked loop serves none).",
        "An async-only tool under invoke runs on the engine's own event loop (one per "
        "process, in a daemon thread), its actor's thread waiting for it.",
    ]
    metrics |= {f"tokens.{k}": v for k, v in tokens.items()}
    ratio = {label: wall / base for label, (wall, _) in rows.items()}
    ticks = [share for _, share in rows.values() if share is not None]
    headline = Headline(
        f"concurrency: 2 parallel tasks, one {tool_s * 1e3:.0f} ms tool call each, instant "
        "model; ainvoke with a sync tool / with an async tool / two ainvoke runs gathered",
        "`invoke` with a sync tool, the same run (the same calls and prompt tokens)",
        " / ".join(
            fmt_x(ratio[k])
            for k in (
                "ainvoke, sync tool",
                "ainvoke, async tool",
                "2 ainvoke runs gathered, sync tool",
            )
        )  # fmt: skip
        + f" the invoke time ({rows['invoke, sync tool'][0] / tool_s:.2f} tool waits: the two "
        f"calls overlap); an asyncio ticker got {min(ticks):.0%}-{max(ticks):.0%} of an idle "
        f"loop's ticks meanwhile; {tokens['sync']:,} prompt tokens per run each way",
    )
    return SectionResult("concurrency", [table], metrics, headlines=[headline])
