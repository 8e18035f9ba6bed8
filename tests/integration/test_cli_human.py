"""Human control from the CLI (issue 27): a tool call edited with ``--edit-args``, a
tool policy given in ``--config``, an escalation answered, or taking its default when
nobody answers in time; a note sent to a thread's running actors."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli
from tests.human_scenarios import ASKING, ESCALATE, FAILING, HEARD, reading, scenario_spec

from aimegraph.checkpoints import open_checkpointer


def test_a_tool_call_edited_from_the_cli_runs_with_the_edited_arguments(cli: Cli) -> None:
    code, summary = cli.run("edit", "--approve-tools", "calculator")
    assert code == 5 and summary["interrupts"][0]["args"] == {"expression": "6*7"}
    code, text = cli("resume", "edit", "--edit-args", "[1, 2]")
    assert code == 2 and "--edit-args must be a JSON object" in text
    # An edit that does not fit the tool's schema is asked again, saying why.
    code, summary = cli.json("resume", "edit", "--edit-args", '{"expr": "6*8"}')
    assert code == 5 and "expression" in summary["interrupts"][0]["error"]
    code, summary = cli.json("resume", "edit", "--edit-args", '{"expression": "6*8"}')
    assert code == 0 and summary["status"] == "succeeded"
    t1 = summary["tasks"]["t1"]["result"]["summary"]
    assert "48" in t1 and "a human edited this call" in t1


def test_a_policy_in_config_allows_one_path_and_asks_for_another(cli: Cli, tmp_path: Path) -> None:
    (cli.workspace / "data").mkdir(parents=True)
    (cli.workspace / "data" / "a.txt").write_text("alpha")
    (cli.workspace / "b.txt").write_text("beta")
    rules = [
        {"tool": "read_file", "args": {"path": "data/*"}, "decision": "allow"},
        {"tool": "read_file", "reason": "outside data/"},
    ]
    model = scenario_spec(tmp_path, reading("data/a.txt", "b.txt"))
    config = json.dumps({"approve_tools": rules})
    code, summary = cli.run("policy", "--config", config, model=model)
    assert code == 5
    (waiting,) = summary["interrupts"]
    assert waiting["args"] == {"path": "b.txt"}
    # The rules are stored with the thread: a resume with no flags keeps them.
    code, summary = cli.json("resume", "policy", "--approve")
    assert code == 0 and summary["tasks"]["t1"]["result"]["summary"] == "beta"


def test_an_escalation_answered_from_the_cli(cli: Cli, tmp_path: Path) -> None:
    model = scenario_spec(tmp_path, FAILING)
    code, summary = cli.run("esc", "--config", json.dumps(ESCALATE), model=model)
    assert code == 5
    (waiting,) = summary["interrupts"]
    assert waiting["kind"] == "escalation" and waiting["failed_tasks"][0]["id"] == "a"
    code, text = cli("show", "esc")
    assert "needs a human" in text and "failed a: offline" in text and "choices: edit" in text
    code, text = cli("resume", "esc", "--approve")
    assert code == 2 and "--answer TEXT [--task ID]" in text
    code, summary = cli.json("resume", "esc", "--answer", "1250", "--task", "a")
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["tasks"]["b"]["result"]["summary"] == "b: (answered by a human) 1250"


def test_an_escalation_given_up_from_the_cli(cli: Cli, tmp_path: Path) -> None:
    model = scenario_spec(tmp_path, FAILING)
    assert cli.run("esc", "--config", json.dumps(ESCALATE), model=model)[0] == 5
    code, summary = cli.json("resume", "esc", "--reject", "not today")
    assert code == 4 and "gave up on it: not today" in summary["reason"]


def test_an_unattended_run_takes_the_default_when_nobody_answers(cli: Cli, tmp_path: Path) -> None:
    model = scenario_spec(tmp_path, FAILING)
    config = {**ESCALATE, "escalation_timeout_s": 0.2}
    code, summary = cli.run("late", "--config", json.dumps(config), model=model)
    # The CLI waited for the answer until the deadline, then gave up as set.
    assert code == 4 and summary["interrupts"] == []
    assert "no answer within 0.2 s" in summary["reason"]


def test_a_note_sent_from_the_cli_reaches_the_actor_at_its_next_step(
    cli: Cli, tmp_path: Path
) -> None:
    assert cli.run("noted", model=scenario_spec(tmp_path, ASKING))[0] == 5
    code, text = cli("note", "ghost", "hello")
    assert code == 6 and "no thread 'ghost'" in text
    code, text = cli("note", "noted", "Use the EU mirror.")
    assert code == 0 and "note sent to noted" in text
    code, summary = cli.json("resume", "noted", "--answer", "EU")
    assert code == 0 and summary["status"] == "succeeded"
    with open_checkpointer(cli.url) as saver:
        heard = [
            m.text
            for saved in saver.list({"configurable": {"thread_id": "noted"}})
            for m in saved.checkpoint["channel_values"].get("messages", [])
            if HEARD in m.text
        ]
    assert heard and "Use the EU mirror." in heard[0]
