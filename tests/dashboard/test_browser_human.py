"""Human control on the run page in a real browser (issue 27): a tool call run with
edited arguments, an escalation answered for the failed task, a note sent to the
running actors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.memory import InMemoryStore
from tests.dashboard.conftest import LiveServer
from tests.human_scenarios import ASKING, ESCALATE, FAILING, REPORTED, scenario_spec
from tests.scripted import call, plan, spec, submit

from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager
from aimegraph.dashboard.server import serve_in_background

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect


def start(runs: RunManager, tmp_path: Path, scenario: dict[str, Any], **config: Any) -> str:
    thread_id = runs.start("g", scenario_spec(tmp_path, scenario), config)
    runs.wait(thread_id, timeout=60)
    return thread_id


COMPUTING = {
    "planner": [plan(spec("t1", title="Compute", tool_bundles=["compute"]))],
    "actors": {"t1": [call("calculator", expression="6*7"), submit("{last_tool_output}")]},
    **REPORTED,
}


def test_a_tool_call_runs_with_arguments_edited_on_the_page(
    live: LiveServer, page: Any, tmp_path: Path, screenshots: Path
) -> None:
    thread_id = start(live.runs, tmp_path, COMPUTING, approve_tools=["calculator"])
    page.goto(f"{live.url}/threads/{thread_id}")
    expect(page.locator("body")).to_have_attribute("data-status", "paused")
    form = page.locator(".interrupt[data-kind='approve_tool']")
    expect(form).to_contain_text("Task t1 (Compute) calls calculator")
    form.locator("details > summary").click()
    form.locator("textarea.args-edit").fill('{"expression": "6*8"}')
    page.screenshot(path=screenshots / "run-tool-edit.png", full_page=True)
    form.get_by_role("button", name="Run with these arguments").click()
    expect(page.locator("body")).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(page.locator("#final-answer")).to_contain_text("48")


def test_an_escalation_is_answered_for_the_failed_task_on_the_page(
    live: LiveServer, page: Any, tmp_path: Path, screenshots: Path
) -> None:
    thread_id = start(live.runs, tmp_path, FAILING, **ESCALATE)
    page.goto(f"{live.url}/threads/{thread_id}")
    form = page.locator(".interrupt[data-kind='escalation']")
    expect(form).to_contain_text("no replans left")
    expect(form).to_contain_text("offline")
    form.locator("input.task-answer").fill("1250")
    page.screenshot(path=screenshots / "run-escalation.png", full_page=True)
    form.get_by_role("button", name="Answer for the task").click()
    expect(page.locator("body")).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(page.locator("#final-answer")).to_contain_text("b: (answered by a human) 1250")


def test_a_note_sent_from_the_page_reaches_the_actor(
    saver: BaseCheckpointSaver[Any], page: Any, tmp_path: Path
) -> None:
    runs = RunManager(saver, store=InMemoryStore())
    with serve_in_background(create_app(saver, runs=runs, poll_seconds=0.05)) as url:
        thread_id = start(runs, tmp_path, ASKING)
        page.goto(f"{url}/threads/{thread_id}")
        expect(page.locator("body")).to_have_attribute("data-status", "paused")
        page.fill("#note-text", "Use the EU mirror.")
        page.click("#note-form button[type=submit]")
        expect(page.locator("#note-result")).to_contain_text("sent")
        page.fill(".interrupt[data-kind='ask_human'] input.answer-input", "EU")
        page.get_by_role("button", name="Answer").click()
        expect(page.locator("body")).to_have_attribute("data-status", "succeeded", timeout=30_000)
        runs.wait(thread_id, timeout=60)
    transcript = runs.saver.list({"configurable": {"thread_id": thread_id}})
    assert any(
        "Use the EU mirror." in m.text
        for saved in transcript
        for m in saved.checkpoint["channel_values"].get("messages", [])
    )
