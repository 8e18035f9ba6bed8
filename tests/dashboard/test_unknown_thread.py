"""A thread the store does not have: its page is a 404 saying so (no "unknown" run,
no rating form), and every API route about it answers 404 with the same error; a
thread a run is starting on (no checkpoint yet) keeps its page."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.memory import InMemoryStore
from starlette.testclient import TestClient
from tests.dashboard.conftest import LOCAL

from aimegraph.checkpoints import hold_thread
from aimegraph.dashboard import create_app
from aimegraph.dashboard.runs import RunManager

NO_THREAD = {"error": "no thread 'nope' in this checkpoint store"}
POSTS = {
    "resume": {"action": "approve"},
    "cancel": {},
    "notes": {"text": "prefer EU sources"},
    "feedback": {"rating": 2, "note": "wrong figure"},
}


def test_an_unknown_thread_is_a_404_page_and_404_json(saver: BaseCheckpointSaver[Any]) -> None:
    for store in (None, InMemoryStore()):  # feedback and notes need a store: 404 comes first
        client = TestClient(create_app(saver, store=store), base_url=LOCAL)
        page = client.get("/threads/nope")
        assert page.status_code == 404
        assert page.headers["content-type"].startswith("text/html")
        assert "No such thread" in page.text and "nope" in page.text
        assert "unknown" not in page.text and "feedback-form" not in page.text
        for path in ("", "/plan.svg", "/events"):
            answer = client.get(f"/api/threads/nope{path}")
            assert (answer.status_code, answer.json()) == (404, NO_THREAD), path
        for route, body in POSTS.items():
            answer = client.post(f"/api/threads/nope/{route}", json=body)
            assert (answer.status_code, answer.json()) == (404, NO_THREAD), route


def test_a_thread_a_run_is_starting_on_has_its_page(saver: BaseCheckpointSaver[Any]) -> None:
    client = TestClient(create_app(saver, runs=RunManager(saver)), base_url=LOCAL)
    # Another process holds the thread and has not written its first checkpoint yet.
    with hold_thread(saver, "starting"):
        page = client.get("/threads/starting")
        assert page.status_code == 200
        assert 'id="status" class="badge status-starting">starting<' in page.text
    assert client.get("/threads/starting").status_code == 404
