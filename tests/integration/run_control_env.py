"""The harness of the run-control tests (issue 29, ``test_run_control_*.py``).

The runs use a scripted plan t0 -> (a, b) -> c whose actors each call one tool,
``step``, that appends "<task> start <pid>" and "<task> end <pid>" to a log: the
side effects to count. The tool can hold its task in flight (``RC_HOLD_AT``): until
the run is asked to drain (its ``RunControl``, read from the runtime), or, with
``RC_HOLD_MODE=go``, until a file appears. The tests wait for these markers, never
for time to pass. Processes are real ``aimegraph`` (or Python) processes; the
resumes run in-process (``main([...])``), which opens the store as a new
invocation would. The ``env`` fixture that writes a test's files is in this
directory's ``conftest.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aimegraph.checkpoints import open_checkpointer, run_config
from aimegraph.checkpoints.delta import finished_tasks
from aimegraph.cli import main

TOOLS_MODULE = '''
"""The tests' side effects: one logged step per task, which can be held in flight."""
import os, time
from pathlib import Path

from langchain_core.tools import tool
from langgraph.runtime import get_runtime


def log(task: str, event: str) -> None:
    fd = os.open(os.environ["RC_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{task} {event} {os.getpid()}\\n".encode())
    finally:
        os.close(fd)


@tool
def step(task: str) -> str:
    """Do the task's one side effect."""
    log(task, "start")
    if task == os.environ.get("RC_HOLD_AT"):
        control = get_runtime().control
        go = Path(os.environ.get("RC_GO", "/nonexistent"))
        by_go = os.environ.get("RC_HOLD_MODE") == "go"
        deadline, said = time.monotonic() + 30, False
        while time.monotonic() < deadline:
            if control.drain_requested and not said:
                log(task, "drained")
                said = True
            if go.exists() or (said and not by_go):
                break
            time.sleep(0.01)
    log(task, "end")
    return f"{task} done"


@tool
def danger(item: str) -> str:
    """Do something that needs a human's approval."""
    log(item, "danger")
    return f"{item} done"


TOOLS = [step, danger]
'''

TASKS = ("t0", "a", "b", "c")


def _spec(task: str, *deps: str) -> dict[str, Any]:
    return {"id": task, "title": f"Step {task}", "dependencies": list(deps),
            "tool_bundles": ["custom"]}  # fmt: skip


SCENARIO: dict[str, Any] = {
    "goal": "Run the four logged steps.",
    "any_goal": True,  # the tests run it with goals of their own
    "planner": [
        {
            "rationale": "a and b are independent; c needs both",
            "tasks": [_spec("t0"), _spec("a", "t0"), _spec("b", "t0"), _spec("c", "a", "b")],
        }
    ],
    "actors": {
        t: [
            {"tool": "step", "args": {"task": t}},
            {"tool": "submit_result", "args": {"status": "completed", "summary": f"{t} ok"}},
        ]
        for t in TASKS
    },
    "reporter": [{"text": "{all_results}"}],
}

DANGER_SCENARIO: dict[str, Any] = {
    "goal": "Do the dangerous thing.",
    "any_goal": True,  # the tests run it with goals of their own
    "planner": [{"rationale": "one task", "tasks": [_spec("d")]}],
    "actors": {
        "d": [
            {"tool": "danger", "args": {"item": "d"}},
            {"tool": "submit_result", "args": {"status": "completed", "summary": "d ok"}},
        ]
    },
    "reporter": [{"text": "{all_results}"}],
}

CLI = [sys.executable, "-m", "aimegraph.cli"]


@dataclass
class Env:
    """One test's files: the tools module, the scenarios, the side-effect log."""

    tmp: Path
    url: str
    model: str
    danger_model: str
    log: Path
    go: Path
    workspace: Path

    def environ(self, **extra: str) -> dict[str, str]:
        path = os.pathsep.join([str(self.tmp), os.environ.get("PYTHONPATH", "")])
        return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **extra}

    def start(self, *argv: str, hold_at: str | None = None, mode: str = "drain",
              url: str | None = None) -> subprocess.Popen[str]:  # fmt: skip
        """``aimegraph --checkpoints URL ARGV`` as a process of its own."""
        extra = {"RC_HOLD_AT": hold_at, "RC_HOLD_MODE": mode, "RC_GO": str(self.go)}
        extra = extra if hold_at else {}
        return subprocess.Popen(
            [*CLI, "--checkpoints", url or self.url, *argv],
            cwd=self.tmp,
            env=self.environ(**extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, thread: str, *extra: str, hold_at: str | None = None, mode: str = "drain",
            url: str | None = None) -> subprocess.Popen[str]:  # fmt: skip
        return self.start(
            "run", SCENARIO["goal"], "--model", self.model, "--thread", thread,
            "--tools", "rc_tools:TOOLS", "--workspace", str(self.workspace), "--json", *extra,
            hold_at=hold_at, mode=mode, url=url,
        )  # fmt: skip

    def events(self) -> Counter[tuple[str, str]]:
        if not self.log.exists():
            return Counter()
        return Counter(tuple(line.split()[:2]) for line in self.log.read_text().splitlines())

    def wait_for(self, *wanted: tuple[str, str], proc: subprocess.Popen[str] | None = None,
                 timeout: float = 30) -> None:  # fmt: skip
        """Until the log shows every ``(task, event)`` in ``wanted``."""
        deadline = time.monotonic() + timeout
        while not all(self.events()[w] for w in wanted):
            if proc is not None and proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"exit {proc.returncode} before {wanted}: {err[-2000:]}")
            assert time.monotonic() < deadline, f"no {wanted} in the log: {self.events()}"
            time.sleep(0.02)


def cli(capsys: pytest.CaptureFixture[str], env: Env, *argv: str) -> tuple[int, str, str]:
    """``aimegraph --checkpoints URL ARGV`` in-process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(["--checkpoints", env.url, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def wait_until_saved(url: str, thread: str, task: str, timeout: float = 30) -> None:
    """Until the running step's saved writes hold ``task``'s result (its actor has
    submitted after its tool, and the store has it)."""
    with open_checkpointer(url) as saver:
        deadline = time.monotonic() + timeout
        while task not in finished_tasks(saver.get_tuple(run_config(thread))):
            assert time.monotonic() < deadline, f"{task}'s result never reached the store"
            time.sleep(0.02)


DEPENDENTS = {"t0": ("a", "b", "c"), "a": ("c",), "b": ("c",), "c": ()}
