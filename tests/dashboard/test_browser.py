"""The dashboard in a real browser (headless Chromium from Debian, driven by
Playwright): the threads page, the demo started from the page and followed to
the end, a plan approved on the page, and hostile text shown as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.dashboard.conftest import LiveServer

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
