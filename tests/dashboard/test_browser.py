"""The dashboard in a real browser (headless Chromium from Debian, driven by
Playwright): the threads page, the demo started from the page and followed to
the end, a run's timeline, a plan approved on the page, hostile text shown as text, and
the alerts firing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from tests.dashboard.conftest import HOSTILE, LiveServer

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.alerts import AlertRule, AlertSettings
from aimegraph.checkpoints import thread_config
from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager
from aimegraph.dashboard.server import serve_in_background
from aimegraph.models import ScriptedChatModel

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect


def open_details(details: Any) -> None:
    if details.get_attribute("open") is None:
        details.locator("> summary").click()
    expect(details).to_have_attribute("open", "")


def test_threads_page_starts_the_demo_and_follows_it_to_the_end(
    live: LiveServer, page: Any, screenshots: Path
) -> None:
    page.goto(live.url + "/")
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator("#count")).to_have_text("0 of 0")
    page.screenshot(path=screenshots / "threads-empty.png")

    page.click("#demo-start")
    page.wait_for_url("**/threads/demo-*")
    expect(page.locator("body")).to_have_attribute("data-status", "succeeded", timeout=30_000)
    checklist = page.locator("#checklist")
    expect(checklist).to_contain_text("- [x] t4: Write the report")
    assert "[ ]" not in checklist.inner_text()
    expect(page.locator("#plan img.plan-drawing")).to_be_visible()
    expect(page.locator("#verdict")).to_contain_text("passed")
    expect(page.locator("#usage")).to_contain_text("actor")
    open_details(page.locator("details[data-task='t1']"))
    open_details(page.locator("details[data-task='t1'] details.actor"))
    expect(page.locator("details[data-task='t1'] .transcript")).to_contain_text("list_dir")
    page.screenshot(path=screenshots / "run-demo-finished.png", full_page=True)

    page.goto(live.url + "/")
    row = page.locator("#threads tbody tr")
    expect(row).to_have_count(1)
    expect(row.first).to_contain_text("succeeded")
    page.select_option("#status-filter", "failed")
    expect(row).to_have_count(0)
    page.select_option("#status-filter", "succeeded")
    expect(row).to_have_count(1)
    row.first.click()  # one click opens the thread
    page.wait_for_url("**/threads/demo-*")


RETRIED_CHAIN: dict[str, Any] = {
    "planner": [
        {
            "rationale": "compute, then phrase",
            "tasks": [
                {"id": "t1", "title": "Compute", "tool_bundles": ["compute"]},
                {"id": "t2", "title": "Phrase", "dependencies": ["t1"]},
            ],
        }
    ],
    "actors": {
        "t1": {
            "attempts": [
                [{"tool": "submit_result", "args": {"status": "failed", "summary": "not yet"}}],
                [
                    {"tool": "calculator", "args": {"expression": "6*7"}},
                    {"tool": "submit_result", "args": {"status": "completed", "summary": "42"}},
                ],
            ]
        },
        "t2": [{"tool": "submit_result", "args": {"status": "completed", "summary": "it is 42"}}],
    },
    "reporter": [{"text": "42"}],
    "verifier": [{"passed": True, "reasoning": "fine"}],
}


def test_the_run_page_draws_the_timeline(
    live: LiveServer, page: Any, saver: BaseCheckpointSaver[Any], tmp_path: Path, screenshots: Path
) -> None:
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(RETRIED_CHAIN),
        config=AimeConfig(workspace=tmp_path, verify="final", task_retries=1),
        checkpointer=saver,
    )
    graph.invoke({"goal": "Multiply six by seven"}, thread_config("timed"))
    page.goto(f"{live.url}/threads/timed")
    expect(page.locator("body")).to_have_attribute("data-status", "succeeded")

    rows = page.locator("#timeline .gantt-row")
    expect(rows).to_have_count(5)
    names = [rows.nth(i).get_attribute("data-name") for i in range(5)]
    assert names == ["planner", "t1", "t2", "reporter", "verifier"]
    t1, t2 = rows.nth(1), rows.nth(2)
    expect(t1.locator(".gantt-bar.task")).to_have_class(re.compile(r"status-completed.*critical"))
    expect(t1.locator(".gantt-tool")).to_have_count(1)  # its calculator call
    expect(t1.locator(".gantt-bar.earlier")).to_have_count(1)  # its failed first attempt
    expect(t2.locator(".gantt-label")).to_have_text("t2")
    # Placed by the script (the page's CSP refuses style attributes): t2's bar starts
    # where t1's ends or later, and both lie inside the track.
    track = t1.locator(".gantt-track").bounding_box()
    first = t1.locator(".gantt-bar.task").bounding_box()
    second = t2.locator(".gantt-bar.task").bounding_box()
    assert track and first and second and first["width"] > 0 and second["width"] > 0
    assert second["x"] >= first["x"] + first["width"] - 1
    assert (
        track["x"] <= first["x"]
        and second["x"] + second["width"] <= track["x"] + track["width"] + 1
    )
    summary = page.locator("#timeline-summary")
    expect(summary).to_contain_text("first task after")
    expect(summary).to_contain_text("critical path")
    expect(summary).to_contain_text("t1 → t2")
    page.locator("#timeline").screenshot(path=screenshots / "run-timeline.png")


def test_a_plan_is_approved_on_the_page_and_the_run_continues(
    live: LiveServer, page: Any, screenshots: Path
) -> None:
    page.goto(live.url + "/")
    page.check("#demo-approve")
    page.click("#demo-start")
    page.wait_for_url("**/threads/demo-*")
    expect(page.locator("body")).to_have_attribute("data-status", "paused")
    waiting = page.locator("#waiting")
    expect(waiting.locator("pre.checklist")).to_contain_text("- [ ] t1: Inspect the dataset")
    page.screenshot(path=screenshots / "run-plan-approval.png", full_page=True)

    waiting.get_by_role("button", name="Approve plan").click()
    expect(page.locator("body")).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(waiting).to_be_hidden()
    expect(page.locator("#checklist")).to_contain_text("- [x] t4: Write the report")
    page.screenshot(path=screenshots / "run-plan-approved-finished.png", full_page=True)


def test_markup_in_run_data_shows_as_text(
    live: LiveServer, page: Any, hostile_thread: str, screenshots: Path
) -> None:
    page.goto(f"{live.url}/threads/{hostile_thread}")
    expect(page.locator("body")).to_have_attribute("data-status", "succeeded")
    expect(page.locator("#goal")).to_have_text(f"Show {HOSTILE}")
    open_details(page.locator("details[data-task='t1']"))
    expect(page.locator("details[data-task='t1'] .result-summary")).to_have_text(HOSTILE)
    expect(page.locator("#plans")).to_contain_text(f"first plan {HOSTILE}")
    expect(page.locator("#final-answer")).to_contain_text(f"Answer {HOSTILE}")
    page.screenshot(path=screenshots / "run-markup-as-text.png", full_page=True)
    injected = "main script, main img:not(.plan-drawing), main [onerror]"
    assert page.locator(injected).count() == 0
    assert page.evaluate("window.pwned") is None

    page.goto(live.url + "/")
    expect(page.locator("#threads tbody tr").first).to_contain_text(HOSTILE)
    assert page.locator(injected).count() == 0
    assert page.evaluate("window.pwned") is None


def test_pages_show_their_state_before_the_live_stream(
    live: LiveServer, page: Any, hostile_thread: str
) -> None:
    # The event streams never answer here: all a page shows came with the page.
    page.route("**/events", lambda route: route.abort())
    page.goto(f"{live.url}/threads/{hostile_thread}")
    expect(page.locator("body")).to_have_attribute("data-status", "succeeded")
    expect(page.locator("#live")).not_to_have_text("live")
    expect(page.locator("#checklist")).to_contain_text("- [x] t2: Try another way")
    expect(page.locator("details[data-task='t2']")).to_contain_text("fine")
    expect(page.locator("#usage")).to_contain_text("actor")
    expect(page.locator("#note-form")).to_be_hidden()  # a finished run reads no notes
    assert page.evaluate("window.pwned") is None

    page.goto(live.url + "/")
    expect(page.locator("#threads tbody tr")).to_have_count(1)
    expect(page.locator("#count")).to_have_text("1 of 1")


def test_the_threads_page_lists_firing_alerts_with_their_origin_then_when_they_resolved(
    saver: BaseCheckpointSaver[Any], runs: RunManager, page: Any
) -> None:
    rules = AlertSettings(
        rules=[AlertRule(name="waiting", kind="human_wait", limit=0.1)], interval_s=0.05
    )
    app = create_app(saver, runs=runs, alerts=rules, poll_seconds=0.05)
    try:
        with serve_in_background(app) as url:
            thread_id = runs.start_demo(approve_plan=True)
            runs.wait(thread_id, timeout=60)  # paused for the plan's approval
            page.goto(url + "/")
            expect(page.locator("#alerts-card")).to_be_visible()
            alert = page.locator("#alerts li.alert.firing")
            expect(alert).to_contain_text("waiting (dashboard): a run has waited")
            expect(alert).to_contain_text(" since ")
            expect(alert.locator(".badge.status-failed")).to_have_text("firing")
            runs.resume(thread_id, {"action": "reject", "reason": "not now"})
            runs.wait(thread_id, timeout=60)  # rejected: nothing waits any more
            # A resolved alert says when it resolved and when it fired (issue 47 point 12).
            resolved = page.locator("#alerts li.alert.resolved")
            expect(resolved).to_contain_text(" resolved ")
            expect(resolved).to_contain_text("(fired ")
            expect(resolved).not_to_contain_text(" since ")
    finally:
        app.state.alerts.stop()
