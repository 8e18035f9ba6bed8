"""Issue 38, points 6 and 7, from the command line: what a new user saw on every run.
A mistyped config setting is one line naming the closest real one; the final
checklist is printed once; output to a pipe is not wrapped at 80 columns; ``show``
says ``cancelled`` once, marks the tasks a cancel cut off and those at work, and
lists usage by task in plan order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from rich.console import Console
from tests.conftest import TWO_TASKS, Cli
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig
from aimegraph.cli.report import print_summary
from aimegraph.state import Task, Usage

TYPO = "error: unknown setting 'max_paralel' (did you mean 'max_parallel'?)"

FIRST_THEN_ASK = {
    "planner": [plan(spec("t1"), spec("t2", "t1", tool_bundles=["compute"]))],
    "actors": {
        "t1": [submit("t1 done")],
        "t2": [call("calculator", expression="6*7"), submit("t2 {last_tool_output}")],
    },
    "reporter": [{"text": "done"}],
}
"""t1 finishes and t2 starts within one step of the eager scheduler; t2's calculator
call waits for approval, so the step pauses with t2 at work."""


def test_a_config_typo_is_one_line_naming_the_setting_meant(cli: Cli) -> None:
    code, text = cli("run", "Multiply", "--model", TWO_TASKS, "--config", '{"max_paralel": 2}')
    assert code == 2 and text.strip() == TYPO
    assert cli.run("done")[0] == 0
    code, text = cli("resume", "done", "--config", '{"max_paralel": 2}')
    assert code == 2 and text.strip() == TYPO


def test_a_bad_config_value_is_one_line_naming_the_field(cli: Cli) -> None:
    config = '{"max_parallel": 0, "web": {"allow_host": ["a"]}}'
    code, text = cli("run", "Multiply", "--model", TWO_TASKS, "--config", config)
    assert code == 2 and text.count("\n") == 1 and "http" not in text
    assert text.startswith("error: setting 'max_parallel': input should be greater than or equal")
    assert "(got 0)" in text
    assert "setting 'web': unknown setting 'allow_host' (did you mean 'allow_hosts'?)" in text


def test_python_config_typos_raise_naming_the_setting_meant() -> None:
    with pytest.raises(ValidationError, match="did you mean 'max_parallel'"):
        AimeConfig(max_paralel=2)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="unknown setting 'verfy' .did you mean 'verify'"):
        AimeConfig().override({"verfy": "off"})  # a run's context=
    with pytest.raises(ValidationError, match="unknown setting 'zzz'") as nothing_close:
        AimeConfig(zzz=1)  # type: ignore[call-arg]
    assert "did you mean" not in str(nothing_close.value)


def test_the_final_checklist_is_printed_once(cli: Cli) -> None:
    code, text = cli(
        "run", "Multiply six by seven", "--model", TWO_TASKS, "--thread", "once",
        "--workspace", str(cli.workspace),
    )  # fmt: skip
    assert code == 0
    final = "- [x] t1: Compute the product\n- [x] t2: Phrase the answer (after t1)"
    assert text.count(final) == 1, text


def test_output_to_a_pipe_is_not_wrapped(tmp_path: Path) -> None:
    # As a user runs it, output piped (to a file, less, grep): no terminal, no COLUMNS.
    thread = "a-thread-id-long-enough-to-cross-eighty-columns-" + "x" * 40
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2] / "src"), *sys.path])

    def aimegraph(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "aimegraph.cli", "--checkpoints", "sqlite:///cp.db", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        return done.stdout + done.stderr

    text = aimegraph(
        "run", "Multiply six by seven", "--model", TWO_TASKS, "--thread", thread,
        "--workspace", "ws", "--approve-plan",
    )  # fmt: skip
    assert f"resume with: aimegraph resume {thread} --approve (or --reject REASON," in text
    assert f"inspect with: aimegraph show {thread}   (history: aimegraph history {thread})" in text
    (row,) = aimegraph("threads").splitlines()
    assert row.startswith(thread) and row.endswith("Multiply six by seven")


def test_show_a_cancelled_run(cli: Cli) -> None:
    code, _ = cli.run("c", "--approve-tools", "calculator")
    assert code == 5
    assert cli("cancel", "c")[0] == 0
    code, text = cli("show", "c")
    assert "status: cancelled\n" in text and "(cancelled)" not in text
    assert "- [/] t1: Compute the product\n- [/] t2: Phrase the answer (after t1)" in text


def test_show_marks_a_task_at_work_mid_step(cli: Cli, tmp_path: Path) -> None:
    scenario = tmp_path / "ask.yaml"
    scenario.write_text(yaml.safe_dump(FIRST_THEN_ASK))
    code, _ = cli.run("p", "--approve-tools", "calculator", model=f"scripted:{scenario}")
    assert code == 5
    code, text = cli("show", "p")
    assert "- [x] t1: Task t1\n- [~] t2: Task t2 (after t1)" in text


def test_usage_by_task_follows_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    # Shares are recorded as actors finish: t2 before t1 here.
    share = Usage(llm_calls=1).model_dump(mode="json")
    data = {
        "status": "succeeded",
        "checklist": "",
        "tasks": {"t1": Task(id="t1", title="a"), "t2": Task(id="t2", title="b")},
        "usage": {
            **Usage(llm_calls=2).model_dump(mode="json"),
            "by_task": {"t2": share, "t1": share},
        },
    }
    print_summary(data, Console(width=200))
    text = capsys.readouterr().out
    assert text.index("    t1:") < text.index("    t2:")
