"""``aimegraph eval``: runs, usage errors, ``compare``, and stopping it (Ctrl-C, a
kill) without losing a finished rollout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aimegraph.cli import main
from aimegraph.eval.harness import REPORT_HTML, REPORT_MD, RESULTS
from tests.eval.helpers import THREE_TASKS, write_suite

pytest.importorskip("langchain.agents", reason="create_agent needs the [eval] extra")

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--checkpoints", "memory", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.usefixtures("bubblewrap")  # an eval runs the oracle's python calls there
def test_eval_with_oracle_replies_writes_every_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = write_suite(tmp_path / "s", THREE_TASKS)
    out = tmp_path / "out"
    code, stdout, _ = _run(
        ["eval", str(suite), "--model", "oracle", "-k", "2", "--out", str(out), "--json"], capsys
    )
    assert code == 0
    summary = json.loads(stdout)
    assert summary["ran"] == 12 and summary["complete"]
    assert [s["name"] for s in summary["systems"]] == ["aimegraph", "create_agent"]
    assert all(s["pass_at_1"] == 1.0 for s in summary["systems"])
    for name in (RESULTS, REPORT_MD, REPORT_HTML, "summary.json", "eval.json"):
        assert (out / name).is_file(), name
    assert len((out / RESULTS).read_text().splitlines()) == 12

    code, stdout, _ = _run(
        ["eval", str(suite), "--model", "oracle", "-k", "2", "--out", str(out)], capsys
    )
    assert code == 0
    assert "0 rollout(s) run, 12 already recorded" in stdout


@pytest.mark.usefixtures("bubblewrap")  # an eval runs the oracle's python calls there
def test_a_recorded_rerun_counts_the_recorded_passes_and_no_price_is_no_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: a re-run that finds every rollout recorded said "0 passed" above a table
    of 1.00, and with no prices every report showed $0.0000."""
    suite = write_suite(tmp_path / "s", THREE_TASKS)
    out = tmp_path / "out"
    argv = ["eval", str(suite), "--model", "oracle", "--out", str(out)]
    assert _run([*argv, "--json"], capsys)[0] == 0
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0 and "0 rollout(s) run, 6 already recorded" in stdout
    assert "6/6" in stderr and "6 passed" in stderr and "0 passed" not in stderr
    for report in (stdout, (out / REPORT_MD).read_text(), (out / REPORT_HTML).read_text()):
        assert "$0.0000" not in report
    systems_rows = [
        line for line in (out / REPORT_MD).read_text().splitlines() if "(oracle)" in line
    ]
    assert len(systems_rows) == 2 and all("| – |" in row for row in systems_rows)
    summary = json.loads((out / "summary.json").read_text())
    assert all(s["cost_per_solved"] is None for s in summary["systems"])

    priced = tmp_path / "priced"
    prices = '{"oracle": [1.0, 2.0]}'
    assert (
        _run(
            ["eval", str(suite), "--model", "oracle", "--out", str(priced), "--prices", prices],
            capsys,
        )[0]
        == 0
    )
    assert "$0." in (priced / REPORT_MD).read_text()


