"""Distributed runs: throughput with 1, 2 and 4 worker processes, and queueing overhead.

Each configuration starts that many ``aimegraph worker`` processes (concurrency 1,
one private Redis queue, Postgres checkpoints), waits until they are ready, then
submits ``RUNS`` runs at once and times the first submission to the last run's
end: runs per minute, and the scaling efficiency against linear (the rate with W
workers over W times the rate with one). Every run is a plan of two independent
tasks on the scripted model at ``LATENCY_S`` per call (a remote model's wait),
so a run is mostly waiting, as real runs are.

Queueing overhead: with one idle worker, ``OVERHEAD_SAMPLES`` runs one after the
other; each sample is the time from calling ``submit_run`` to the thread's first
checkpoint (the worker has taken the message, locked the thread, opened the
checkpointer, built the graph and written the input). The baseline is the same
run started in this process with its checkpointer already open.

Needs Redis and Postgres (``AIMEGRAPH_BENCH_REDIS_URL``, ``AIMEGRAPH_BENCH_POSTGRES_URL``;
defaults on 127.0.0.1) and the ``[distributed]`` extra; skips with a note when they
are missing. On demand only: ``python -m bench --only distributed``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import RunSettings, open_checkpointer, run_config
from aimegraph.graphs.aime import AimeGraph
from bench.chat_models import LatencyChatModel
from bench.common import Headline, SectionResult, Table, fmt_ms, scenario, skipped, task, workspace

REPO = Path(__file__).resolve().parents[1]
REDIS_URL = os.environ.get("AIMEGRAPH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get(
    "AIMEGRAPH_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
LATENCY_S = 0.1
RUNS = 24
OVERHEAD_SAMPLES = 10
GOAL = "Assemble the report from its work items."
MEMORY_SCOPE = "bench-distributed"


def build_graph(
    settings: RunSettings, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> AimeGraph:
    """The workers' ``--graph``: the aime graph on the latency model, with the
    worker's memory store (the checkpoints' database, as by default)."""
    model = LatencyChatModel.from_dict(scenario([task("a"), task("b")]), latency_s=LATENCY_S)
    return build_aime_graph(model, config=settings.config, checkpointer=saver, store=store)


def run(quick: bool) -> SectionResult:
    missing = _missing_services()
    if missing:
        return skipped("distributed", missing)
    from aimegraph.distributed.records import connect
    from aimegraph.memory import open_store

    runs = 4 if quick else RUNS
    counts = (1, 2) if quick else (1, 2, 4)
    samples = 3 if quick else OVERHEAD_SAMPLES
    with workspace() as tmp:
        rates = {w: _throughput(w, runs, tmp) for w in counts}
        # Side by side with the first row: what recalling and recording costs a run.
        without_memory = _throughput(1, runs, tmp, memory="off")
        overhead, baseline = _queueing_overhead(samples, tmp)
        tokens = _tokens_per_run(tmp)
    with connect(POSTGRES_URL) as conn, open_checkpointer(POSTGRES_URL) as saver:
        for (thread_id,) in conn.execute(
            "DELETE FROM aimegraph_runs WHERE thread_id LIKE 'bench-%' RETURNING thread_id"
        ).fetchall():
            saver.delete_thread(thread_id)
    with open_store(POSTGRES_URL) as store:
        for namespace in store.list_namespaces(prefix=("aimegraph", MEMORY_SCOPE)):
            for item in store.search(namespace, limit=10_000):
                store.delete(namespace, item.key)

    scaling = Table(
        f"Runs per minute ({runs} runs of 2 tasks, {LATENCY_S * 1000:.0f} ms per LLM call)",
        ["worker processes", "runs/min", "speed-up", "efficiency vs linear"],
    )
    metrics: dict[str, float] = {}
    for workers, rate in rates.items():
        speedup = rate / rates[1]
        scaling.add(workers, f"{rate:.1f}", f"{speedup:.2f}x", f"{speedup / workers:.0%}")
        metrics[f"runs_per_min_{workers}"] = rate
        metrics[f"efficiency_{workers}"] = speedup / workers
    scaling.add(
        "1, runs with memory off",
        f"{without_memory:.1f}",
        f"{without_memory / rates[1]:.2f}x",
        "",
    )
    metrics["runs_per_min_1_memory_off"] = without_memory
    scaling.notes.append(
        "each worker process runs one run at a time (--concurrency 1); all share one "
        "Redis and one Postgres on the same machine; the workers have their default "
        "memory store (PostgresStore in the same database: each run recalls and records)"
    )
    queueing = Table(
        f"Queueing overhead (median of {samples}, one idle worker)",
        ["measurement", "ms"],
    )
    queueing.add("submit_run to the first checkpoint, through a worker", fmt_ms(overhead))
    queueing.add("invoke to the first checkpoint, in process (baseline)", fmt_ms(baseline))
    metrics["tokens_per_run"] = tokens
    metrics["queueing_overhead_s"] = overhead
    metrics["in_process_first_step_s"] = baseline
    rates_text = " / ".join(f"{rate:.0f}" for rate in rates.values())
    speedups = " / ".join(f"{rate / rates[1]:.2f}x" for w, rate in rates.items() if w > 1)
    linear = " / ".join(f"{rate / rates[1] / w:.0%}" for w, rate in rates.items() if w > 1)
    headline = Headline(
        f"distributed: {runs} runs of 2 tasks at {LATENCY_S * 1e3:.0f} ms per LLM call, "
        f"{' / '.join(map(str, rates))} worker processes (concurrency 1) on one machine, one "
        "Redis, one Postgres",
        "one worker process",
        f"{rates_text} runs per minute with the workers' default memory store: {speedups}, "
        f"{linear} of linear; one worker with memory off: {without_memory:.0f} runs per minute "
        f"({without_memory / rates[1]:.2f}x); `submit_run` to the first checkpoint on an idle "
        f"worker: {fmt_ms(overhead, 0)} ms median (in-process start: {fmt_ms(baseline, 1)} ms); "
        f"{tokens:,} prompt tokens per run, the same run in every row (counted in process, "
        "without the memory store)",
    )
    return SectionResult("distributed", [scaling, queueing], metrics, headlines=[headline])


def _throughput(workers: int, runs: int, tmp: Path, memory: str = "on") -> float:
    """Runs per minute with ``workers`` worker processes (runs with ``memory``)."""
    from aimegraph.distributed import wait_for_run

    with _workers(workers, tmp) as queue:
        started = time.perf_counter()
        threads = [_submit(queue, tmp, memory) for _ in range(runs)]
        for thread_id in threads:
            record = wait_for_run(thread_id, checkpoints=POSTGRES_URL, timeout=600)
            if record.outcome != "succeeded":
                raise RuntimeError(f"bench run {thread_id} ended {record.outcome}")
        elapsed = time.perf_counter() - started
    return runs / elapsed * 60


def _tokens_per_run(tmp: Path) -> int:
    """Prompt tokens one run sends (in process, no store): every row runs this run."""
    model = LatencyChatModel.from_dict(scenario([task("a"), task("b")]), latency_s=0.0)
    build_aime_graph(model, config=AimeConfig(**_config(tmp))).invoke({"goal": GOAL})
    return model.tokens_sent


def _queueing_overhead(samples: int, tmp: Path) -> tuple[float, float]:
    from aimegraph.distributed import wait_for_run

    delays, baselines = [], []
    with _workers(1, tmp) as queue, open_checkpointer(POSTGRES_URL) as saver:
        for _ in range(samples):
            submitted = datetime.now(UTC)
            thread_id = _submit(queue, tmp)
            wait_for_run(thread_id, checkpoints=POSTGRES_URL, timeout=120)
            delays.append((_first_checkpoint(saver, thread_id) - submitted).total_seconds())

            thread_id = f"bench-{uuid.uuid4().hex[:10]}"
            settings = RunSettings(model="scripted:demo", config=AimeConfig(**_config(tmp)))
            graph = build_graph(settings, saver)
            started = datetime.now(UTC)
            graph.invoke({"goal": GOAL}, run_config(thread_id, settings), durability="sync")
            baselines.append((_first_checkpoint(saver, thread_id) - started).total_seconds())
    return statistics.median(delays), statistics.median(baselines)


def _submit(queue: str, tmp: Path, memory: str = "on") -> str:
    from aimegraph.distributed import submit_run

    thread_id: str = submit_run(
        GOAL,
        broker=REDIS_URL,
        checkpoints=POSTGRES_URL,
        model="scripted:demo",  # the workers' --graph builds the latency model
        config={**_config(tmp), "memory": memory},
        thread_id=f"bench-{uuid.uuid4().hex[:10]}",
        queue=queue,
    )
    return thread_id


def _config(tmp: Path) -> dict[str, Any]:
    # The runs' memories in a scope of their own, deleted afterwards.
    return {"workspace": tmp / "workspace", "verify": "off", "user_id": MEMORY_SCOPE}


def _first_checkpoint(saver: BaseCheckpointSaver[Any], thread_id: str) -> datetime:
    stamps = [item.checkpoint["ts"] for item in saver.list(run_config(thread_id))]
    return datetime.fromisoformat(min(stamps))


@contextmanager
def _workers(count: int, tmp: Path) -> Iterator[str]:
    """``count`` ready worker processes on a fresh queue; yields the queue name."""
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    logs = [tmp / f"{queue}-{i}.log" for i in range(count)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "aimegraph.cli", "worker", "--checkpoints", POSTGRES_URL]
            + ["--broker", REDIS_URL, "--queue", queue, "--name", f"{queue}-{i}@%h"]
            + ["--graph", "bench.distributed:build_graph"],
            cwd=tmp,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        for i, log in enumerate(logs)
    ]
    try:
        deadline = time.monotonic() + 120
        while not all(log.exists() and b" ready." in log.read_bytes() for log in logs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                raise RuntimeError(f"workers did not start: see {', '.join(map(str, logs))}")
            time.sleep(0.1)
        yield queue
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=60)
        from aimegraph.distributed import make_app

        with make_app(REDIS_URL).connection_for_write() as connection:
            connection.default_channel.queue_delete(queue)


def _missing_services() -> str:
    try:
        import psycopg
        import redis
        from celery import Celery  # noqa: F401
    except ImportError as exc:
        return f"needs the [distributed] extra ({exc})"
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        return f"Redis not reachable at {REDIS_URL}: {exc}"
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
    except psycopg.Error as exc:
        return f"Postgres not reachable: {exc}"
    return ""
