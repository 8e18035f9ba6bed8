"""``aimegraph show`` (issue 47, point 12): it starts with the thread and its goal,
with no blank line above them, and a thread waiting on a timed human wait shows the
wait's deadline (the local time and the time left) and the default it then takes."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console
from tests.conftest import Cli
from tests.human_scenarios import EVERY_WAIT

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import RunSettings, open_checkpointer, thread_config
from aimegraph.cli.distributed import show_record
from aimegraph.cli.waiting import deadline_line
from aimegraph.distributed.records import RunRecord
from aimegraph.models import ScriptedChatModel
from aimegraph.state.timing import local_time


def test_show_starts_with_the_thread_and_its_goal(cli: Cli) -> None:
    code, _ = cli.run("headed")
    assert code == 0
    code, text = cli("show", "headed")
    assert code == 0
    assert text.startswith("thread: headed\ngoal: Multiply six by seven\nstatus: succeeded\n")


def test_show_of_a_queued_distributed_run_starts_the_same_way(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = RunSettings(model="scripted:demo", config=AimeConfig())
    record = RunRecord(
        thread_id="queued-1", state="queued", status=None, reason=None, goal="Count\n  the rows",
        settings=settings, worker=None, deliveries=0, submitted_at=datetime.now(UTC),
    )  # fmt: skip
    assert show_record(record, argparse.Namespace(json=False), Console(width=200)) == 0
    said = capsys.readouterr().out
    assert said.startswith("thread: queued-1\ngoal: Count the rows\nstatus: queued\nmodel: ")


@pytest.mark.parametrize(
    ("settings", "kind", "default"),
    [
        ({"approve_plan": True, "approval_timeout_s": 3600}, "approve_plan", "reject"),
        ({"ask_human_timeout_s": 3600, "ask_human_default": "North"}, "ask_human", "the answer 'North'"),
    ],
)  # fmt: skip
def test_show_gives_a_timed_waits_deadline_and_default(
    cli: Cli, settings: dict[str, Any], kind: str, default: str
) -> None:
    with open_checkpointer(cli.url) as saver:
        config = AimeConfig(workspace=cli.workspace, **settings)
        model = ScriptedChatModel.from_dict(EVERY_WAIT)
        graph = build_aime_graph(model, config=config, checkpointer=saver)
        graph.invoke({"goal": "Compute, then ask"}, thread_config("waits"))
        (wait,) = graph.get_state(thread_config("waits")).interrupts
    assert wait.value["kind"] == kind
    code, text = cli("show", "waits")
    assert code == 0
    assert text.startswith("thread: waits\ngoal: Compute, then ask\nstatus: paused\n")
    (line,) = [row for row in text.splitlines() if row.startswith("deadline: ")]
    at = re.escape(local_time(wait.value["deadline"]))
    left = r"in (\d+ h )?(\d+ min )?\d+ s"
    said = rf"deadline: {at} \({left}\); unanswered, it takes the default: {re.escape(default)}"
    assert re.fullmatch(said, line), line


def test_a_deadline_says_the_time_left_or_past_and_what_the_default_is() -> None:
    at = local_time(10_000.0)
    assert deadline_line("approve_tool", 10_000.0, "approve", now=10_000.0 - 3725) == (
        f"deadline: {at} (in 1 h 2 min 5 s); unanswered, it takes the default: approve"
    )
    assert deadline_line("escalation", 10_000.0, "give_up", now=10_042.0) == (
        f"deadline: {at} (passed 42 s ago); unanswered, it takes the default: give_up"
    )
    assert deadline_line("ask_human", 10_000.0, "", now=9_990.0).endswith(
        "(in 10 s); unanswered, it takes the default: no answer"
    )
