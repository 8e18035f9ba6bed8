"""Human waits that end, from the CLI (issue 37, point 3): ``aimegraph run`` waits for
each kind of human (plan approval, tool approval, ``ask_human``) until its deadline,
then takes its default and goes on, telling the webhook of each pause; ``aimegraph
resume`` with no answer after a deadline takes the default too."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import Cli
from tests.human_scenarios import EVERY_WAIT, UNATTENDED, scenario_spec
from tests.webhook_receiver import Receiver

from aimegraph import AimeConfig
from aimegraph.checkpoints import RunSettings, open_checkpointer, run_config
from aimegraph.steering import run_graph


def test_each_kind_of_wait_takes_its_default_from_the_cli(
    cli: Cli, tmp_path: Path, webhook: Receiver
) -> None:
    model = scenario_spec(tmp_path, EVERY_WAIT)
    config = UNATTENDED | {"notify_webhook": webhook.url}
    code, summary = cli.run("waits", "--config", json.dumps(config), model=model)
    # Approved the plan and the call, answered the question with the defaults.
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["tasks"]["t1"]["result"]["summary"] == "North"
    assert webhook.kinds() == ["approve_plan", "approve_tool", "ask_human"]
    assert {body["thread_id"] for body in webhook.bodies} == {"waits"}
    assert webhook.bodies[2]["default"] == "North"
    assert webhook.bodies[2]["url"] == "http://127.0.0.1:8765/threads/waits"


def test_resume_with_no_answer_after_the_deadline_takes_the_default(
    cli: Cli, tmp_path: Path
) -> None:
    """The process that ran the step is gone (here: a Python run that paused and
    returned); ``resume`` with no answer after the deadline answers the default."""
    settings = RunSettings(
        model=scenario_spec(tmp_path, EVERY_WAIT),
        config=AimeConfig(workspace=cli.workspace, **UNATTENDED),
    )
    with open_checkpointer(cli.url) as saver:
        graph = run_graph(settings, saver)
        graph.invoke({"goal": "g"}, run_config("gone", settings))
        (waiting,) = graph.get_state(run_config("gone")).interrupts
    assert waiting.value["kind"] == "approve_plan" and waiting.value["default"] == "approve"
    time.sleep(max(0.0, waiting.value["deadline"] - time.time()))
    code, summary = cli.json("resume", "gone")
    assert code == 0 and summary["status"] == "succeeded"
    assert summary["tasks"]["t1"]["result"]["summary"] == "North"


def test_a_wait_with_no_timeout_still_needs_an_answer(cli: Cli, tmp_path: Path) -> None:
    model = scenario_spec(tmp_path, EVERY_WAIT)
    code, summary = cli.run("asks", "--config", json.dumps({"approve_plan": True}), model=model)
    assert code == 5 and summary["interrupts"][0]["deadline"] is None
    assert cli("resume", "asks")[0] == 5
