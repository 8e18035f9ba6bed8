"""What a new user waits for: ``make demo`` in a fresh clone of the commit under test.

The first row is the README's first command exactly as a newcomer runs it: a fresh
``git clone`` of the current commit, then ``make demo``, which builds ``.venv`` (the base
install, no extras) and runs the offline demo. pip's download cache is whatever the
machine has (warm on a machine that already ran ``make test``); the row says so. The
second row runs ``make demo`` again in the same clone, with ``.venv`` in place: the demo
itself. A clone's first run prints what it installs; a run that fails is reported as a
failed section, never as a time.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import Headline, SectionResult, Table

ROOT = Path(__file__).resolve().parents[1]


def _timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-2000:]
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{tail}")
    return seconds


def _fresh_clone(into: Path) -> Path:
    clone = into / "aimegraph"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    return clone


def run(quick: bool) -> SectionResult:
    runs = 1 if quick else 3
    first: list[float] = []
    again: list[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="aimegraph-install-") as tmp:
            clone = _fresh_clone(Path(tmp))
            first.append(_timed(["make", "demo"], clone))
            again.append(_timed(["make", "demo"], clone))
    table = Table(
        "make demo in a fresh clone (seconds, wall clock)",
        ["what", "runs", "min", "median", "max"],
    )
    for label, samples in (
        ("fresh clone: make demo (builds .venv, then the demo)", first),
        ("same clone again: make demo (.venv in place)", again),
    ):
        table.add(
            label,
            len(samples),
            f"{min(samples):.1f}",
            f"{statistics.median(samples):.1f}",
            f"{max(samples):.1f}",
        )
    table.notes.append(
        "pip's cache as the machine has it (warm after `make test`); a cold cache adds the "
        "downloads. Each clone is new, so .venv is built from nothing every time."
    )
    median_first = statistics.median(first)
    median_again = statistics.median(again)
    return SectionResult(
        "install",
        [table],
        metrics={"make_demo_fresh_s": median_first, "make_demo_again_s": median_again},
        headlines=[
            Headline(
                "`make demo` in a fresh clone (builds .venv, runs the demo)",
                "the demo alone, .venv in place",
                f"{median_first:.0f} s (demo alone {median_again:.0f} s), median of {runs}",
            )
        ],
    )
