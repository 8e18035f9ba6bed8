"""The threads page in a real browser (headless Chromium, as test_browser.py): its
table fits a 1,100 px window whatever the thread ids and goals, and a resolved alert
says when it resolved as well as when it fired (issue 47, point 12); a run page's usage
table has the share spent outside tasks, so that its task rows add up (point 5)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from tests.dashboard.conftest import LiveServer
from tests.scripted import call, plan, spec, submit

from aimegraph import AimeConfig, build_aime_graph
from aimegraph.checkpoints import thread_config
from aimegraph.models import ScriptedChatModel

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect

LONG_ID = "thread_with_an_unbreakable_identifier_0123456789"
LONG_GOAL = "Multiply six by seven, then say which of the two factors is larger and why " * 4


@pytest.fixture
def narrow_page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1100, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


def test_the_threads_table_fits_a_1100_px_window(
    live: LiveServer,
    narrow_page: Any,
    saver: BaseCheckpointSaver[Any],
    tmp_path: Path,
    screenshots: Path,
) -> None:
    scenario = {
        "planner": [plan(spec("t1", tool_bundles=["compute"]))],
        "actors": {"t1": [call("calculator", expression="6*7"), submit("42")]},
    }
    for thread_id, budget in ((LONG_ID, 2), ("a-second-thread", None)):
        model = ScriptedChatModel.from_dict({**scenario, "any_goal": True})
        config = AimeConfig(workspace=tmp_path, max_llm_calls=budget)
        graph = build_aime_graph(model, config=config, checkpointer=saver)
        graph.invoke({"goal": LONG_GOAL}, thread_config(thread_id))

    narrow_page.goto(live.url + "/")
    rows = narrow_page.locator("#threads tbody tr")
    expect(rows).to_have_count(2)
    long_row = narrow_page.locator(f"#threads tbody tr[data-thread='{LONG_ID}']")
    expect(long_row).to_contain_text("budget_exhausted")
    narrow_page.screenshot(path=screenshots / "threads-1100px.png", full_page=True)
    # Nothing sticks out: not the page, not the table out of its card.
    assert narrow_page.evaluate("document.documentElement.scrollWidth") <= 1100
    table = narrow_page.locator("#threads").bounding_box()
    card = narrow_page.locator("section.card", has=narrow_page.locator("#threads")).bounding_box()
    assert table and card and table["x"] + table["width"] <= card["x"] + card["width"]
    # The id wraps, whole; the goal is cut short.
    expect(long_row.locator("a")).to_have_text(LONG_ID)
    goal = long_row.locator("td.goal")
    assert goal.evaluate("cell => cell.scrollWidth > cell.clientWidth")


def test_the_run_pages_usage_table_adds_the_share_outside_tasks(
    live: LiveServer, page: Any, saver: BaseCheckpointSaver[Any], tmp_path: Path
) -> None:
    scenario = {
        "planner": [plan(spec("t1", tool_bundles=["compute"]))],
        "actors": {"t1": [call("calculator", expression="6*7"), submit("42")]},
    }
    graph = build_aime_graph(
        ScriptedChatModel.from_dict(scenario),
        config=AimeConfig(workspace=tmp_path),
        checkpointer=saver,
    )
    out = graph.invoke({"goal": "Multiply six by seven"}, thread_config("used"))
    page.goto(f"{live.url}/threads/used")
    row = page.locator("#usage tr", has=page.locator("td", has_text="outside tasks"))
    expect(row).to_have_count(1)
    # Its LLM calls: the planner's, reporter's and verifier's (t1's are in t1's row).
    expect(row.locator("td").nth(1)).to_have_text(str(out["usage"].outside_tasks.llm_calls))
    assert out["usage"].outside_tasks.llm_calls == out["usage"].llm_calls - 2
