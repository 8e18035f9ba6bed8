"""Shared pieces of the benchmarks: timing, tables, machine info, scenario builders
and SQLite checkpointer helpers (the chat models are in :mod:`bench.chat_models`).

Every section module (``overhead``, ``parallel``, ``economy``, ``scaling``,
``retrieval``) exposes ``run(quick: bool) -> SectionResult``; ``bench.__main__``
runs the selected sections and renders their tables as Markdown.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import math
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from aimegraph import AimeConfig
from aimegraph.checkpoints import make_serializer

T = TypeVar("T")

# --------------------------------------------------------------------------- results


@dataclass
class Table:
    """One Markdown table: a title, a header, rows of already formatted cells, notes."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([str(c) for c in cells])

    def to_markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(self.columns) + " |")
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            lines.append("")
            lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines)


@dataclass(frozen=True)
class Headline:
    """One row of the README's Benchmarks table: what is measured, against what, and
    the result, every figure in it taken from this run's measurements."""

    measurement: str
    baseline: str
    result: str


@dataclass
class SectionResult:
    """What one benchmark section produced.

    ``metrics`` holds every measured number by a stable key (seconds, bytes, ratios,
    counts; differences that may be negative have ``delta`` in their key); the smoke
    test checks they are finite and, but for the deltas, not negative. ``headlines``
    are the section's rows of the README table. ``skipped`` says why a section that
    needs an extra or a service did not run.
    """

    name: str
    tables: list[Table]
    metrics: dict[str, float] = field(default_factory=dict)
    headlines: list[Headline] = field(default_factory=list)
    skipped: str | None = None
    failed: bool = False
    seconds: float = 0.0

    def to_markdown(self) -> str:
        return "\n\n".join(t.to_markdown() for t in self.tables)


def skipped(name: str, reason: str) -> SectionResult:
    """The result of a section whose extra or service is missing."""
    table = Table(name, ["skipped"])
    table.add(reason)
    return SectionResult(name, [table], skipped=reason)


_STOP_WORDS_TEXT = (
    "a an the of to in for and or from on with at by into as is are be it its this that "
    "what how why which who when my our your their they them we us you i do does did can "
    "will must much most each per so not no after before get make makes s even through "
    "above over have has had"
)
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split(" "))


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry content: lower-cased, stop words left out."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP_WORDS}


# --------------------------------------------------------------------------- timing


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Call ``fn`` once; return its result and the wall time in seconds."""
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def median_time(
    fn: Callable[[], object],
    *,
    repeat: int,
    warmup: int = 1,
    setup: Callable[[], object] | None = None,
) -> float:
    """Median wall time of ``repeat`` calls of ``fn`` after ``warmup`` untimed calls.

    ``setup`` (untimed) runs before every call, e.g. to reset a scripted model.
    """
    return statistics.median(time_samples(fn, repeat=repeat, warmup=warmup, setup=setup))


def time_samples(
    fn: Callable[[], object],
    *,
    repeat: int,
    warmup: int = 1,
    setup: Callable[[], object] | None = None,
) -> list[float]:
    """Wall times of ``repeat`` calls of ``fn`` after ``warmup`` untimed calls."""
    samples = []
    for i in range(warmup + repeat):
        if setup is not None:
            setup()
        _, seconds = timed(fn)
        if i >= warmup:
            samples.append(seconds)
    return samples


def fmt_range(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    """``median (min-max)`` of repeated measurements, each formatted by ``fmt``."""
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def fmt_ms(seconds: float, digits: int = 2) -> str:
    return f"{seconds * 1e3:.{digits}f}"


def fmt_s(seconds: float) -> str:
    return f"{seconds:.2f}" if seconds >= 1 else f"{seconds:.3f}"


def fmt_x(ratio: float) -> str:
    return f"{ratio:.2f}x"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_metrics(metrics: Mapping[str, float]) -> list[str]:
    """Keys whose value is not a finite number, or is negative though its key has no
    ``delta`` (a difference between two measurements may be either sign)."""
    return [
        k
        for k, v in metrics.items()
        if not (isinstance(v, int | float) and math.isfinite(v) and ("delta" in k or v >= 0))
    ]


# --------------------------------------------------------------------------- machine


def commit() -> str:
    """The repository's HEAD commit, marked when tracked files differ from it."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short=12", "HEAD") or "unknown (not a git checkout)"
    changed = git("status", "--porcelain", "--untracked-files=no")
    return f"{head} with uncommitted changes" if changed else head


