"""Issue 38, point 1, from the CLI: the scripted demo refuses a goal it was not
written for in one line (exit 2, nothing stored), and its follow-up turn is played
by a second ``aimegraph run --thread`` process on the same SQLite file, with the
settings the thread stores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Cli

from aimegraph.checkpoints import latest_settings, open_checkpointer
from aimegraph.cli import main
from aimegraph.models import load_scenario

SALES_CSV = Path(__file__).parents[2] / "src" / "aimegraph" / "demo" / "data" / "sales.csv"


def test_a_goal_the_demo_was_not_written_for_is_one_error_line(cli: Cli) -> None:
    code, text = cli("run", "x", "--model", "scripted:demo", "--workspace", str(cli.workspace))
    lines = text.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: scenario 'demo'")
    assert "'Analyse the sales data in sales.csv:" in lines[0] and "not 'x'" in lines[0]
    assert "--model openai:<model>" in lines[0] and "OPENAI_BASE_URL" in lines[0]
    assert "--model local" in lines[0]
    assert cli.json("threads") == (0, [])  # refused before anything was stored

    # Its follow-up, on a thread that never asked the demo's goal, says what comes first.
    code, text = cli("run", "Double the total revenue.", "--model", "scripted:demo")
    assert code == 2 and "only as the follow-up of 'Analyse the sales data" in text


def run_process(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``aimegraph --checkpoints <tmp>/cp.db run ARGS --json`` as its own process."""
    done = subprocess.run(
        [sys.executable, "-m", "aimegraph.cli", "--checkpoints", f"sqlite:///{tmp_path}/cp.db",
         "run", *args, "--json"],
        cwd=tmp_path, env={**os.environ, "COLUMNS": "200"}, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.stdout, done.stderr.decode()
    return done.returncode, json.loads(done.stdout)


def test_the_demos_follow_up_is_played_by_a_second_process_on_the_thread(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    shutil.copy(SALES_CSV, workspace / "sales.csv")
    scenario = load_scenario("demo")
    common = ("--model", "scripted:demo", "--thread", "t", "--workspace", str(workspace),
              "--config", '{"sandbox": "none"}')  # fmt: skip

    code, first = run_process(tmp_path, scenario.goal.strip(), *common)
    assert code == 0 and first["status"] == "succeeded"
    assert "Total revenue 40,993.00" in first["final_answer"]

    code, second = run_process(tmp_path, "Double the total revenue.", *common)
    assert code == 0 and second["status"] == "succeeded" and second["verdict"]["passed"]
    assert second["final_answer"] == "The total revenue is 40,993.00; doubled, it is 81,986.00."
    assert set(second["tasks"]) == {"d1"}


def test_a_new_goal_on_the_demos_thread_keeps_the_settings_it_stores(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's offline follow-up: ``demo --sandbox none``, then ``run --thread`` of
    the follow-up goal. The run keeps the demo's stored sandbox (bubblewrap is on no PATH
    here: the demo's python calls would fail in it) and workspace; a flag overrides one
    stored field, said on stderr."""
    monkeypatch.chdir(tmp_path)  # the demo's workspace is .aimegraph/workspace/THREAD
    monkeypatch.setenv("PATH", "/nonexistent")
    code, first = cli.json("demo", "--sandbox", "none", "--thread", "d")
    assert code == 0 and first["status"] == "succeeded"

    capsys.readouterr()
    code = main(["--checkpoints", cli.url, "run", "Double the total revenue.", "--thread", "d",
                 "--model", "scripted:demo", "--config", '{"max_parallel": 1}', "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    second = json.loads(out)
    assert code == 0 and second["status"] == "succeeded", second
    assert second["final_answer"] == "The total revenue is 40,993.00; doubled, it is 81,986.00."
    assert "overrides: max_parallel: 4 -> 1" in err.replace("\n", " ")
    with open_checkpointer(cli.url) as saver:
        settings = latest_settings(saver, "d")
    assert settings.config.sandbox == "none" and settings.config.max_parallel == 1
    assert settings.config.workspace == (tmp_path / ".aimegraph" / "workspace" / "d").absolute()
    assert settings.model == "scripted:demo"

    # Without --model the thread's own is kept too: the demo's scenario refuses a third goal.
    code, text = cli("run", "x", "--thread", "d")
    assert code == 2 and text.startswith("error: scenario 'demo'"), text
