"""The CLI's run-history commands on a finished, a paused and an unknown thread.

``main([...])`` is called in-process (each call opens the SQLite file itself,
as a separate ``aimegraph`` invocation would); exit codes are the contract:
0 succeeded, 1 failed, 2 usage, 3 rejected, 4 budget exhausted, 5 paused,
6 unknown thread or nothing to resume (the run-control codes, 8, 9, 130 and 143, are
tested in ``test_run_control_*.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import SCENARIOS, Cli

ASK_TWICE = f"scripted:{SCENARIOS / 'ask_twice.yaml'}"


def threads_by_id(cli: Cli) -> dict[str, dict[str, Any]]:
    code, rows = cli.json("threads")
    assert code == 0
    return {row["thread_id"]: row for row in rows}


def test_finished_thread_show_threads_history_resume_and_fork(cli: Cli) -> None:
    # The batch scheduler checkpoints between t1 and t2, the step the fork below starts
    # from (the eager one runs both in one executor step).
    code, summary = cli.run("done", "--config", '{"scheduler": "batch"}')
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["final_answer"] == "Answer: six times seven is the product is 42"

    row = threads_by_id(cli)["done"]
    assert row["status"] == "succeeded" and row["goal"] == "Multiply six by seven"
    assert row["updated"][:4].isdigit()
    code, text = cli("threads")
    assert code == 0 and "done" in text and "succeeded" in text and "Multiply six" in text

    code, text = cli("show", "done")
    assert code == 0
    assert "status: succeeded" in text
    assert "- [x] t1: Compute the product\n- [x] t2: Phrase the answer (after t1)" in text
    assert "verdict: passed: The answer states the product." in text
    assert "Answer: six times seven is the product is 42" in text
    assert "usage: 6 LLM calls, " in text and " tokens, 1 tool call\n" in text  # calculator
    code, shown = cli.json("show", "done")
    assert shown["verdict"]["passed"] and shown["usage"]["llm_calls"] == 6
    assert shown["interrupts"] == [] and shown["tasks"]["t1"]["result"]["summary"].endswith("42")

    code, text = cli("resume", "done")
    assert code == 6 and "'done' has nothing to resume (status: succeeded)" in text

    code, history = cli.json("history", "done")
    assert code == 0
    assert history[0]["status"] == "succeeded" and history[0]["next"] == []
    assert history[-1]["next"] == ["__start__"]
    steps = [row["step"] for row in history]
    assert steps == sorted(steps, reverse=True)  # newest first
    code, text = cli("history", "done")
    assert code == 0 and history[0]["checkpoint_id"] in text and "next: verifier" in text

    # Fork from the checkpoint where t1 was done and t2 about to start: t2 runs again.
    before_t2 = next(r for r in history if r["next"] == ["executor"] and r["tasks_done"] == "1/2")
    code, forked = cli.json("fork", "done", before_t2["checkpoint_id"])
    assert code == 0 and forked["status"] == "succeeded"
    assert forked["tasks"]["t2"]["attempts"] == 1
    code, after = cli.json("history", "done")
    assert len(after) > len(history)
    assert after[0]["checkpoint_id"] != history[0]["checkpoint_id"]

    code, text = cli("fork", "done", "no-such-checkpoint")
    assert code == 6 and "no checkpoint 'no-such-checkpoint' in thread 'done'" in text


def test_show_says_where_the_time_went_and_draws_the_timeline(cli: Cli) -> None:
    code, summary = cli.run("timed")
    assert code == 0
    timeline = summary["timeline"]
    bars = [bar["name"] for bar in timeline["bars"]]
    assert bars == ["planner", "t1", "t2", "reporter", "verifier"]
    assert timeline["critical_path"] == ["t1", "t2"]
    t1, t2 = timeline["bars"][1:3]
    assert 0 <= timeline["time_to_first_task_s"] == t1["start"] <= t1["end"] <= t2["ready"]
    assert t2["ready"] <= t2["start"] <= t2["end"] <= timeline["elapsed_s"]
    assert [tool[0] for tool in t1["tools"]] == ["calculator"]

    code, text = cli("show", "timed")
    assert code == 0 and "time: " in text and "first task after " in text
    assert "critical path " in text and "(t1 -> t2)" in text
    assert "timeline" not in text  # the chart only on request

    code, text = cli("show", "timed", "--timeline")
    assert code == 0
    chart = text[text.index("timeline (seconds since the run started):") :].splitlines()[1:]
    rows = [line.split(" |")[0].strip() for line in chart[:5]]
    assert rows == ["planner", "t1 (completed)", "t2 (completed)", "reporter", "verifier"]
    assert "1 tool call " in chart[1] and "#" in chart[1]
    assert chart[5].startswith("elapsed ") and chart[6].startswith("time to first task ")
    assert chart[7].startswith("critical path ") and chart[7].endswith(": t1 -> t2")


def test_paused_plan_approval_show_threads_and_reject(cli: Cli) -> None:
    code, summary = cli.run("plan", "--approve-plan")
    assert code == 5 and summary["status"] == "paused"
    (waiting,) = summary["interrupts"]
    assert (
        waiting["kind"] == "approve_plan"
        and "- [ ] t1: Compute the product" in waiting["checklist"]
    )

    assert threads_by_id(cli)["plan"]["status"] == "paused"
    code, text = cli("threads")
    assert "plan" in text and "paused" in text

    code, text = cli("show", "plan")
    assert code == 0 and "status: paused" in text
    assert f"waiting (approve_plan) id={waiting['id']}" in text
    assert "- [ ] t2: Phrase the answer (after t1)" in text
    assert "aimegraph resume plan --approve" in text
    code, shown = cli.json("show", "plan")
    assert [i["id"] for i in shown["interrupts"]] == [waiting["id"]]

    code, text = cli("resume", "plan")  # no answer given
    assert code == 5 and "pass --approve, --reject or --answer" in text
    code, text = cli("resume", "plan", "--answer", "yes please")  # not a decision
    assert code == 2 and "--approve or --reject" in text
    assert threads_by_id(cli)["plan"]["status"] == "paused"  # still waiting

    code, summary = cli.json("resume", "plan", "--reject", "too costly")
    assert code == 3 and summary["status"] == "rejected" and "too costly" in summary["reason"]
    assert threads_by_id(cli)["plan"]["status"] == "rejected"
    code, text = cli("resume", "plan", "--approve")
    assert code == 6 and "nothing to resume (status: rejected)" in text


def test_paused_plan_approve_and_edit(cli: Cli, tmp_path: Path) -> None:
    assert cli.run("ok", "--approve-plan")[0] == 5
    code, summary = cli.json("resume", "ok", "--approve")
    assert code == 0 and summary["status"] == "succeeded" and summary["interrupts"] == []

    assert cli.run("edit", "--approve-plan")[0] == 5
    edited = tmp_path / "plan.json"
    edited.write_text(
        json.dumps({"rationale": "one step is enough", "tasks": [{"id": "t1", "title": "Just t1"}]})
    )
    code, summary = cli.json("resume", "edit", "--plan-file", str(edited))
    assert code == 0 and list(summary["tasks"]) == ["t1"]
    assert summary["tasks"]["t1"]["title"] == "Just t1"


def test_parallel_questions_answered_one_by_one_by_interrupt_id(cli: Cli) -> None:
    code, summary = cli.run("ask", model=ASK_TWICE)
    assert code == 5
    ids = {i["question"]: i["id"] for i in summary["interrupts"]}
    assert set(ids) == {"Which region?", "Which year?"}
    assert threads_by_id(cli)["ask"]["status"] == "paused"
    code, text = cli("show", "ask")
    assert "waiting (ask_human)" in text and "Which region?" in text and "Which year?" in text

    code, text = cli("resume", "ask", "--approve")  # a question needs an answer
    assert code == 2 and "--answer TEXT" in text
    code, text = cli("resume", "ask", "--interrupt", "nope", "--answer", "x")
    assert code == 6 and "no pending interrupt 'nope'" in text

    code, summary = cli.json(
        "resume", "ask", "--interrupt", ids["Which region?"], "--answer", "North"
    )
    assert code == 5
    assert [i["id"] for i in summary["interrupts"]] == [ids["Which year?"]]
    code, summary = cli.json("resume", "ask", "--answer", "2024")
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["tasks"]["a"]["result"]["summary"] == "region North"
    assert summary["tasks"]["b"]["result"]["summary"] == "year 2024"


def test_tool_approval_denied_from_the_cli(cli: Cli) -> None:
    code, summary = cli.run("tool", "--approve-tools", "calculator")
    assert code == 5
    (waiting,) = summary["interrupts"]
    assert {k: waiting[k] for k in ("kind", "task_id", "tool", "args")} == {
        "kind": "approve_tool",
        "task_id": "t1",
        "tool": "calculator",
        "args": {"expression": "6*7"},
    }
    code, text = cli("show", "tool")
    assert "waiting (approve_tool)" in text and "calculator" in text and "6*7" in text
    code, summary = cli.json("resume", "tool", "--reject", "no maths")
    assert code == 0
    t1 = summary["tasks"]["t1"]["result"]["summary"]
    assert "denied" in t1 and "no maths" in t1 and "42" not in t1


def test_unknown_thread_is_a_clear_error(cli: Cli) -> None:
    cli.run("exists")  # the store is not empty
    for command in (["show", "ghost"], ["resume", "ghost"], ["history", "ghost"],
                    ["fork", "ghost", "abc"], ["resume", "ghost", "--approve"]):  # fmt: skip
        code, text = cli(*command)
        assert code == 6, command
        assert "no thread 'ghost' in this checkpoint store" in text, command


def test_empty_store_lists_no_threads(cli: Cli) -> None:
    assert cli.json("threads") == (0, [])
    code, text = cli("threads")
    assert code == 0 and "no threads yet" in text


def test_durability_option_reaches_the_graph(cli: Cli) -> None:
    assert cli.run("fast", "--durability", "exit")[0] == 0
    assert cli.run("safe", "--durability", "sync")[0] == 0
    _, fast = cli.json("history", "fast")
    _, safe = cli.json("history", "safe")
    # saved at exit only (plus the input checkpoint the DeltaChannel keys replay from)
    assert len(fast) == 2 and fast[0]["status"] == "succeeded" and fast[1]["step"] == -2
    assert len(safe) > 5  # a checkpoint per super-step
