"""Human control from the dashboard (issue 27): a tool policy given in a run's config,
a tool call's arguments edited on the page's API, an escalation answered there (or
taking its default at its deadline), a note sent to a thread's running actors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.memory import InMemoryStore
from starlette.testclient import TestClient
from tests.dashboard.conftest import LOCAL
from tests.human_scenarios import ASKING, ESCALATE, FAILING, reading, scenario_spec

from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager


def view(client: TestClient, thread_id: str) -> dict[str, Any]:
    response = client.get(f"/api/threads/{thread_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def start(
    client: TestClient, runs: RunManager, tmp_path: Path, scenario: dict[str, Any], **body: Any
) -> str:
    model = scenario_spec(tmp_path, scenario)
    response = client.post("/api/runs", json={"goal": "g", "model": model, **body})
    assert response.status_code == 202, response.text
    thread_id: str = response.json()["thread_id"]
    runs.wait(thread_id, timeout=60)
    return thread_id


def answer(client: TestClient, runs: RunManager, thread_id: str, **body: Any) -> None:
    response = client.post(f"/api/threads/{thread_id}/resume", json=body)
    assert response.status_code == 202, response.text
    runs.wait(thread_id, timeout=60)


def test_a_policy_from_the_run_config_and_an_edited_call_answered_here(
    client: TestClient, runs: RunManager, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "data").mkdir(parents=True)
    (workspace / "data" / "a.txt").write_text("alpha")
    (workspace / "b.txt").write_text("beta")
    rules = [
        {"tool": "read_file", "args": {"path": "data/*"}, "decision": "allow"},
        {"tool": "read_file", "reason": "outside data/"},
    ]
    thread_id = start(
        client,
        runs,
        tmp_path,
        reading("data/a.txt", "b.txt"),
        config={"approve_tools": rules, "workspace": str(workspace)},
    )
    (waiting,) = view(client, thread_id)["interrupts"]
    assert waiting["kind"] == "approve_tool" and waiting["args"] == {"path": "b.txt"}
    assert "outside data/" in waiting["action_requests"][0]["description"]

    # An edit that does not fit the tool is asked again; a fitting one runs.
    answer(client, runs, thread_id, interrupt_id=waiting["id"], action="edit", args={"file": "x"})
    (again,) = view(client, thread_id)["interrupts"]
    assert "path" in again["error"]
    answer(client, runs, thread_id, action="edit", args={"path": "data/a.txt"})
    run = view(client, thread_id)
    assert run["status"] == "succeeded"
    summary = run["tasks"][0]["result"]["summary"]
    assert "alpha" in summary and "a human edited this call" in summary


def test_an_escalation_answered_on_the_dashboard(
    client: TestClient, runs: RunManager, tmp_path: Path
) -> None:
    thread_id = start(client, runs, tmp_path, FAILING, config=ESCALATE)
    (waiting,) = view(client, thread_id)["interrupts"]
    assert waiting["kind"] == "escalation" and waiting["choices"] == [
        "edit",
        "answer",
        "replan",
        "give_up",
    ]
    refused = client.post(f"/api/threads/{thread_id}/resume", json={"action": "approve"})
    assert refused.status_code == 400 and "escalation" in refused.text
    answer(client, runs, thread_id, answer="1250", task_id="a")
    run = view(client, thread_id)
    assert run["status"] == "succeeded"
    assert {t["id"]: t["result"]["summary"] for t in run["tasks"]}["b"] == (
        "b: (answered by a human) 1250"
    )


def test_an_unanswered_escalation_takes_its_default_on_the_dashboard(
    client: TestClient, runs: RunManager, tmp_path: Path
) -> None:
    config = {**ESCALATE, "escalation_timeout_s": 0.2}
    thread_id = start(client, runs, tmp_path, FAILING, config=config)
    for _ in range(200):  # the timer fires at the deadline and runs the default
        runs.wait(thread_id, timeout=10)
        if view(client, thread_id)["status"] != "paused":
            break
        time.sleep(0.05)
    runs.wait(thread_id, timeout=60)
    run = view(client, thread_id)
    assert run["status"] == "budget_exhausted" and "no answer within 0.2 s" in run["reason"]


def test_a_note_sent_from_the_dashboard_reaches_the_actor(
    saver: BaseCheckpointSaver[Any], tmp_path: Path
) -> None:
    runs = RunManager(saver, store=InMemoryStore())
    client = TestClient(create_app(saver, runs=runs), base_url=LOCAL)
    thread_id = start(client, runs, tmp_path, ASKING)
    assert client.post("/api/threads/ghost/notes", json={"text": "x"}).status_code == 404
    assert client.post(f"/api/threads/{thread_id}/notes", json={"text": " "}).status_code == 400
    sent = client.post(f"/api/threads/{thread_id}/notes", json={"text": "Use the EU mirror."})
    assert sent.status_code == 202, sent.text
    answer(client, runs, thread_id, answer="EU")
    run = view(client, thread_id)
    assert run["status"] == "succeeded"
    prompts = [e["text"] for e in run["actors"]["t1"][0]["transcript"] if e["kind"] == "prompt"]
    assert any("Use the EU mirror." in text for text in prompts)
