"""Dashboard fixtures: an SQLite checkpoint store, the app in process behind a test
client (with the helpers the API tests post and start demo runs with), the app
served by uvicorn on a free loopback port, and headless Chromium (Debian's) driven
by Playwright."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="the [dashboard] extra is not installed")

from bench.dashboard import HEADLESS_FLAGS  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from aimegraph.checkpoints import open_checkpointer  # noqa: E402
from aimegraph.dashboard import create_app  # noqa: E402
from aimegraph.dashboard.runs import RunManager  # noqa: E402
from aimegraph.dashboard.server import serve_in_background  # noqa: E402

CHROMIUM = os.environ.get("AIMEGRAPH_TEST_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An SQLite checkpoint store; the working directory (where run workspaces go)
    is the test's own."""
    monkeypatch.chdir(tmp_path)
    return f"sqlite:///{tmp_path / 'checkpoints.db'}"


@pytest.fixture
def saver(store_url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    with open_checkpointer(store_url) as opened:
        yield opened


@pytest.fixture
def runs(saver: BaseCheckpointSaver[Any]) -> Iterator[RunManager]:
    manager = RunManager(saver)
    yield manager
    for thread_id in manager.active():  # nothing may write after the store closes
        manager.wait(thread_id, timeout=60)


@dataclass
class LiveServer:
    url: str
    app: Starlette
    runs: RunManager


@pytest.fixture
def live(saver: BaseCheckpointSaver[Any], runs: RunManager) -> Iterator[LiveServer]:
    app = create_app(saver, runs=runs, poll_seconds=0.05)
    with serve_in_background(app) as url:
        yield LiveServer(url, app, runs)


LOCAL = "http://127.0.0.1"


@pytest.fixture
def client(saver: BaseCheckpointSaver[Any], runs: RunManager) -> TestClient:
    return TestClient(create_app(saver, runs=runs), base_url=LOCAL)


def post(client: TestClient, path: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(path, json=body)


def demo(client: TestClient, runs: RunManager, **body: Any) -> str:
    response = post(client, "/api/demo", body)
    assert response.status_code == 202, response.text
    thread_id: str = response.json()["thread_id"]
    runs.wait(thread_id, timeout=60)
    return thread_id


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's Chromium through Playwright. Without it the browser tests skip,
    except under ``CI``, where ``make test`` installs it and they must run.

    Module scope: Playwright's sync API keeps an event loop running in this thread
    while it is open, which would break every later test that starts one."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc})")
    if not Path(CHROMIUM).exists():
        _unavailable(f"no Chromium at {CHROMIUM}: apt-get install chromium chromium-driver")
    with sync_playwright() as playwright:
        # Playwright gives every launch a fresh, empty profile (--user-data-dir).
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=HEADLESS_FLAGS, headless=True
        )
        yield browser
        browser.close()


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the dashboard's browser tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def page(chromium: Any, tmp_path: Path) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


@pytest.fixture
def screenshots() -> Path:
    """Where the browser tests leave their screenshots (a temporary folder unless
    ``AIMEGRAPH_SCREENSHOTS`` names one)."""
    default = Path(tempfile.gettempdir()) / "aimegraph-dashboard-screenshots"
    folder = Path(os.environ.get("AIMEGRAPH_SCREENSHOTS", default))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
"""Text a model or tool could produce that must never become markup."""

HOSTILE_SCENARIO: dict[str, Any] = {
    "goal": f"Show {HOSTILE}",
    "planner": [
        {
            "rationale": f"first plan {HOSTILE}",
            "tasks": [{"id": "t1", "title": f"Echo {HOSTILE}", "tool_bundles": ["compute"]}],
        },
        {
            "rationale": "second plan: try another way",
            "tasks": [{"id": "t2", "title": "Try another way", "tool_bundles": ["compute"]}],
        },
    ],
    "actors": {
        "t1": [{"tool": "submit_result", "args": {"status": "failed", "summary": HOSTILE}}],
        "t2": [{"tool": "submit_result", "args": {"status": "completed", "summary": "fine"}}],
    },
    "reporter": [{"text": f"Answer {HOSTILE}"}],
    "verifier": [{"passed": True, "reasoning": f"ok {HOSTILE}"}],
}


@pytest.fixture
def hostile_thread(saver: BaseCheckpointSaver[Any], tmp_path: Path) -> str:
    """A finished thread whose goal, task title, summary and answer hold markup,
    and whose first task failed into a replan. Run through the Python API, so no
    run settings are stored with it."""
    from aimegraph import AimeConfig, build_aime_graph
    from aimegraph.checkpoints import thread_config
    from aimegraph.models import ScriptedChatModel

    graph = build_aime_graph(
        ScriptedChatModel.from_dict(HOSTILE_SCENARIO),
        config=AimeConfig(workspace=tmp_path, task_retries=0),
        checkpointer=saver,
    )
    graph.invoke({"goal": HOSTILE_SCENARIO["goal"]}, thread_config("hostile"))
    return "hostile"
