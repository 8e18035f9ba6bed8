"""Human waits that end, on the dashboard (issue 37, point 3): a run it drives waits
for each kind of human (plan approval, tool approval, ``ask_human``) until the
deadline, when its timer answers the default; each pause is posted to the webhook."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.testclient import TestClient
from tests.dashboard.test_human_control import LOCAL, start, view
from tests.human_scenarios import EVERY_WAIT, UNATTENDED
from tests.webhook_receiver import Receiver

from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager


def test_each_kind_of_wait_takes_its_default_on_the_dashboard(
    saver: BaseCheckpointSaver[Any], runs: RunManager, tmp_path: Path, webhook: Receiver
) -> None:
    client = TestClient(create_app(saver, runs=runs), base_url=LOCAL)
    config = UNATTENDED | {"notify_webhook": webhook.url, "dashboard_url": "http://dash:1/"}
    thread_id = start(client, runs, tmp_path, EVERY_WAIT, config=config)
    seen = set()
    deadline = time.monotonic() + 60
    while (run := view(client, thread_id))["status"] in ("paused", "running"):
        assert time.monotonic() < deadline, f"still {run['status']} after a minute"
        seen |= {item["kind"] for item in run["interrupts"]}
        runs.wait(thread_id, timeout=10)
        time.sleep(0.05)
    assert run["status"] == "succeeded"
    assert {t["id"]: t["result"]["summary"] for t in run["tasks"]}["t1"] == "North"
    assert webhook.kinds() == ["approve_plan", "approve_tool", "ask_human"]
    assert webhook.bodies[0]["url"] == f"http://dash:1/threads/{thread_id}"
    assert seen <= {"approve_plan", "approve_tool", "ask_human"} and seen
