"""Issue 30: the work still works in the sandbox. Code reads workspace data and leaves
files the file tools use; the shell tool runs the usual commands; the demo runs its python
calls in the sandbox and its figures are unchanged."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from aimegraph.cli import main
from aimegraph.sandbox import BubblewrapSandbox, Job, Limits, Outcome, Workspace
from aimegraph.tools import make_file_tools, make_python_tool
from aimegraph.tools.shell import make_shell_tool

CSV = "region,units,unit_price\nNorth,3,2.5\nSouth,4,1.25\nNorth,1,10\n"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    (ws.root / "sales.csv").write_text(CSV)
    return ws


def test_code_reads_a_csv_and_the_file_tools_use_its_result(
    bubblewrap: BubblewrapSandbox, ws: Workspace
) -> None:
    python = make_python_tool(ws, sandbox=bubblewrap)
    files = {tool.name: tool for tool in make_file_tools(ws)}
    out = python.invoke(
        {
            "code": textwrap.dedent(
                """
                import csv
                from collections import defaultdict
                totals = defaultdict(float)
                for row in csv.DictReader(open("sales.csv")):
                    totals[row["region"]] += int(row["units"]) * float(row["unit_price"])
                with open("totals.csv", "w") as f:
                    f.writelines(f"{k},{v}\\n" for k, v in sorted(totals.items()))
                """
            )
        }
    )
    # Nothing printed: the model learns which files the code wrote.
    assert out == "(no output; files written: totals.csv)"
    assert files["read_file"].invoke({"path": "totals.csv"}) == "North,17.5\nSouth,5.0\n"
    # The file belongs to the engine's user on the host, so every tool may change it.
    assert (ws.root / "totals.csv").stat().st_uid == os.getuid()
    files["append_file"].invoke({"path": "totals.csv", "content": "East,0.0\n"})
    assert python.invoke({"code": "print(len(open('totals.csv').readlines()))"}) == "3"


def test_the_python_installation_is_there(bubblewrap: BubblewrapSandbox, ws: Workspace) -> None:
    """The environment's packages import (numpy here, as pandas would where installed)."""
    python = make_python_tool(ws, sandbox=bubblewrap)
    assert python.invoke({"code": "import numpy; print(numpy.arange(4).sum())"}) == "6"


def test_shell_runs_the_usual_commands(bubblewrap: BubblewrapSandbox, ws: Workspace) -> None:
    shell = make_shell_tool(ws, sandbox=bubblewrap)
    files = {tool.name: tool for tool in make_file_tools(ws)}
    assert shell.invoke({"command": "pwd"}) == str(ws.root)
    assert shell.invoke({"command": "grep -c North sales.csv"}) == "2"
    command = "tail -n +2 sales.csv | cut -d, -f1 | sort | uniq -c | awk '{print $2, $1}'"
    assert shell.invoke({"command": command}) == "North 2\nSouth 1"
    assert shell.invoke({"command": "wc -l < sales.csv > lines.txt"}) == (
        "(no output; files written: lines.txt)"
    )
    assert files["read_file"].invoke({"path": "lines.txt"}).strip() == "4"
    failed = shell.invoke({"command": "ls missing.txt"})
    assert failed.startswith("exit code: 2\n--- stderr ---\n")
    assert "missing.txt" in failed


def test_shell_output_is_capped(bubblewrap: BubblewrapSandbox, ws: Workspace) -> None:
    shell = make_shell_tool(ws, sandbox=bubblewrap, limits=Limits(max_output_chars=1000))
    out = shell.invoke({"command": "seq 1 100000"})
    assert len(out) < 1400
    assert "\n[... output cut here: " in out
    assert out.startswith("exit code: 0\n--- stdout ---\n1\n2\n")
    assert "\n100000\nnote: the output passed the cap of 1,000 characters" in out


def test_shell_timeout_is_an_error_observation(
    bubblewrap: BubblewrapSandbox, ws: Workspace
) -> None:
    from langchain_core.tools import ToolException

    shell = make_shell_tool(ws, sandbox=bubblewrap, limits=Limits(timeout_s=1))
    with pytest.raises(ToolException, match="timed out after 1 s"):
        shell.invoke({"command": "echo started; sleep 30"})


def test_the_demo_runs_in_the_sandbox_with_unchanged_figures(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bubblewrap: BubblewrapSandbox,
) -> None:
    jobs: list[Job] = []
    run = BubblewrapSandbox.run

    def counting(self: BubblewrapSandbox, job: Job) -> Outcome:
        jobs.append(job)
        return run(self, job)

    monkeypatch.setattr(BubblewrapSandbox, "run", counting)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--checkpoints", "memory", "demo"]) == 0
    printed = capsys.readouterr().out
    assert "sandbox: bubblewrap " in printed and "no network" in printed
    assert [job.language for job in jobs] == ["python"] * 5
    (report,) = tmp_path.glob(".aimegraph/workspace/*/report.md")
    assert report.read_text() == DEMO_REPORT
    assert "Total revenue 40,993.00." in printed


# report.md of the demo as it was before the sandbox (the bundled sales.csv).
DEMO_REPORT = """\
# Sales report

Revenue grew **35.9%** from 2026-01 to 2026-06; the fastest-growing region is **East**.

## Revenue by region

| Region | Revenue | Growth |
|---|---:|---:|
| East | 13,403.00 | +51.2% |
| North | 10,259.25 | +28.4% |
| West | 9,071.75 | +32.1% |
| South | 8,259.00 | +26.4% |

## Revenue by product

| Product | Revenue |
|---|---:|
| Gizmo | 14,065.00 |
| Gadget | 13,978.00 |
| Widget | 12,950.00 |

## Monthly revenue

| Month | Revenue |
|---|---:|
| 2026-01 | 5,773.00 |
| 2026-02 | 6,580.75 |
| 2026-03 | 6,430.25 |
| 2026-04 | 7,102.75 |
| 2026-05 | 7,261.75 |
| 2026-06 | 7,844.50 |
"""
