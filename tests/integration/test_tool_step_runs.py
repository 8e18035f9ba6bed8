"""Tool steps and predefined plans from the command line (issue 34 points 1 and 3):
``aimegraph run --plan FILE``, one ``error:`` line and exit 2 for a bad plan, and a
run of tool steps SIGKILLed in the middle that resumes with no completed step run
again (the steps' side-effect log counts them)."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest import TWO_TASKS, Cli
from tests.integration.test_persistence import aimegraph, finish, kill_once_saved, log_events


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(tmp_path, capsys)


def write_plan(path: Path, plan: Any) -> Path:
    path.write_text(yaml.safe_dump(plan))
    return path


CALC_PLAN = {
    "rationale": "a fixed workflow",
    "tasks": [
        {
            "id": "t1",
            "title": "Compute",
            "call": {"tool": "calculator", "args": {"expression": "6*7"}},
        },
        {"id": "t2", "title": "Phrase the answer", "dependencies": ["t1"]},
    ],
}


def test_run_with_a_plan_file_makes_no_planner_call(cli: Cli, tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "plan.yaml", CALC_PLAN)
    code, out = cli(
        "run", "Multiply six by seven.", "--plan", str(plan), "--model", TWO_TASKS,
        "--workspace", str(cli.workspace), "--thread", "planned",
    )  # fmt: skip
    assert code == 0, out
    assert "Answer: six times seven is 42" in out
    code, shown = cli("show", "planned", "--json")
    assert code == 0
    import json

    state = json.loads(shown)
    assert state["tasks"]["t1"]["call"]["tool"] == "calculator"
    assert "planner" not in state["usage"]["by_role"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read the plan file"),
        ("tasks: [{id: t1, title: x\n", "is not YAML or JSON: "),
        ("tasks: [{id: t1, title: x, dependecies: []}]\n", "did you mean 'dependencies'?"),
        ("tasks: [{id: t1, title: x, call: {tool: nope}}]\n", "calls unknown tool 'nope'"),
        ("tasks: [{id: t1, title: x, call: {tool: calculator, args: {}}}]\n", "Field required"),
        ("tasks: [{id: t1, title: x, dependencies: [t9]}]\n", "depends on unknown task 't9'"),
    ],
)
def test_a_bad_plan_file_is_one_error_line_and_exit_2(
    cli: Cli, tmp_path: Path, content: str | None, says: str
) -> None:
    plan = tmp_path / "plan.yaml"
    if content is not None:
        plan.write_text(content)
    code, out = cli("run", "Multiply.", "--plan", str(plan), "--model", TWO_TASKS)
    assert code == 2
    (line,) = out.strip().splitlines()
    assert line.startswith("error: --plan: ") and says in line


HELD = "while not os.path.exists('go'):\n    time.sleep(0.01)"
"""Code that waits until the test puts the file go in the workspace."""


def logged_step(task: str, sleep: float | None, *deps: str) -> dict[str, Any]:
    """A tool step of the python tool that logs "<task> start|end <pid>" around a sleep
    (None: around a wait for the file go, ``HELD``)."""
    code = (
        "import os, time\n"
        "with open('log.txt', 'a') as log:\n"
        f"    print(f'{task} start {{os.getpid()}}', file=log)\n"
        f"{HELD if sleep is None else f'time.sleep({sleep})'}\n"
        "with open('log.txt', 'a') as log:\n"
        f"    print(f'{task} end {{os.getpid()}}', file=log)\n"
        f"print('{task} logged')\n"
    )
    return {
        "id": task,
        "title": f"Step {task}",
        "dependencies": list(deps),
        "call": {"tool": "python", "args": {"code": code}},
    }


@pytest.mark.slow
def test_sigkill_during_a_tool_step_then_resume_runs_no_completed_step_again(
    tmp_path: Path,
) -> None:
    workspace, log = tmp_path / "ws", tmp_path / "ws" / "log.txt"
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    plan = write_plan(
        tmp_path / "plan.yaml",
        {
            "tasks": [
                logged_step("t0", 0.2),
                logged_step("a", 0.2, "t0"),
                logged_step("b", None, "t0"),
                logged_step("c", 0, "a", "b"),
            ]
        },
    )
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({"any_goal": True, "reporter": [{"text": "{all_results}"}]}))
    run = aimegraph(
        "--checkpoints", url, "run", "Run four logged steps.", "--plan", str(plan),
        "--model", f"scripted:{scenario}", "--thread", "killed", "--workspace", str(workspace),
        "--durability", "sync", "--verify", "off", "--json",
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # Killed once a's step is done and saved, while b waits for the file go.
    seen = kill_once_saved(run, log, {("a", "end"), ("b", "start")}, url=url, saved="a")
    assert ("b", "end") not in seen and ("c", "start") not in seen

    code, summary = finish(aimegraph("--checkpoints", url, "resume", "killed", "--json",
                                     cwd=tmp_path, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE))  # fmt: skip
    assert code == 0 and summary["status"] == "succeeded"
    assert {tid: t["status"] for tid, t in summary["tasks"].items()} == dict.fromkeys(
        ("t0", "a", "b", "c"), "completed"
    )
    assert summary["tasks"]["c"]["result"]["summary"].strip() == "c logged"
    after = Counter((t, e) for t, e, _ in log_events(log))
    # Completed before the kill: exactly once. In flight: redone. After: once.
    assert after == {("t0", "start"): 1, ("t0", "end"): 1, ("a", "start"): 1, ("a", "end"): 1,
                     ("b", "start"): 2, ("b", "end"): 1, ("c", "start"): 1, ("c", "end"): 1}  # fmt: skip
