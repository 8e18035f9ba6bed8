"""An agent unit's own ``interrupt()`` (a value with no aimegraph ``kind``) is answered
on the dashboard: the API hands the answer's text back to it, and the run page shows
its value with a text box (a real browser); the unit's usage, which its agent does not
report, shows as unknown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.testclient import TestClient
from tests.dashboard.conftest import LiveServer
from tests.human_scenarios import REPORTED, scenario_spec
from tests.scripted import plan, spec

from aimegraph.cli import main
from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager

# The asker's graph calls interrupt("Which region?") and replies "Region chosen: <answer>".
UNITS = "tests.teams.test_backed_units:CLI_UNITS"
ASKER = {"planner": [plan(spec("t1", agent="asker"))], **REPORTED}


def paused_by_the_unit(store_url: str, tmp_path: Path, thread_id: str) -> None:
    """A run started as ``aimegraph run --agents``, paused on the unit's interrupt."""
    code = main(
        ["--checkpoints", store_url, "run", "Pick a region", "--model",
         scenario_spec(tmp_path, ASKER), "--agents", UNITS, "--thread", thread_id,
         "--workspace", str(tmp_path / "ws"), "--json"]
    )  # fmt: skip
    assert code == 5


def test_a_units_interrupt_is_answered_with_text_through_the_api(
    saver: BaseCheckpointSaver[Any], runs: RunManager, store_url: str, tmp_path: Path
) -> None:
    paused_by_the_unit(store_url, tmp_path, "unit-api")
    client = TestClient(create_app(saver, runs=runs), base_url="http://127.0.0.1")
    (waiting,) = client.get("/api/threads/unit-api").json()["interrupts"]
    assert set(waiting) == {"id", "value"} and waiting["value"] == "Which region?"
    answered = client.post(
        "/api/threads/unit-api/resume", json={"interrupt_id": waiting["id"], "answer": "EU"}
    )
    assert answered.status_code == 202, answered.text
    runs.wait("unit-api", timeout=60)
    run = client.get("/api/threads/unit-api").json()
    assert run["status"] == "succeeded", (run["reason"], runs.errors)
    (t1,) = run["tasks"]
    assert t1["result"]["summary"] == "Region chosen: EU"
    assert run["usage"]["unknown_tasks"] == ["t1"]


def test_a_units_interrupt_is_answered_on_the_run_page(
    live: LiveServer, page: Any, store_url: str, tmp_path: Path, screenshots: Path
) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    paused_by_the_unit(store_url, tmp_path, "unit-page")
    page.goto(f"{live.url}/threads/unit-page")
    expect(page.locator("body")).to_have_attribute("data-status", "paused")
    form = page.locator(".interrupt[data-kind='unit']")
    expect(form.locator("pre.question")).to_have_text("Which region?")
    form.locator("input.answer-input").fill("the EU")
    page.screenshot(path=screenshots / "run-unit-interrupt.png", full_page=True)
    form.get_by_role("button", name="Answer").click()
    expect(page.locator("body")).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(page.locator("#final-answer")).to_contain_text("Region chosen: the EU")
    # The unit's agent reports no usage: its task's row says unknown, not 0.
    unknown = page.locator("#usage tr.usage-unknown")
    expect(unknown.first).to_have_text("t1unknown (its agent reports no usage)")
    expect(page.locator("#usage tfoot tr")).to_contain_text("total (+ unknown)")
    page.locator("#usage").screenshot(path=screenshots / "run-unit-usage.png")
