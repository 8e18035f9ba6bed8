"""Issue 29, point 7, from the command line: a raising tool is one line (its trace in
the run log), a damaged store one error line, reading commands create no store, a
thread waiting for plan approval takes no new goal, ``draw --plan`` draws the plan
awaiting approval, ``show`` counts a paused step's calls, a refused goal is never
stored, and ``--tools`` finds modules in the current directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from tests.conftest import TWO_TASKS, Cli
from tests.scripted import call, plan, spec, submit

from aimegraph.cli import main

RAISING_TOOLS = '''
from langchain_core.tools import tool

@tool
def lookup_price(item: str) -> str:
    """The price of an item."""
    raise RuntimeError("price service down\\nretry later")
'''

PRICE_SCENARIO = {
    "planner": [plan(spec("t1", tool_bundles=["custom"]))],
    "actors": {"t1": [call("lookup_price", item="apple"), submit("{last_tool_output}")]},
    "reporter": [{"text": "done"}],
}


@pytest.mark.slow
def test_a_raising_tool_is_one_line_and_its_trace_is_in_the_run_log(tmp_path: Path) -> None:
    # As a user runs it: the `aimegraph` script (whose sys.path does not hold the
    # current directory), in the directory of the application's own tools module.
    app, bin_dir = tmp_path / "app", tmp_path / "bin"
    app.mkdir(), bin_dir.mkdir()
    (app / "price_tools.py").write_text(RAISING_TOOLS)
    (app / "price.yaml").write_text(yaml.safe_dump(PRICE_SCENARIO))
    script = bin_dir / "aimegraph"
    script.write_text("import sys\nfrom aimegraph.cli import main\nsys.exit(main())\n")
    run = subprocess.run(
        [sys.executable, str(script), "--checkpoints", "sqlite:///cp.db", "run", "Price apples",
         "--model", "scripted:price.yaml", "--tools", "price_tools:lookup_price",
         "--thread", "price", "--workspace", "ws"],
        cwd=app, capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    log = app / "logs" / "price.log"
    assert run.stderr.splitlines() == [
        f"warning: tool raised: RuntimeError: price service down retry later (trace: {log})"
    ], run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    trace = log.read_text()
    assert "Traceback (most recent call last)" in trace and 'raise RuntimeError("price' in trace
    assert "t1 completed: Error: the tool raised RuntimeError" in run.stdout


def _damage(path: Path) -> None:
    """Overwrite the middle half of an SQLite file (its header and schema stay)."""
    data = bytearray(path.read_bytes())
    start, end = len(data) // 4, 3 * len(data) // 4
    data[start:end] = b"\xab" * (end - start)
    path.write_bytes(bytes(data))


def test_a_damaged_store_is_one_error_line(cli: Cli, tmp_path: Path) -> None:
    assert cli.run("t")[0] == 0
    memory = tmp_path / "memory.db"  # the run's episodes, beside the checkpoints
    assert memory.stat().st_size > 0
    _damage(memory)
    code, text = cli("memory", "list")
    assert code == 2 and text.count("\n") == 1, text
    assert text.startswith("error: ") and "malformed" in text and str(memory) in text
    _damage(tmp_path / "cp.db")
    for command in (["threads"], ["show", "t"], ["history", "t"]):
        code, text = cli(*command)
        assert code == 2 and text.count("\n") == 1, (command, text)
        assert text.startswith("error: checkpoint store sqlite:///") and "malformed" in text


def test_reading_commands_create_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)  # the default store is .aimegraph/checkpoints.db under it
    where = tmp_path / "nothing-here"
    url = ["--checkpoints", f"sqlite:///{where / 'cp.db'}"]
    for command, code in (
        ([*url, "threads"], 0), ([*url, "threads", "--json"], 0), (["threads"], 0),
        ([*url, "show", "t"], 6), ([*url, "history", "t"], 6), ([*url, "draw", "--plan", "t"], 6),
        ([*url, "draw", "--format", "mermaid"], 0), ([*url, "memory", "list"], 0),
        (["memory", "search", "x"], 0), ([*url, "wait", "t"], 2),  # wait: Postgres only
    ):  # fmt: skip
        assert main(command) == code, command
    assert not where.exists() and list(here.iterdir()) == []
    assert capsys.readouterr().out.splitlines()[:3] == ["no threads yet", "[]", "no threads yet"]


def test_memory_list_creates_no_memory_store(cli: Cli, tmp_path: Path) -> None:
    assert cli("threads")[0] == 0  # a reading command on a missing file...
    assert not (tmp_path / "cp.db").exists()
    assert cli.run("t", "--config", '{"memory": "off"}')[0] == 0  # ...a run stores one
    (tmp_path / "memory.db").unlink(missing_ok=True)
    code, text = cli("memory", "list")
    assert code == 0 and "(no memories)" in text
    assert not (tmp_path / "memory.db").exists()


def test_a_thread_waiting_for_plan_approval_takes_no_new_goal(cli: Cli) -> None:
    assert cli.run("p", "--approve-plan")[0] == 5
    code, text = cli("run", "Something else", "--model", TWO_TASKS, "--thread", "p")
    assert code == 2 and text.count("\n") == 1
    assert text.startswith("error: thread 'p' waits for the approval of its plan")
    assert "aimegraph resume p --approve" in text and "--reject REASON" in text
    code, shown = cli.json("show", "p")
    assert shown["status"] == "paused" and shown["goal"] == "Multiply six by seven"
    code, done = cli.json("resume", "p", "--approve")
    assert code == 0 and done["goal"] == "Multiply six by seven"


def test_draw_plan_draws_a_plan_awaiting_approval(cli: Cli) -> None:
    assert cli.run("p", "--approve-plan")[0] == 5
    code, text = cli("draw", "--plan", "p", "--format", "mermaid")
    assert code == 0
    assert "t1: Compute the product<br/>(pending)" in text
    assert "t2: Phrase the answer<br/>(pending)" in text and "-->" in text


PARALLEL = {
    "planner": [plan(spec("a", tool_bundles=["compute"]), spec("b", tool_bundles=["compute"]))],
    "actors": {
        "a": [submit("a done")],
        "b": [call("calculator", expression="6*7"), submit("b {last_tool_output}")],
    },
    "reporter": [{"text": "done"}],
}


@pytest.mark.parametrize("scheduler", ["eager", "batch"])
def test_usage_is_current_at_a_pause(cli: Cli, tmp_path: Path, scheduler: str) -> None:
    # a finishes; b asks to call the calculator, which needs approval: the pause
    # comes mid-step, after 3 model calls (the planner's, a's, b's first).
    scenario = tmp_path / "parallel.yaml"
    scenario.write_text(yaml.safe_dump(PARALLEL))
    config = f'{{"scheduler": "{scheduler}"}}'
    code, paused = cli.run(
        "p", "--approve-tools", "calculator", "--config", config, model=f"scripted:{scenario}"
    )
    assert code == 5 and paused["usage"]["llm_calls"] == 3
    assert paused["tasks"]["a"]["status"] == "completed"
    code, shown = cli.json("show", "p")
    assert shown["usage"]["llm_calls"] == 3 and shown["usage"]["by_role"]["actor"]["llm_calls"] == 2
    assert shown["tasks"]["a"]["status"] == "completed"
    code, text = cli("show", "p")
    assert "usage: 3 LLM calls" in text
    code, done = cli.json("resume", "p", "--approve")
    # b's second call, the reporter's and the verifier's: nothing counted twice.
    assert code == 0 and done["usage"]["llm_calls"] == 6


def test_a_goal_the_run_would_refuse_is_never_stored(cli: Cli) -> None:
    goal = "Summarise: " + "x" * 30_000
    code, text = cli("run", goal, "--model", TWO_TASKS, "--thread", "long")
    assert code == 2 and text.count("\n") == 1
    assert text.startswith("error: the goal is 30,011 characters, more than max_goal_chars")
    assert cli.json("threads") == (0, [])
    code, done = cli.run("long", "--config", '{"max_goal_chars": 40000}')  # raised: it runs
    assert code == 0


def test_tools_are_found_in_the_current_directory(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The `aimegraph` script's sys.path has its own directory, not the current one
    # (python -m puts the current directory first): take both out, as there.
    app = tmp_path / "app"
    app.mkdir()
    (app / "shop_tools_cwd.py").write_text(
        textwrap.dedent(
            '''
            from langchain_core.tools import tool

            @tool
            def stock(item: str) -> str:
                """Items in stock."""
                return "12"
            '''
        )
    )
    monkeypatch.chdir(app)
    searched = [p for p in sys.path if p not in ("", ".") and Path(p).resolve() != app]
    monkeypatch.setattr(sys, "path", searched)
    monkeypatch.delitem(sys.modules, "shop_tools_cwd", raising=False)
    code, out = cli.run("t", "--tools", "shop_tools_cwd:stock")
    assert code == 0 and out["status"] == "succeeded"
    code, text = cli("run", "g", "--model", TWO_TASKS, "--tools", "no_such_tools_here:x")
    assert code == 2 and "No module named 'no_such_tools_here'" in text


def test_a_submitted_goal_the_run_would_refuse_is_never_queued() -> None:
    pytest.importorskip("celery", reason="needs the [distributed] extra")
    from aimegraph.distributed.submit import submit_run
    from aimegraph.nodes.planner import GoalError

    # Refused before the broker or the database is contacted (neither is there).
    with pytest.raises(GoalError, match="30,000 characters, more than max_goal_chars"):
        submit_run(
            "x" * 30_000,
            broker="redis://127.0.0.1:1/0",
            checkpoints="postgresql://nobody@127.0.0.1:1/none",
        )
