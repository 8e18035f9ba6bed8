"""Issue 38, point 7: the run and threads pages come with their current state in the
HTML (read without scripts, shown before the live stream connects, markup as text),
the "Send note" box only on a run that has not ended, and a config typo refused in one line."""

from __future__ import annotations

import json
import re
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.testclient import TestClient
from tests.dashboard.conftest import HOSTILE, LOCAL

from aimegraph.dashboard import create_app
from aimegraph.dashboard.app import STATIC
from aimegraph.dashboard.pages import run_page
from aimegraph.dashboard.runs import RunManager


def client_for(saver: BaseCheckpointSaver[Any], runs: RunManager) -> TestClient:
    return TestClient(create_app(saver, runs=runs), base_url=LOCAL)


def initial_state(html: str) -> Any:
    found = re.search(r'<script type="application/json" id="initial-state">(.*?)</script>', html)
    assert found is not None, html
    return json.loads(found.group(1))


def element(html: str, tag: str, element_id: str) -> str:
    """The inner HTML of the element ``tag`` with ``element_id``."""
    found = re.search(rf'<{tag} id="{element_id}"[^>]*>(.*?)</{tag}>', html, re.S)
    assert found is not None, f"no #{element_id} in the page"
    return found.group(1)


def test_the_run_page_holds_the_run_as_it_stands(
    saver: BaseCheckpointSaver[Any], runs: RunManager, hostile_thread: str
) -> None:
    html = client_for(saver, runs).get(f"/threads/{hostile_thread}").text
    assert 'id="status" class="badge status-succeeded">succeeded<' in html
    assert element(html, "h1", "goal") == "Show " + HOSTILE.replace("<", "&lt;").replace(
        ">", "&gt;"
    ).replace('"', "&quot;")
    assert "- [-] t1: Echo &lt;script&gt;" in element(html, "pre", "checklist")
    assert element(html, "pre", "final-answer").startswith("Answer &lt;script&gt;")
    state = initial_state(html)
    assert state["status"] == "succeeded" and state["goal"] == f"Show {HOSTILE}"
    assert [task["id"] for task in state["tasks"]] == ["t1", "t2"]
    # Text from the run cannot end the data block early: no "<" is left in it.
    block = html.split('id="initial-state">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and "\\u003cscript>" in block
    # A finished run reads no notes: the box is not shown.
    assert re.search(r'<section id="note-card" class="card" hidden>', html)


def test_the_note_box_shows_on_a_run_that_has_not_ended_only() -> None:
    template = STATIC / "run.html"
    for status in ("running", "paused", "stopped", "queued"):
        shown = run_page(template, "t", {"status": status, "goal": "g"})
        assert '<section id="note-card" class="card" >' in shown
    for status in ("succeeded", "failed", "rejected", "budget_exhausted", "cancelled"):
        assert 'id="note-card" class="card" hidden>' in run_page(template, "t", {"status": status})
    cancelled = run_page(template, "t", {"status": "cancelled", "reason": "cancelled"})
    assert element(cancelled, "p", "reason") == ""  # said once, by the badge
    unknown = run_page(template, "nothing-yet", None)
    assert "hidden>" in unknown and initial_state(unknown) is None


def test_the_threads_page_lists_the_threads(
    saver: BaseCheckpointSaver[Any], runs: RunManager, hostile_thread: str
) -> None:
    client = client_for(saver, runs)
    html = client.get("/").text
    rows = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    assert f'<tr data-thread="{hostile_thread}">' in rows
    assert "Show &lt;script&gt;" in rows and "status-succeeded" in rows
    assert element(html, "span", "count") == "1 of 1"
    assert [row["thread_id"] for row in initial_state(html)["threads"]] == [hostile_thread]
    filtered = client.get("/", params={"status": "paused"}).text
    assert 'data-thread="' not in filtered and element(filtered, "span", "count") == "0 of 1"


def test_a_config_typo_is_refused_in_one_line(
    saver: BaseCheckpointSaver[Any], runs: RunManager
) -> None:
    response = client_for(saver, runs).post(
        "/api/runs", json={"goal": "g", "config": {"max_paralel": 2}}
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "unknown setting 'max_paralel' (did you mean 'max_parallel'?)"
    }
