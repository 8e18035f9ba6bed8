"""Rating a run on the dashboard (issue 37, point 4): the run page's rating control
posts to ``/api/threads/{id}/feedback``, which stores the verdict in the dashboard's
memory store; a low rating becomes a user lesson."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.memory import InMemoryStore
from starlette.testclient import TestClient
from tests.dashboard.test_human_control import LOCAL, start
from tests.human_scenarios import ASKING

from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager
from aimegraph.memory import LESSONS, namespace
from aimegraph.memory.feedback import rated_runs


def test_a_run_rated_on_the_dashboard_becomes_a_lesson(
    saver: BaseCheckpointSaver[Any], tmp_path: Path
) -> None:
    store = InMemoryStore()
    runs = RunManager(saver, store=store)
    client = TestClient(create_app(saver, runs=runs), base_url=LOCAL)
    thread_id = start(client, runs, tmp_path, ASKING)
    page = client.get(f"/threads/{thread_id}")
    assert 'id="feedback-form"' in page.text and 'id="feedback-rating"' in page.text
    api = f"/api/threads/{thread_id}/feedback"
    assert client.post("/api/threads/ghost/feedback", json={"rating": 2}).status_code == 404
    assert client.post(api, json={"rating": "2"}).status_code == 400
    for bad in (0, 6):  # a rating, not a setting (issue 47 point 12)
        refused = client.post(api, json={"rating": bad})
        assert refused.status_code == 400
        assert refused.json() == {"error": f"rating must be a whole number from 1 to 5, not {bad}"}
    rated = client.post(api, json={"rating": 1, "note": "Ask which mirror first."})
    assert rated.status_code == 201, rated.text
    assert rated.json()["rating"] == 1 and rated.json()["goal"] == "g"
    (verdict,) = rated_runs(store, "default")
    assert verdict.thread_id == thread_id and verdict.note == "Ask which mirror first."
    lessons = [i.value for i in store.search(namespace("default", LESSONS))]
    assert [v["source"] for v in lessons] == ["user"]


def test_rating_needs_the_memory_store(
    saver: BaseCheckpointSaver[Any], runs: RunManager, tmp_path: Path
) -> None:
    client = TestClient(create_app(saver, runs=runs), base_url=LOCAL)
    thread_id = start(client, runs, tmp_path, ASKING)
    refused = client.post(f"/api/threads/{thread_id}/feedback", json={"rating": 3})
    assert refused.status_code == 400 and "memory store" in refused.text
