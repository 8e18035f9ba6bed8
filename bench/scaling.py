"""Scaling: orchestration time and checkpoint bytes for plans of 10, 100 and 1,000 tasks.

The plans are mostly independent tasks (every 10th depends on the two before
it). Tasks have no actor scripts, so each actor submits on its first call and
the run measures the engine, not the model. Checkpoints go to a
``langgraph.checkpoint.sqlite.SqliteSaver`` on a temporary file; the section
reports the database file size and the bytes of the checkpoint and write blobs,
and the same run without a checkpointer to separate the cost of persistence.
"""

from __future__ import annotations

from pathlib import Path

from aimegraph import build_aime_graph
from aimegraph.config import AimeConfig
from bench.chat_models import BenchChatModel
from bench.common import (
    Headline,
    SectionResult,
    Table,
    config,
    fmt_bytes,
    fmt_ms,
    fmt_s,
    scaling_plan,
    scenario,
    sqlite_bytes,
    sqlite_saver,
    thread_config,
    timed,
    workspace,
)

MAX_PARALLEL = 32


SCHEDULERS = ("batch", "eager")


def bench_config(ws: Path, scheduler: str = "eager") -> AimeConfig:
    return config(
        ws,
        max_parallel=MAX_PARALLEL,
        max_tasks=2000,
        max_steps=100_000,
        verify="off",
        scheduler=scheduler,
    )


def run_size(n: int, ws: Path, scheduler: str = "eager") -> dict[str, float]:
    """Run an ``n``-task plan with and without a SqliteSaver; return the measurements."""
    tasks = scaling_plan(n)
    data = scenario(tasks)
    model = BenchChatModel.from_dict(data)
    db = ws / f"scaling-{n}-{scheduler}.db"
    with sqlite_saver(db) as saver:
        graph = build_aime_graph(model, config=bench_config(ws, scheduler), checkpointer=saver)
        cfg = thread_config()
        out, seconds = timed(lambda: graph.invoke({"goal": data["goal"]}, cfg))
        assert out["status"] == "succeeded", out.get("reason")
        steps = graph.get_state(cfg).values["steps"]
    tokens = model.tokens_sent
    sizes = sqlite_bytes(db)
    model.reset()
    bare = build_aime_graph(model, config=bench_config(ws, scheduler))
    out, bare_seconds = timed(lambda: bare.invoke({"goal": data["goal"]}, thread_config()))
    assert out["status"] == "succeeded", out.get("reason")
    return {
        "tasks": n,
        "deps": sum(len(t["dependencies"]) for t in tasks),
        "steps": steps,
        "llm_calls": out["usage"].llm_calls,
        "seconds": seconds,
        "bare_seconds": bare_seconds,
        "tokens": tokens,
        "file_bytes": sizes["file"],
        "blob_bytes": sizes["checkpoint_blobs"] + sizes["write_blobs"],
        "checkpoints": sizes["checkpoints"],
    }


def run(quick: bool) -> SectionResult:
    sizes = (10, 30) if quick else (10, 100, 1000)
    table = Table(
        f"4. Scaling: plan size vs orchestration time and SQLite checkpoint bytes "
        f"(max_parallel={MAX_PARALLEL}, verify='off', instant model)",
        [
            "tasks (deps)",
            "scheduler",
            "orch. steps",
            "LLM calls",
            "run time SqliteSaver (s)",
            "ms / task",
            "run time, no checkpointer (s)",
            "checkpoints",
            "DB file",
            "blob bytes",
            "blob KB / task",
            "prompt tokens / task",
            "growth: tasks / time / bytes",
        ],
    )
    metrics: dict[str, float] = {}
    previous: dict[str, dict[str, float]] = {}
    with workspace() as ws:
        for n in sizes:
            for scheduler in SCHEDULERS:
                r = run_size(n, ws, scheduler)
                before = previous.get(scheduler)
                growth = (
                    f"{n / before['tasks']:.0f}x / {r['seconds'] / before['seconds']:.1f}x / "
                    f"{r['blob_bytes'] / before['blob_bytes']:.1f}x"
                    if before
                    else "-"
                )
                table.add(
                    f"{n} ({int(r['deps'])})",
                    scheduler,
                    int(r["steps"]),
                    int(r["llm_calls"]),
                    fmt_s(r["seconds"]),
                    fmt_ms(r["seconds"] / n, 1),
                    fmt_s(r["bare_seconds"]),
                    int(r["checkpoints"]),
                    fmt_bytes(r["file_bytes"]),
                    fmt_bytes(r["blob_bytes"]),
                    f"{r['blob_bytes'] / n / 1024:.1f}",
                    f"{r['tokens'] / n:,.0f}",
                    growth,
                )
                key = f"n{n}" if scheduler == "eager" else f"n{n}.batch"
                metrics |= {f"{key}.{k}": v for k, v in r.items() if k != "deps"}
                metrics[f"{key}.blob_bytes_per_task"] = r["blob_bytes"] / n
                previous[scheduler] = r
    table.notes += [
        "Every 10th task depends on the two before it; the rest are independent. Each task "
        "is one actor LLM call (an immediate submit_result); plus one planner and one "
        "reporter call.",
        "checkpoints = rows in the checkpoints table, top-level and subgraph namespaces "
        "(each executor subgraph checkpoints its own super-steps). blob bytes = checkpoint + "
        "metadata + pending-write blobs; DB file = the SQLite file size.",
        "growth = this row / the previous row. Bytes growing faster than tasks would mean "
        "each checkpoint re-serialises state that grows with the plan; the task map and the "
        "update log are DeltaChannels (a checkpoint stores the step's writes, a snapshot every "
        "100 updates).",
        "Most checkpoints are the executor subgraphs' own (the actor's input, its start and "
        "its one react step, which ran the submit_result).",
        "prompt tokens / task: what the model was sent per run over the tasks (message text "
        "and bound tool schemas, 4 characters a token).",
        "scheduler: batch = one orchestrator step per wave of up to max_parallel tasks "
        "(Send each); eager (the default) = tasks start as their dependencies complete, "
        "inside executor steps; orch. steps counts both as waves of tasks started together.",
    ]
    eager = [metrics[f"n{n}.blob_bytes_per_task"] / 1024 for n in sizes]
    batch = [metrics[f"n{n}.batch.blob_bytes_per_task"] / 1024 for n in sizes]
    ms = [metrics[f"n{n}.seconds"] / n * 1e3 for n in sizes]
    ms_batch = [metrics[f"n{n}.batch.seconds"] / n * 1e3 for n in sizes]
    tokens = [metrics[f"n{n}.tokens"] / n for n in sizes]

    def joined(values: list[float], fmt: str = ".1f") -> str:
        return " / ".join(format(v, fmt) for v in values)

    headline = Headline(
        f"scaling, {' / '.join(f'{n:,}' for n in sizes)} tasks (SQLite checkpoints, instant model)",
        f"the {sizes[0]}-task plan; the batch scheduler",
        f"{joined(eager)} KB of checkpoints per task with eager (batch {joined(batch)}); run "
        f"time {joined(ms, '.0f')} ms per task eager against {joined(ms_batch, '.0f')} batch; "
        f"{joined(tokens, ',.0f')} prompt tokens per task (both schedulers make the same calls)",
    )
    return SectionResult("scaling", [table], metrics, headlines=[headline])
