"""How fast the ``aimegraph`` command and ``import aimegraph`` start, each against its
floor, side by side in one run.

Every row times whole processes (``subprocess.run``, the interpreter started, the
command done, the process gone): ``aimegraph --help`` against ``python -c pass``;
``aimegraph threads`` on an SQLite store of 100 threads against ``--help``; ``import
aimegraph`` against ``import langgraph.graph``. The commands of a row alternate run
by run, so a busy moment on a shared machine hits both; the figure is the median.
The store is made here: one real demo run, its checkpoints copied under 99 more
thread ids. Goals: ``--help`` at most 0.3 s, ``threads`` at most 1.0 s, ``import
aimegraph`` at most 1.5x ``import langgraph.graph``.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import Headline, SectionResult, Table, fmt_s, fmt_x, workspace

SRC = Path(__file__).resolve().parents[1] / "src"
THREADS = 100
HELP_GOAL_S, THREADS_GOAL_S, IMPORT_GOAL_X = 0.3, 1.0, 1.5


def _cli(*args: str) -> list[str]:
    """``aimegraph ARGS`` as the installed script runs it (``python -m`` would put the
    current directory on ``sys.path``; the script does not)."""
    return [sys.executable, "-c", "import sys; from aimegraph.cli import main; sys.exit(main())",
            *args]  # fmt: skip


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _environment() -> dict[str, str]:
    """This checkout's ``src`` first on the path, as the tests and the bench use it."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _run(command: Sequence[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, env=_environment(), capture_output=True, text=True, timeout=120
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)}: {done.stderr.strip()[-500:]}")
    return seconds


def _medians(commands: dict[str, Sequence[str]], cwd: Path, repeat: int) -> dict[str, float]:
    """Median seconds of each command, runs alternating, after one untimed round."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(repeat + 1):
        for name, command in commands.items():
            seconds = _run(command, cwd)
            if i:  # the first round fills the file cache and writes .pyc files
                samples[name].append(seconds)
    return {name: statistics.median(values) for name, values in samples.items()}


def _store_of_threads(root: Path, threads: int) -> str:
    """An SQLite checkpoint store of ``threads`` finished demo runs: one real run, its
    checkpoints and writes copied under new thread ids."""
    path = root / "checkpoints.db"
    url = f"sqlite:///{path}"
    _run(_cli("--checkpoints", url, "demo", "--json", "--thread", "demo-000"), root)
    with sqlite3.connect(path) as db:
        for table in ("checkpoints", "writes"):
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
            others = ", ".join(c for c in columns if c != "thread_id")
            for n in range(1, threads):
                db.execute(
                    f"INSERT INTO {table} (thread_id, {others}) "
                    f"SELECT ?, {others} FROM {table} WHERE thread_id = 'demo-000'",
                    (f"demo-{n:03d}",),
                )
    listed = subprocess.run(
        _cli("--checkpoints", url, "threads", "--json"),
        cwd=root, env=_environment(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if listed.stdout.count('"thread_id"') != threads:
        raise RuntimeError(f"expected {threads} threads in {url}: {listed.stderr[-300:]}")
    return url


def run(quick: bool) -> SectionResult:
    repeat = 3 if quick else 15
    with workspace() as root:
        url = _store_of_threads(root, THREADS)
        seconds = _medians(
            {
                "pass": _python("pass"),
                "help": _cli("--help"),
                "threads": _cli("--checkpoints", url, "threads"),
                "import langgraph.graph": _python("import langgraph.graph"),
                "import aimegraph": _python("import aimegraph"),
            },
            root,
            repeat,
        )
    ratio = seconds["import aimegraph"] / seconds["import langgraph.graph"]
    rows = [
        ("aimegraph --help", "python -c pass", "help", "pass", f"at most {HELP_GOAL_S} s"),
        (
            f"aimegraph threads ({THREADS} threads, SQLite)",
            "aimegraph --help",
            "threads",
            "help",
            f"at most {THREADS_GOAL_S} s",
        ),
        (
            "python -c 'import aimegraph'",
            "python -c 'import langgraph.graph'",
            "import aimegraph",
            "import langgraph.graph",
            f"at most {IMPORT_GOAL_X}x the baseline",
        ),
    ]
    table = Table(
        "Process start: each command against its floor (whole processes)",
        ["command", "seconds", "baseline", "baseline seconds", "ratio", "goal"],
        notes=[
            f"median of {repeat} runs each, the five commands alternating; the store is one "
            f"demo run's checkpoints copied under {THREADS} thread ids",
        ],
    )
    for label, baseline, key, base_key, goal in rows:
        table.add(
            label,
            fmt_s(seconds[key]),
            baseline,
            fmt_s(seconds[base_key]),
            fmt_x(seconds[key] / seconds[base_key]),
            goal,
        )
    metrics = {f"{name.replace(' ', '_')}_s": value for name, value in seconds.items()}
    metrics["import_ratio"] = ratio
    headline = Headline(
        f"startup: aimegraph --help, aimegraph threads ({THREADS} threads), import aimegraph; "
        f"median of {repeat} processes each, alternating",
        "python -c pass; import langgraph.graph",
        f"--help {fmt_s(seconds['help'])} s (pass {fmt_s(seconds['pass'])} s; goal "
        f"{HELP_GOAL_S} s); threads {fmt_s(seconds['threads'])} s (goal {THREADS_GOAL_S} s); "
        f"import aimegraph {fmt_s(seconds['import aimegraph'])} s = {fmt_x(ratio)} import "
        f"langgraph.graph ({fmt_s(seconds['import langgraph.graph'])} s; goal "
        f"{IMPORT_GOAL_X}x)",
    )
    return SectionResult("startup", [table], metrics, [headline])
