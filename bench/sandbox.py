"""The sandbox's price: a ``python`` (and ``shell``) tool call in the bubblewrap sandbox
against the same call unconfined (``sandbox="none"``).

Each row times the tool's whole call (``tool.invoke``), as an actor makes it: the job's
process started, the code run, the output read, and for bubblewrap the namespaces and
mounts set up and the sandbox torn down. The two sandboxes alternate call by call, so a
busy moment on a shared machine hits both; the figure is the median per call. The goal is
at most +50 ms per python call.
"""

from __future__ import annotations

import logging
import shutil
import statistics
import time
from pathlib import Path

from langchain_core.tools import BaseTool

from aimegraph.sandbox import BubblewrapSandbox, Sandbox, UnconfinedSandbox
from aimegraph.tools.python import make_python_tool
from aimegraph.tools.shell import make_shell_tool
from bench.common import Headline, SectionResult, Table, fmt_x, workspace

DEMO_DATA = Path(__file__).resolve().parents[1] / "src" / "aimegraph" / "demo" / "data"

# The demo's revenue computation (task t2), on the bundled sales.csv.
_REVENUE = """\
import csv
from collections import defaultdict
by_region = defaultdict(float)
for r in csv.DictReader(open("sales.csv", newline="")):
    by_region[r["region"]] += int(r["units"]) * float(r["unit_price"])
print(round(sum(by_region.values()), 2))
"""

CALLS: list[tuple[str, str, str, str]] = [
    ("python: print(6 * 7)", "python", "print(6 * 7)", "42"),
    ("python: the demo's revenue by region (csv)", "python", _REVENUE, "40993.0"),
    # The pipe is escaped: the label is a Markdown table cell.
    ("shell: sort sales.csv \\| wc -l", "shell", "sort sales.csv | wc -l", "73"),
]
"""(row label, tool, source, expected output)."""


def _tool(kind: str, root: Path, sandbox: Sandbox) -> BaseTool:
    make = make_python_tool if kind == "python" else make_shell_tool
    return make(root, sandbox=sandbox)


def _median_ms(
    tools: dict[str, BaseTool], arg: str, source: str, want: str, repeat: int
) -> dict[str, float]:
    """Median ms per call of each tool, calls alternating between them."""
    samples: dict[str, list[float]] = {name: [] for name in tools}
    for i in range(repeat + 1):
        for name, tool in tools.items():
            start = time.perf_counter()
            out = tool.invoke({arg: source})
            seconds = time.perf_counter() - start
            if out.strip() != want:
                raise RuntimeError(f"{name}: expected {want!r}, got {out!r}")
            if i:  # the first round warms caches and the sandbox probe
                samples[name].append(seconds * 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}


def run(quick: bool) -> SectionResult:
    repeat = 3 if quick else 40
    bubblewrap = BubblewrapSandbox()
    description = bubblewrap.check()  # refuse to measure where it cannot run
    table = Table(
        "A tool call in the bubblewrap sandbox against the same call unconfined",
        ["call", "unconfined (ms)", "bubblewrap (ms)", "added (ms)", "ratio"],
        notes=[
            f"median of {repeat} calls each, alternating; sandbox: {description}",
            "goal: at most +50 ms per python call",
        ],
    )
    metrics: dict[str, float] = {}
    added_ms: list[str] = []
    # The unconfined sandbox warns on every call, by design: not what is measured here.
    unconfined_log = logging.getLogger("aimegraph.sandbox.unconfined")
    level = unconfined_log.level
    unconfined_log.setLevel(logging.ERROR)
    try:
        with workspace() as root:
            shutil.copyfile(DEMO_DATA / "sales.csv", root / "sales.csv")
            for index, (label, kind, source, want) in enumerate(CALLS):
                tools = {
                    "none": _tool(kind, root, UnconfinedSandbox()),
                    "bubblewrap": _tool(kind, root, bubblewrap),
                }
                arg = "code" if kind == "python" else "command"
                ms = _median_ms(tools, arg, source, want, repeat)
                added = ms["bubblewrap"] - ms["none"]
                table.add(
                    label,
                    f"{ms['none']:.1f}",
                    f"{ms['bubblewrap']:.1f}",
                    f"{added:+.1f}",
                    fmt_x(ms["bubblewrap"] / ms["none"]),
                )
                plain_label = label.replace("\\|", "|")  # the README cell escapes it again
                added_ms.append(
                    f"{plain_label} {added:+.0f} ms ({ms['bubblewrap']:.0f} against "
                    f"{ms['none']:.0f})"
                )
                metrics[f"call{index}.unconfined_ms"] = ms["none"]
                metrics[f"call{index}.bubblewrap_ms"] = ms["bubblewrap"]
                metrics[f"call{index}.ratio"] = ms["bubblewrap"] / ms["none"]
    finally:
        unconfined_log.setLevel(level)
    headline = Headline(
        f"sandbox: a python / shell tool call in bubblewrap, median of {repeat} calls "
        "alternating with the baseline",
        'the same call unconfined (sandbox="none")',
        "; ".join(added_ms) + "; goal at most +50 ms per python call",
    )
    return SectionResult("sandbox", [table], metrics, [headline])