def machine_info() -> dict[str, str]:
    """CPU model, cores, Python, library versions and the date, for the report header."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "n/a"

    return {
        "CPU": cpu,
        "cores": str(os.cpu_count()),
        "Python": platform.python_version(),
        "OS": f"{platform.system()} {platform.release()}",
        "langgraph": version("langgraph"),
        "langchain-core": version("langchain-core"),
        "faiss-cpu": version("faiss-cpu"),
        "numpy": version("numpy"),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# --------------------------------------------------------------------------- scenarios

TaskDict = dict[str, Any]
"""A planner ``TaskSpec`` as a plain dict (``id``, ``title``, ``dependencies``)."""

NOOP_PLAN: dict[str, Any] = {"rationale": "The plan still holds; nothing to change.", "tasks": []}
"""A valid PlanUpdate that changes nothing (what the planner answers when consulted
again under ``replan="every_step"``)."""

REPORTER_TEXT = "Final answer:\n{all_results}"

WORKING_STEP: dict[str, Any] = {
    "tool": "update_progress",
    "args": {"status": "working", "message": "Gathered the material for this task."},
}
"""An actor step before the default ``submit_result``: tasks then take two LLM calls."""


def task(task_id: str, *deps: str) -> TaskDict:
    """A TaskSpec dict with a readable title."""
    return {
        "id": task_id,
        "title": f"Work item {task_id}",
        "description": f"Produce the partial result {task_id}.",
        "dependencies": list(deps),
    }


def scenario(
    tasks: Sequence[TaskDict],
    *,
    noop_replans: bool = False,
    actors: Mapping[str, Any] | None = None,
    actor_steps: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A ScriptedChatModel scenario: one plan, optional no-op replans, actor scripts.

    Args:
        tasks: the plan.
        noop_replans: append a no-op PlanUpdate; the scripted planner repeats its
            last entry, so every later consultation keeps the plan unchanged.
        actors: explicit scripts by task id (they win over ``actor_steps``).
        actor_steps: steps every other task runs before its default submission.
    """
    planner: list[dict[str, Any]] = [
        {"rationale": "Split the goal into work items.", "tasks": list(tasks)}
    ]
    if noop_replans:
        planner.append(NOOP_PLAN)
    scripts: dict[str, Any] = {t["id"]: list(actor_steps) for t in tasks} if actor_steps else {}
    scripts.update(actors or {})
    return {
        "goal": "Assemble the report from its work items.",
        "any_goal": True,  # the benchmarks run it with goals of their own
        "planner": planner,
        "actors": scripts,
        "reporter": [{"text": REPORTER_TEXT}],
    }


def dag_shapes() -> dict[str, list[TaskDict]]:
    """The four 8-task DAG shapes of the parallel benchmark."""
    wide = [task(f"w{i}") for i in range(1, 5)]
    deep = [task("d1", *(t["id"] for t in wide))] + [
        task(f"d{i}", f"d{i - 1}") for i in range(2, 5)
    ]
    return {
        "independent x8": [task(f"t{i}") for i in range(1, 9)],
        "chain of 8": [task("t1")] + [task(f"t{i}", f"t{i - 1}") for i in range(2, 9)],
        "diamond 1-6-1": [task("src")]
        + [task(f"m{i}", "src") for i in range(1, 7)]
        + [task("sink", *(f"m{i}" for i in range(1, 7)))],
        "wide-then-deep 4+4": wide + deep,
    }


def scaling_plan(n: int) -> list[TaskDict]:
    """``n`` tasks, mostly independent: every 10th depends on the two before it."""
    tasks = []
    for i in range(1, n + 1):
        deps = [f"t{j}" for j in (i - 2, i - 1) if j >= 1] if i % 10 == 0 else []
        tasks.append(task(f"t{i}", *deps))
    return tasks


def depth(tasks: Sequence[TaskDict]) -> int:
    """Tasks on the longest dependency path (plan order is topological here)."""
    longest: dict[str, int] = {}
    for t in tasks:
        longest[t["id"]] = 1 + max((longest[d] for d in t["dependencies"]), default=0)
    return max(longest.values(), default=0)


def topological(tasks: Sequence[TaskDict]) -> list[TaskDict]:
    """Tasks in an order that respects dependencies (Kahn, stable)."""
    done: set[str] = set()
    order: list[TaskDict] = []
    pending = list(tasks)
    while pending:
        ready = [t for t in pending if set(t["dependencies"]) <= done]
        if not ready:
            raise ValueError("dependency cycle")
        for t in ready:
            order.append(t)
            done.add(t["id"])
        pending = [t for t in pending if t["id"] not in done]
    return order


def config(workspace: Path, **fields: Any) -> AimeConfig:
    """An AimeConfig jailed to ``workspace`` (nothing is written into the repo)."""
    return AimeConfig(workspace=workspace, **fields)


@contextmanager
def workspace() -> Iterator[Path]:
    """A temporary workspace directory for the file and python tools."""
    with tempfile.TemporaryDirectory(prefix="aimegraph-bench-") as tmp:
        yield Path(tmp)


_THREADS = iter(range(1, 1 << 62))
_THREADS_LOCK = threading.Lock()


def thread_config(**extra: Any) -> RunnableConfig:
    """A RunnableConfig with a fresh thread id (plus e.g. ``max_concurrency``)."""
    with _THREADS_LOCK:
        n = next(_THREADS)
    config: dict[str, Any] = {
        "configurable": {"thread_id": f"bench-{n}"},
        "recursion_limit": 100_000,
        **extra,
    }
    return cast(RunnableConfig, config)


# --------------------------------------------------------------------------- checkpoints


def memory_saver() -> BaseCheckpointSaver[Any]:
    """An InMemorySaver with the project's checkpoint serializer."""
    return InMemorySaver(serde=_serde())


@contextmanager
def sqlite_saver(path: Path) -> Iterator[SqliteSaver]:
    """A ``SqliteSaver`` on the file ``path`` (tables created), closed on exit."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=_serde())
        saver.setup()
        yield saver
    finally:
        conn.close()


def sqlite_bytes(path: Path) -> dict[str, int]:
    """Sizes of what a SqliteSaver wrote: the db file and the blob columns."""
    with sqlite3.connect(str(path)) as conn:
        checkpoints, metadata, rows = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint)), 0), COALESCE(SUM(LENGTH(metadata)), 0), "
            "COUNT(*) FROM checkpoints"
        ).fetchone()
        writes, write_rows = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0), COUNT(*) FROM writes"
        ).fetchone()
    wal = Path(f"{path}-wal")
    return {
        "file": path.stat().st_size + (wal.stat().st_size if wal.exists() else 0),
        "checkpoint_blobs": int(checkpoints + metadata),
        "write_blobs": int(writes),
        "checkpoints": int(rows),
        "writes": int(write_rows),
    }


def _serde() -> Any:
    """The project's restricted msgpack serializer (what ``open_checkpointer`` uses)."""
    return make_serializer()