def test_the_results_table_off_a_terminal_keeps_each_row_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, point 7: piped, the table was laid out in the console's guessed width
    (80 columns; 60 here), splitting cells such as ``1.00 [0.21, 1.00]`` in two."""
    monkeypatch.setenv("COLUMNS", "60")
    suite = write_suite(tmp_path / "s", THREE_TASKS)
    argv = ["eval", str(suite), "--model", "oracle", "--tasks", "three", "--out", str(tmp_path)]
    code, stdout, _ = _run(argv, capsys)
    assert code == 0
    lines = stdout.splitlines()
    (header,) = [line for line in lines if "system" in line]
    assert "│ tokens / solved │ cost / solved │" in header.replace("┃", "│")
    for system in ("aimegraph", "create_agent"):
        (row,) = [line for line in lines if line.startswith(f"│ {system} ")]
        assert "│ 1.00 [0.21, 1.00] │" in row and row.endswith("│")
    assert max(map(len, lines)) > 60


def test_compare_two_systems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = write_suite(tmp_path / "s", THREE_TASKS)
    out = tmp_path / "out"
    assert (
        _run(["eval", str(suite), "--model", "oracle", "--out", str(out), "--json"], capsys)[0] == 0
    )
    code, stdout, _ = _run(["eval", "compare", f"{out}:aimegraph", f"{out}:create_agent"], capsys)
    assert code == 0
    assert "3 tasks in common" in stdout and "sign test p = 1" in stdout
    code, stdout, _ = _run(
        ["eval", "compare", f"{out}:aimegraph", str(out / RESULTS) + ":create_agent", "--json"],
        capsys,
    )
    assert code == 0 and json.loads(stdout)["tasks"] == 3
    code, _, err = _run(["eval", "compare", str(out), f"{out}:create_agent"], capsys)
    assert code == 2 and "holds several systems (aimegraph, create_agent)" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "nope.yaml", "--model", "oracle"], "cannot read suite nope.yaml"),
        (["eval", "bundled", "--systems", "reactish"], "unknown system 'reactish'"),
        (["eval", "bundled", "--tasks", "nope"], "no task nope"),
        (["eval", "bundled", "-k", "0"], "-k and --concurrency must be at least 1"),
        (["eval", "compare", "a"], "usage: aimegraph eval compare A B"),
        (["eval", "a.yaml", "b.yaml"], "usage: aimegraph eval SUITE"),
        (["eval", "compare", "nowhere", "x"], "nowhere: no results"),
        (["eval", "bundled", "--prices", "[1, 2]"], "--prices must be a mapping"),
        (["eval", "bundled", "--rate-limit", "fast"], "bad rate limit 'fast'"),
        (
            ["eval", "bundled", "--model", "nosuchprovider:m"],
            "unknown model provider 'nosuchprovider' in 'nosuchprovider:m'",
        ),
        (
            ["eval", "bundled", "--tools", "tests.eval.helpers:REGISTRY"],
            "a ToolRegistry replaces the built-in tools",
        ),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = _run([*argv, "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.startswith("error:") and message in " ".join(err.split())


GATE_MODULE = '''
"""The stop test's gate: the first GATE_PASSES calls go through at once; every later
one waits until its run is asked to stop (the eval's drain), and the log says so."""
import os, time
from pathlib import Path

from langchain_core.tools import tool
from langgraph.runtime import get_runtime


def log(event: str) -> None:
    with Path(os.environ["GATE_LOG"]).open("a") as out:
        out.write(event + "\\n")


@tool
def gate() -> str:
    """Pass the gate; returns the number asked for."""
    log("call")
    calls = Path(os.environ["GATE_LOG"]).read_text().split().count("call")
    if calls > int(os.environ["GATE_PASSES"]):
        log("held")
        control = get_runtime().control
        while not control.drain_requested:
            time.sleep(0.01)
        log("drained")
    return "7"
'''


def _gated_suite(folder: Path) -> Path:
    """Four tasks whose rollouts each pass the gate once (``GATE_MODULE``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gate_tools.py").write_text(GATE_MODULE)
    tasks: list[dict[str, Any]] = [
        {
            "id": f"gated{i}",
            "goal": "What is seven?",
            "check": {"number": 7},
            "oracle": {
                "stages": [{"id": "s1", "title": "Pass", "calls": [{"tool": "gate", "args": {}}]}],
                "answer": "{stage:s1}",
            },
        }
        for i in range(4)
    ]
    return write_suite(folder, tasks)


def _start(suite: Path, out: Path, *, passes: int = 1000) -> subprocess.Popen[str]:
    """``aimegraph eval`` of the gated suite, one rollout at a time; the gate lets
    ``passes`` calls through."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(suite.parent)]),
        "GATE_LOG": str(suite.parent / "gate.log"),
        "GATE_PASSES": str(passes),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aimegraph.cli",
            "--checkpoints",
            "memory",
            "eval",
            str(suite),
            "--model",
            "oracle",
            "--tools",
            "gate_tools:gate",
            "--out",
            str(out),
            "--concurrency",
            "1",
            "--json",
        ],
        cwd=out.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _records(out: Path) -> list[dict[str, Any]]:
    path = out / RESULTS
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_until_held(out: Path, suite: Path, proc: subprocess.Popen[str], count: int) -> None:
    """Until ``count`` rollouts are recorded and the next one waits at the gate."""
    deadline = time.monotonic() + 120
    log = suite.parent / "gate.log"
    while len(_records(out)) < count or not (log.exists() and "held" in log.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"not held after {count} rollouts"
        time.sleep(0.05)


def _keys(records: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [(r["system"], r["task"], r["rollout"]) for r in records]


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_a_stopped_eval_resumes_without_rerunning_finished_rollouts(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """Two rollouts pass the gate and are recorded; the third waits there when the
    eval is stopped (issue 47: a stop sent after a sleep found all eight recorded)."""
    suite = _gated_suite(tmp_path / "s")
    out = tmp_path / "out"
    out.mkdir()
    proc = _start(suite, out, passes=2)
    _wait_until_held(out, suite, proc, 2)
    proc.send_signal(stop)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()  # a stop not taken (the gate holds for good) must not outlive the test
    before = _records(out)  # every line whole: a record is written in one flushed line
    assert len(before) == 2
    if stop == signal.SIGINT:
        assert proc.returncode == 130, stderr[-3000:]
        assert "stopped: the finished rollouts are recorded" in stderr
        assert "Incomplete" in (out / REPORT_MD).read_text()
        assert "drained" in (suite.parent / "gate.log").read_text()  # asked to stop, it did
    else:
        assert proc.returncode == -signal.SIGKILL

    proc = _start(suite, out)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["ran"] == 8 - len(before) and summary["complete"]
    after = _records(out)
    assert len(after) == 8 and len(set(_keys(after))) == 8
    assert after[: len(before)] == before  # finished rollouts kept as they were
